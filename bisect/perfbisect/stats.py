"""What a bisection measures and how sure it has to be: parsing a measurement's output, and the policy that turns
into the A/B decisions of perfdash.ab (the one decision function of the confirmation, the steps and the culprit's
verification).

Two kinds of samples: numbers (a time, a speedup) and status words (``pass``/``fail``, the accuracy statuses of the
result contract).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from perfdash.ab import PASS_WORDS, PRIOR_FIRST_LOOK, AbPolicy, NoisePrior, is_failing, pairs_to_decide
from perfdash.bisection import Direction, Sample
from perfdash.contract import KNOWN_STATUSES
from perfdash.metric_registry import Better

STATUS_WORDS: frozenset[str] = frozenset(
    set(KNOWN_STATUSES) | PASS_WORDS | {"fail", "failed", "bad", "crash", "error", "nan"}
)
MIN_BOUNDARY_PCT = 0.5
__all__ = ["PASS_WORDS", "STATUS_WORDS", "NoValue", "Policy", "is_failing", "is_status", "parse_output"]
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


@dataclass(frozen=True, slots=True)
class Policy:
    """How sure a bisection has to be, and how much it may measure to get there. Every comparison is one sequential
    paired A/B (perfdash.ab): ``repeats`` pairs at the confirmation's first look (a step's or the verification's
    first look is 2 pairs at most: they pool the noise the confirmation measured), at most ``max_pairs``.

    ``series_cv`` / ``series_runs``: the series' own between-run noise (robust CV, relative) and the runs it rests
    on, as the service's request carries it. The confirmation (the first A/B, which pools no earlier one) then
    pools it as a prior (perfdash.ab.NoisePrior), and its first look is the pairs that noise needs to decide
    (``pairs_to_decide``), 5 to ``repeats``.
    Without it (None), every A/B is as before."""

    direction: Direction = Better.LOWER
    threshold_pct: float = 5.0  # smallest regression (median change, %) worth bisecting
    alpha: float = 0.01  # bound on a false "different" (and a false "same") of each A/B, over all its looks
    repeats: int = 6  # pairs at the confirmation's first look
    max_pairs: int = 160  # pairs of an A/B before "unknown" (Pinpoint's cap)
    series_cv: float | None = None  # the series' between-run robust CV (0.03 = 3 %), from its nightly history
    series_runs: int = 0  # the runs series_cv rests on

    def __post_init__(self) -> None:
        if self.direction not in tuple(Better):
            raise ValueError(f"direction must be lower or higher, got {self.direction!r}")
        object.__setattr__(self, "direction", Better(self.direction))  # "lower" as given on the command line
        if self.repeats < 1 or self.max_pairs < self.repeats:
            raise ValueError("repeats must be >= 1 and max_pairs >= repeats")
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {self.alpha}")
        if self.threshold_pct < 0:
            raise ValueError("threshold_pct must be >= 0")
        if self.series_cv is not None and (not self.series_cv >= 0 or self.series_runs < 1):
            raise ValueError("series_cv must be >= 0, with series_runs >= 1 runs")

    @property
    def prior(self) -> NoisePrior | None:
        """The series' noise as a prior of every A/B's scale; None without an estimate."""
        if self.series_cv is None:
            return None
        return NoisePrior.of_series(self.series_cv, self.series_runs)

    def ab(self, boundary_pct: float | None = None, pooled: bool = False, exact: bool = False) -> AbPolicy:
        """The A/B policy of one comparison; ``boundary_pct`` defaults to the threshold (the confirmation's).
        ``pooled``: the A/B pools the noise of earlier ones (a step, the verification), so it may look after 2 pairs.
        ``exact``: the boundary is exactly the other level (a step: good's level or bad's), not a least change."""
        boundary = max(self.threshold_pct if boundary_pct is None else boundary_pct, MIN_BOUNDARY_PCT)
        # (A 0 % threshold, "any change", still needs a boundary for "same": the smallest one a timing can resolve.)
        # The series' history stands in for the machine's noise only until the bisection has measured some: an A/B
        # that pools earlier A/Bs' residuals (a step, the verification) has them, from this machine, of this kind
        # (with the prior in every A/B, 20 % regressions at the measured noise lost 3-5 points of right culprits:
        # a heavy-tailed noise's robust CV is below the clipped scale the A/B uses; bench/README.md, issue 39).
        prior = None if pooled else self.prior
        if pooled:
            start = min(self.repeats, 2)
        elif prior is not None:
            # The noise is known before the first pair: look first where that noise could decide, never after more
            # pairs than without it, never before the pairs can overrule the prior (PRIOR_FIRST_LOOK).
            start = min(self.repeats, max(PRIOR_FIRST_LOOK, pairs_to_decide(prior.scale, boundary, self.alpha)))
        else:
            start = self.repeats
        return AbPolicy(direction=self.direction, boundary_pct=boundary, alpha=self.alpha, start=start,
                        cap=self.max_pairs, exact=exact, prior=prior)

    @property
    def cap(self) -> int:
        return self.ab().cap
