"""The statistics of a bisection: is the regression real, and does a commit look like the good or the bad end?

Two kinds of samples: numbers (a time, a speedup) and status words (``pass``/``fail``, the accuracy statuses of the
result contract). Numbers are compared with Mann-Whitney U (rank based, so one outlier run cannot flip a decision);
statuses by their failure rate.

Every function here is pure: the bench drives them with simulated histories, the CLI with real measurements.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from scipy.stats import fisher_exact, mannwhitneyu

from perfdash.bisection import Direction, Sample
from perfdash.contract import KNOWN_STATUSES, PASSING_STATUSES
from perfdash.metric_registry import Better

Side = Literal["good", "bad"]

# Words a --measure command may print instead of a number. "pass"-like words are passing, everything else fails.
PASS_WORDS: frozenset[str] = frozenset(PASSING_STATUSES | {"ok", "good", "passed", "success"})
STATUS_WORDS: frozenset[str] = frozenset(
    set(KNOWN_STATUSES) | PASS_WORDS | {"fail", "failed", "bad", "crash", "error", "nan"}
)
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


class NoValue(ValueError):
    """A measurement printed neither a number nor a status word."""


def parse_output(stdout: str) -> Sample:
    """The sample a measure command printed: a status word when its last token is one, else the last number."""
    tokens = stdout.split()
    if tokens and tokens[-1].strip(".,:;").lower() in STATUS_WORDS and tokens[-1].lower() != "nan":
        return tokens[-1].strip(".,:;")
    numbers = _NUMBER.findall(stdout)
    if not numbers:
        raise NoValue("the measure command printed no number and no status word")
    value = float(numbers[-1])
    if not math.isfinite(value):
        raise NoValue(f"the measure command printed a non-finite value {numbers[-1]!r}")
    return value


def is_status(sample: Sample) -> bool:
    return isinstance(sample, str)


def is_failing(sample: Sample) -> bool:
    return isinstance(sample, str) and sample.lower() not in PASS_WORDS


@dataclass(frozen=True, slots=True)
class Policy:
    """How sure a bisection has to be, and how much it may measure to get there."""

    direction: Direction = Better.LOWER
    threshold_pct: float = 5.0  # smallest regression (median change, %) worth bisecting
    alpha: float = 0.01  # one-sided significance level of every test
    repeats: int = 5  # measurements per commit and round
    max_rounds: int = 3  # rounds per commit (and for the confirmation) before deciding on the point estimate
    # Good and bad are measured this many times more per round: every step is compared with them, so their medians'
    # uncertainty enters every decision (measured in bench/bisect.py: 2 makes 5 % in 2 % noise reliable at N=256).
    reference_factor: int = 2

    def __post_init__(self) -> None:
        if self.direction not in tuple(Better):
            raise ValueError(f"direction must be lower or higher, got {self.direction!r}")
        object.__setattr__(self, "direction", Better(self.direction))  # "lower" as given on the command line
        if self.repeats < 1 or self.max_rounds < 1 or self.reference_factor < 1:
            raise ValueError("repeats, max_rounds and reference_factor must be >= 1")
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {self.alpha}")
        if self.threshold_pct < 0:
            raise ValueError("threshold_pct must be >= 0")

    @property
    def worse(self) -> Literal["greater", "less"]:
        """The Mann-Whitney alternative that means 'x is worse than y'."""
        return "greater" if self.direction is Better.LOWER else "less"

    @property
    def better(self) -> Literal["greater", "less"]:
        return "less" if self.direction is Better.LOWER else "greater"


@dataclass(frozen=True, slots=True)
class Confirmation:
    reproduced: bool | None  # None: not sure yet, measure another round
    change_pct: float  # regression size, % (positive = worse), or failure-rate change in points for statuses
    p_value: float
    reason: str


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Side | None  # None: undecided, measure another round
    p_good: float | None  # p that the commit is no worse than good (small: it is worse)
    p_bad: float | None  # p that the commit is no better than bad (small: it is better)
    position: float  # 0 = like good, 1 = like bad
    reason: str
    forced: bool = False  # decided on the median alone: the tests were still undecided after the last round


def _numbers(samples: Sequence[Sample]) -> list[float]:
    if any(isinstance(s, str) for s in samples):
        raise ValueError("mixed numbers and status words in one sample set")
    return [float(s) for s in samples]


def _mwu(x: Sequence[float], y: Sequence[float], alternative: str) -> float:
    if len(set(x)) == 1 and set(x) == set(y):  # identical constants: no evidence either way
        return 1.0
    method = "exact" if len(x) + len(y) <= 40 else "asymptotic"
    return float(mannwhitneyu(x, y, alternative=alternative, method=method).pvalue)


def change_pct(good: Sequence[float], bad: Sequence[float], direction: Direction) -> float:
    """Median change from good to bad, % of good, positive when bad is worse."""
    g, b = statistics.median(good), statistics.median(bad)
    if g == 0:
        return math.inf if b != g else 0.0
    raw = (b - g) / abs(g) * 100.0
    return raw if direction == Better.LOWER else -raw


def failure_rate(samples: Sequence[Sample]) -> float:
    return sum(is_failing(s) for s in samples) / len(samples) if samples else 0.0


def confirm(good: Sequence[Sample], bad: Sequence[Sample], policy: Policy, final: bool = False) -> Confirmation:
    """Is bad significantly and sufficiently worse than good? ``final``: no more rounds, answer yes or no."""
    if not good or not bad:
        raise ValueError("confirmation needs samples of both good and bad")
    if any(map(is_status, good)) or any(map(is_status, bad)):
        return _confirm_status(good, bad, policy, final)
    g, b = _numbers(good), _numbers(bad)
    change = change_pct(g, b, policy.direction)
    p = _mwu(b, g, policy.worse)
    if change < policy.threshold_pct / 2 or (p >= 0.5 and change < policy.threshold_pct):
        # Clearly smaller than the threshold: more samples would not make it a regression worth blaming anyone for.
        return Confirmation(False, change, p, f"change {change:+.2f}% is below the threshold {policy.threshold_pct}%")
    if p < policy.alpha and change >= policy.threshold_pct:
        return Confirmation(True, change, p, f"bad is {change:+.2f}% worse (Mann-Whitney p={p:.2g})")
    if final:
        why = (f"not significant (p={p:.2g} >= {policy.alpha})" if p >= policy.alpha
               else f"below the threshold {policy.threshold_pct}%")
        return Confirmation(False, change, p, f"change {change:+.2f}% {why}")
    return Confirmation(None, change, p, f"change {change:+.2f}% (p={p:.2g}): measuring more")


def _confirm_status(good: Sequence[Sample], bad: Sequence[Sample], policy: Policy, final: bool) -> Confirmation:
    fg, fb = failure_rate(good), failure_rate(bad)
    change = (fb - fg) * 100.0
    table = [[sum(map(is_failing, bad)), len(bad) - sum(map(is_failing, bad))],
             [sum(map(is_failing, good)), len(good) - sum(map(is_failing, good))]]
    p = float(fisher_exact(table, alternative="greater").pvalue)
    # A deterministic flip (every good run passes, every bad run fails) is the common case of an accuracy or crash
    # bisection: it reproduces without needing the sample size a significance test on two runs would ask for.
    unanimous = fg == 0.0 and fb == 1.0
    if unanimous or (p < policy.alpha and change > 0):
        return Confirmation(True, change, p, f"failure rate {fg:.0%} at good, {fb:.0%} at bad (Fisher p={p:.2g})")
    if fb <= fg or final:
        return Confirmation(False, change, p, f"failure rate {fg:.0%} at good, {fb:.0%} at bad: not reproduced")
    return Confirmation(None, change, p, f"failure rate {fg:.0%} at good, {fb:.0%} at bad: measuring more")


def decide(samples: Sequence[Sample], good: Sequence[Sample], bad: Sequence[Sample], policy: Policy,
           final: bool = False) -> Decision:
    """Does a commit's sample set look like the good reference or the bad one?

    A commit is bad when it is significantly worse than good and not significantly better than bad (one-sided
    Mann-Whitney tests at ``alpha`` against both confirmed references), good in the mirror case. When both tests or
    neither are significant the data cannot tell; another round is measured, and after the last one (``final``) the
    commit goes to the reference its median is closer to (a partial regression counts as bad past half way).
    """
    if not samples:
        raise ValueError("no samples to decide on")
    if any(map(is_status, samples)) or any(map(is_status, good)) or any(map(is_status, bad)):
        return _decide_status(samples, good, bad, policy, final)
    s, g, b = _numbers(samples), _numbers(good), _numbers(bad)
    g_med, b_med = statistics.median(g), statistics.median(b)
    span = b_med - g_med
    position = (statistics.median(s) - g_med) / span if span else 0.5
    p_good = _mwu(s, g, policy.worse)
    p_bad = _mwu(s, b, policy.better)
    worse_than_good, better_than_bad = p_good < policy.alpha, p_bad < policy.alpha
    # The other test must not even hint (p above ten times alpha): a commit 2 % off good and 4 % off bad is measured
    # again rather than called good, since five samples per reference leave their medians a little uncertain too.
    like_good, like_bad = p_good >= 10 * policy.alpha, p_bad >= 10 * policy.alpha
    if worse_than_good and like_bad and position >= 0.5:
        return Decision("bad", p_good, p_bad, position, f"worse than good (p={p_good:.2g}), like bad")
    if better_than_bad and like_good and position < 0.5:
        return Decision("good", p_good, p_bad, position, f"better than bad (p={p_bad:.2g}), like good")
    if final:
        verdict: Side = "bad" if position >= 0.5 else "good"
        return Decision(verdict, p_good, p_bad, position,
                        f"undecided by the tests; median at {position:.0%} of the way to bad", forced=True)
    return Decision(None, p_good, p_bad, position, f"undecided (p_good={p_good:.2g}, p_bad={p_bad:.2g})")


def _decide_status(samples: Sequence[Sample], good: Sequence[Sample], bad: Sequence[Sample], policy: Policy,
                   final: bool) -> Decision:
    fg, fb, fs = failure_rate(good), failure_rate(bad), failure_rate(samples)
    span = fb - fg
    position = (fs - fg) / span if span else 0.5
    # Unanimous samples that match a unanimous reference decide at once: statuses are usually deterministic.
    if fs in (0.0, 1.0) and fs == fb and fg != fb:
        return Decision("bad", None, None, position, f"{fs:.0%} failing, like bad")
    if fs in (0.0, 1.0) and fs == fg and fg != fb:
        return Decision("good", None, None, position, f"{fs:.0%} failing, like good")
    if final:
        verdict: Side = "bad" if position >= 0.5 else "good"
        return Decision(verdict, None, None, position, f"{fs:.0%} failing: closest to {verdict}", forced=True)
    return Decision(None, None, None, position, f"{fs:.0%} failing (good {fg:.0%}, bad {fb:.0%}): undecided")
