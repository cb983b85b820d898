"""One sequential, paired A/B decision: are two builds' measurements "different", "same", or still "unknown"?

Used by every A/B perfdash makes: perfbisect's confirmation of good against bad, each step of its search (the commit
against good), the verification of a named culprit against its parent, and therefore the service's confirm requests
(a confirm request is perfbisect's confirmation alone). Torch-free and service-free, so bisect and service share it.

How (the shape of Chromium's Pinpoint, with a paired test):

- The two sides are measured in *pairs* on the same machine, one right after the other; which side goes first is
  random but balanced (half the pairs of a round start with A), so frequency drift and machine load hit both sides
  alike and cancel in each pair's log ratio instead of reaching the verdict.
- Repeats are added in rounds: ``start`` pairs, then the total doubles (``growth``) up to ``cap`` pairs. Each round
  ends with a decision; the run stops at the first "different" or "same". At the cap the answer is "unknown", and
  the cap is part of the answer.
- Numbers: d = log(B / A) per pair, signed so that d > 0 means B is worse. The line is half the boundary in log
  terms (the boundary: the smallest change that counts, a confirmation's threshold; for a bisection step, the
  confirmed regression, so the line is the midpoint between the good and the bad level). Two one-sided Wilcoxon
  signed-rank tests against the line (rank based: one outlier run cannot flip a decision), each at
  ``alpha / rounds`` per look: "different" when d is significantly above the line, "same" when significantly below
  it. Bonferroni over the looks: with B no worse than
  A, the chance of a false "different" over a whole sequential A/B is at most ``alpha``, however many rounds it takes
  (and smaller still, since the line is above 0).
- Statuses (accuracy words, "crash"): failure rates, Fisher's exact test at the same per-look level; every A run
  passing and every B run failing is "different" at once (the deterministic case), equal rates with every run the
  same is "same".

Everything the decision saw is in the result (``AbRecord``): samples per side, the order they were measured in, every
round's sizes and p-values, the cap. tests/contract/test_ab.py measures the false "different" rate on A/A data.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field
from scipy.stats import fisher_exact, wilcoxon

from perfdash.contract import PASSING_STATUSES
from perfdash.metric_registry import Better

AbAnswer = Literal["different", "same", "unknown"]
AbSide = Literal["A", "B"]
Sample = float | str

# Words a measurement may print instead of a number: "pass"-like words are passing, everything else fails.
PASS_WORDS: frozenset[str] = frozenset(PASSING_STATUSES | {"ok", "good", "passed", "success"})


def is_failing(sample: Sample) -> bool:
    return isinstance(sample, str) and sample.lower() not in PASS_WORDS


@dataclass(frozen=True, slots=True)
class AbPolicy:
    """How an A/B is run and decided. ``boundary_pct``: the smallest change that counts (see the module doc)."""

    direction: Better = Better.LOWER
    boundary_pct: float = 5.0
    alpha: float = 0.01  # bound on a false "different" over the whole sequential A/B
    start: int = 10  # pairs in the first round (Pinpoint starts at 10 a side)
    growth: int = 2  # each round multiplies the total by this
    rounds: int = 5  # rounds before "unknown" (cap = start * growth ** (rounds - 1) pairs)

    def __post_init__(self) -> None:
        object.__setattr__(self, "direction", Better(self.direction))
        if self.start < 1 or self.growth < 2 or self.rounds < 1:
            raise ValueError("start >= 1, growth >= 2 and rounds >= 1 are needed")
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {self.alpha}")
        if self.boundary_pct <= 0:
            raise ValueError("boundary_pct must be > 0")

    @property
    def schedule(self) -> tuple[int, ...]:
        """Total pairs after each round."""
        return tuple(self.start * self.growth**r for r in range(self.rounds))

    @property
    def cap(self) -> int:
        return self.schedule[-1]

    @property
    def line_pct(self) -> float:
        """The dividing line: the midpoint, on the log scale the test works on, between no change and the boundary
        (the smallest change that counts, or the bad level of a bisection); about half the boundary for small ones
        (2.47 % for 5 %), and still between the two levels for a 20-fold slowdown."""
        return (math.sqrt(1 + self.boundary_pct / 100) - 1) * 100

    @property
    def alpha_per_look(self) -> float:
        return self.alpha / self.rounds


class AbRound(BaseModel):
    pairs: int  # total pairs after this round
    answer: AbAnswer
    change_pct: float | None  # median change of B against A, % (positive: B worse); failure-rate points for statuses
    p_different: float | None  # p of "B is no worse than A" (small: different)
    p_same: float | None  # p of "B is worse by the boundary or more" (small: same)
    reason: str


class AbRecord(BaseModel):
    """One A/B as it happened: what a reader needs to check the answer."""

    purpose: str  # confirm | step | verify
    a: str  # what A is (a commit)
    b: str
    answer: AbAnswer
    samples_a: list[Sample] = Field(default_factory=list)
    samples_b: list[Sample] = Field(default_factory=list)
    order: str = ""  # the sides in the order they were measured, e.g. "ABBA..."
    rounds: list[AbRound] = Field(default_factory=list)
    boundary_pct: float
    line_pct: float  # the line the tests compare the change with (AbPolicy.line_pct)
    alpha: float
    alpha_per_look: float
    cap: int  # pairs at most
    capped: bool = False  # ended at the cap, still unknown

    @property
    def last(self) -> AbRound:
        return self.rounds[-1]


def balanced_order(pairs: int, rng: random.Random) -> list[tuple[AbSide, AbSide]]:
    """``pairs`` pairs, half of them A first (the odd one at random), shuffled."""
    a_first = pairs // 2 + (rng.random() < 0.5 if pairs % 2 else 0)
    orders: list[tuple[AbSide, AbSide]] = [("A", "B")] * a_first + [("B", "A")] * (pairs - a_first)
    rng.shuffle(orders)
    return orders


def _log_ratios(a: Sequence[float], b: Sequence[float], direction: Better) -> list[float]:
    sign = 1.0 if direction is Better.LOWER else -1.0
    return [sign * math.log(y / x) for x, y in zip(a, b, strict=True)]


def _signed_rank_p(d: Sequence[float], alternative: Literal["greater", "less"]) -> float:
    if all(v == 0 for v in d):
        return 1.0
    return float(wilcoxon(d, alternative=alternative, zero_method="zsplit").pvalue)


def decide(a: Sequence[Sample], b: Sequence[Sample], policy: AbPolicy, final: bool = False) -> AbRound:
    """The decision on the pairs so far (``a[i]`` and ``b[i]`` were measured together). ``final``: at the cap."""
    if len(a) != len(b) or not a:
        raise ValueError("an A/B decision needs the same positive number of samples on both sides")
    alpha = policy.alpha_per_look
    if any(isinstance(s, str) for s in (*a, *b)):
        return _decide_status(a, b, policy, final)
    if any(float(s) <= 0 for s in (*a, *b)):
        raise ValueError("A/B samples must be positive (times, speedups, throughputs)")
    d = _log_ratios([float(x) for x in a], [float(y) for y in b], policy.direction)
    change = math.expm1(statistics.median(d)) * 100.0
    line = math.log1p(policy.line_pct / 100.0)
    p_diff = _signed_rank_p([v - line for v in d], "greater")
    p_same = _signed_rank_p([v - line for v in d], "less")
    pairs = len(d)
    if p_diff < alpha:
        return AbRound(pairs=pairs, answer="different", change_pct=change, p_different=p_diff, p_same=p_same,
                       reason=f"B {change:+.2f}% worse, above the {policy.line_pct:.3g}% line "
                              f"(Wilcoxon p={p_diff:.2g} < {alpha:.2g})")
    if p_same < alpha:
        return AbRound(pairs=pairs, answer="same", change_pct=change, p_different=p_diff, p_same=p_same,
                       reason=f"change {change:+.2f}%, below the {policy.line_pct:.3g}% line (p={p_same:.2g})")
    why = "at the cap" if final else "measuring more"
    return AbRound(pairs=pairs, answer="unknown", change_pct=change, p_different=p_diff, p_same=p_same,
                   reason=f"change {change:+.2f}% (p_different={p_diff:.2g}, p_same={p_same:.2g}): {why}")


def _decide_status(a: Sequence[Sample], b: Sequence[Sample], policy: AbPolicy, final: bool) -> AbRound:
    fa, fb = (sum(map(is_failing, s)) for s in (a, b))
    ra, rb = fa / len(a), fb / len(b)
    change = (rb - ra) * 100.0
    p = float(fisher_exact([[fb, len(b) - fb], [fa, len(a) - fa]], alternative="greater").pvalue)
    text = f"failure rate {ra:.0%} at A, {rb:.0%} at B (Fisher p={p:.2g})"
    if (ra == 0.0 and rb == 1.0) or p < policy.alpha_per_look:
        return AbRound(pairs=len(a), answer="different", change_pct=change, p_different=p, p_same=None, reason=text)
    if rb <= ra:
        return AbRound(pairs=len(a), answer="same", change_pct=change, p_different=p, p_same=None, reason=text)
    return AbRound(pairs=len(a), answer="unknown", change_pct=change, p_different=p, p_same=None,
                   reason=text + (": at the cap" if final else ": measuring more"))


Measure = Callable[[AbSide, int], Sample]  # (side, index of that side's sample) -> the sample


def change_half_width_pct(a: Sequence[Sample], b: Sequence[Sample], direction: Better) -> float:
    """About the 95 % half-width of the change estimate, %: two standard errors of the mean log ratio."""
    if any(isinstance(s, str) for s in (*a, *b)):
        return 0.0  # statuses: a failure rate, no change to settle (the deterministic case is decided at once)
    if len(a) < 2:
        return math.inf
    d = _log_ratios([float(x) for x in a], [float(y) for y in b], direction)
    return 2 * statistics.stdev(d) / math.sqrt(len(d)) * 100.0


def run_ab(measure: Measure, policy: AbPolicy, rng: random.Random, *, purpose: str, a: str, b: str,
           on_round: Callable[[AbRound], None] = lambda _r: None, settle: float | None = None) -> AbRecord:
    """Measure A and B in balanced random pairs, round by round, until "different", "same" or the cap.

    ``measure(side, i)`` returns the i-th sample of a side; a caller that resumes returns stored samples for the
    indices it has (the order comes from ``rng``, so seed it with the A/B's identity to replay the same order).
    ``settle``: after "different", go on measuring (up to the cap) until the change is known to this share of itself
    (``change_half_width_pct``); a bisection's steps are placed against that change, so it must be tight."""
    samples: dict[AbSide, list[Sample]] = {"A": [], "B": []}
    order: list[str] = []
    record = AbRecord(purpose=purpose, a=a, b=b, answer="unknown", boundary_pct=policy.boundary_pct,
                      line_pct=policy.line_pct, alpha=policy.alpha, alpha_per_look=policy.alpha_per_look,
                      cap=policy.cap)
    done, reached = 0, False
    for number, total in enumerate(policy.schedule, start=1):
        for pair in balanced_order(total - done, rng):
            for side in pair:
                samples[side].append(measure(side, len(samples[side])))
                order.append(side)
        done = total
        result = decide(samples["A"], samples["B"], policy, final=number == policy.rounds)
        record.rounds.append(result)
        on_round(result)
        if not reached:
            reached = result.answer == "different"
            if result.answer == "same":
                break
        # Once "different" (decided at that look), later rounds only settle the estimate; their answers are recorded.
        if reached and (settle is None or change_half_width_pct(samples["A"], samples["B"], policy.direction)
                        <= settle * abs(result.change_pct or 0.0)):
            break
    record.answer = "different" if reached else record.rounds[-1].answer
    record.capped = record.answer == "unknown"
    record.samples_a, record.samples_b, record.order = samples["A"], samples["B"], "".join(order)
    return record
