"""One sequential, paired A/B decision: are two builds' measurements "different", "same", or still "unknown"?

Used by every A/B perfdash makes: perfbisect's confirmation of good against bad, each step of its search (the commit
against good), the verification of a named culprit against its parent, and therefore the service's confirm requests
(a confirm request is perfbisect's confirmation alone). Torch-free and service-free, so bisect and service share it.

How (the shape of Chromium's Pinpoint, with a paired sequential probability ratio test):

- The two sides are measured in *pairs* on the same machine, one right after the other; which side goes first is
  random but balanced (every two pairs, one starts with A), so frequency drift and machine load hit both sides alike
  and cancel in each pair's log ratio instead of reaching the verdict.
- Pairs are added one look at a time (``start`` pairs, then one pair per look up to 8, then an eighth more per look)
  up to ``cap`` pairs. The run stops at the first "different" or "same"; at the cap the answer is "unknown", and the
  cap is part of the answer.
- Numbers: d = log(B / A) per pair, signed so that d > 0 means B is worse. Two exact hypotheses: "no change" (d
  centred on 0) and "worse by the boundary" (centred on log(1 + boundary); the boundary is the smallest change that
  counts, a confirmation's threshold, or for a bisection step the confirmed regression: the commit is either at
  good's level or at bad's). Wald's sequential probability ratio test between the two: the log likelihood ratio of
  all pairs so far, "different" when it reaches log(1 / alpha), "same" when it falls to -log(1 / alpha). Unless the
  two levels are exact (``AbPolicy.exact``: a step), "different" weighs a mixture of levels (0.9 on the boundary,
  0.1 on 2, 4, 8, ... times it), so a change far past the boundary is found in heavy noise too. The pairs'
  likelihood is Student-t with 5 degrees of freedom, each pair's term clipped where the t ratio peaks: one pair
  adds a bounded amount, so one outlier run (a busy machine) cannot decide an A/B alone, and a 45-fold change
  counts as much as the peak instead of falling back towards 0.
- Its scale (the spread of d) is estimated robustly from the pairs' successive differences, pooled with ``noise``
  (the same residuals of the A/Bs before it in the same bisection, so a step knows the noise from the confirmation),
  and inflated to an upper 90 % confidence bound for the number of residuals it rests on: few pairs are not taken
  to be precise. With a known scale, Wald's bound makes a false "different" at most alpha at any stopping
  time; with the estimated one, tests/contract/test_ab.py and bench/ab_false_rate.py measure it (<= 1 % on A/A
  data).
- A prior (``AbPolicy.prior``, ``NoisePrior``): the series' own between-run noise from its nightly history
  (service/queries/noise.py), sent with the service's request (perfbisect gives it to the confirmation, the A/B that
  has no earlier one to pool). Each A/B sample is one full ``perfdash run``, the
  same kind of number as a nightly result, so one pair's log ratio has sqrt(2) times the series' robust CV. The prior
  is pooled into the scale as ``weight`` residuals of that spread (the MAD's Gaussian efficiency times the runs it
  rests on, at most PRIOR_MAX_WEIGHT), so the first look does not start from nothing and the upper bound rests on
  more residuals; the pairs' own residuals take over as they come, and overrule it when they are noisier than it
  (PRIOR_REJECT). Without a prior an A/B is what it was.
- p-values in the record are the always-valid ones of the test: exp(-LLR) for "different" and exp(LLR) for "same",
  capped at 1 (Ville's inequality: the chance they ever fall below alpha under their hypothesis is at most alpha).
- Statuses (accuracy words, "crash"): failure rates, Fisher's exact test at alpha / looks per look (Bonferroni over
  the looks of the schedule); every A run passing and every B run failing is "different" at once (the
  deterministic case), equal rates with every run the same is "same".

- A continuation (``run_ab(carried=...)``): an A/B may start from the pairs of an earlier A/B of the same two sides
  (perfbisect's verification of a culprit whose last step was already against its parent); its ratio runs over
  every pair from the first, so its bound holds whatever made the caller look at those sides.

Everything the decision saw is in the result (``AbRecord``): samples per side, the order they were measured in, every
look's sizes, scale, log likelihood ratio and p-values, the cap, and how many pairs it carried over.
"""

from __future__ import annotations

import itertools
import math
import operator
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field
from scipy.special import gammaincinv
from scipy.stats import fisher_exact

from perfdash.contract import PASSING_STATUSES
from perfdash.metric_registry import Better

AbAnswer = Literal["different", "same", "unknown"]
AbSide = Literal["A", "B"]
Sample = float | str

# Words a measurement may print instead of a number: "pass"-like words are passing, everything else fails.
PASS_WORDS: frozenset[str] = frozenset(PASSING_STATUSES | {"ok", "good", "passed", "success"})

# The pairs' likelihood: Student-t with this many degrees of freedom (heavy enough tails that one outlier pair moves
# the ratio by a bounded amount, light enough to lose little against Gaussian noise).
T_DOF = 5.0
# The scale is an upper confidence bound: the estimate times sqrt(m / chi2_m(SCALE_QUANTILE)) for m residuals (the
# point estimate, 0.5, made 2.5 % of bisections at 2 % noise go wrong at N = 256 by a step decided on too small a
# scale: bench/README.md, issue 27).
SCALE_QUANTILE = 0.10
# Residuals beyond this many robust scales are clipped before the scale is computed (outliers do not inflate it).
SCALE_CLIP = 2.5
ROBUST_MIN = 10  # residuals needed before clipping (fewer: the plain root mean square)
# A series' noise estimate as a prior: a robust CV (1.4826 MAD) of n runs is worth about 0.37 n standard deviations'
# residuals for Gaussian data (the MAD's asymptotic efficiency, 36.8 %); capped, so the nightly history (another
# night, another load) never outweighs what the A/B itself measures for long: 20 residuals are the confirmation's
# own after about 21 pairs.
MAD_EFFICIENCY = 0.368
PRIOR_MAX_WEIGHT = 20.0
# The smallest per-run noise a prior may claim (a deliberate floor): a history of identical values (a simulator, a
# cached figure) says nothing of the noise of two builds run side by side, and a first look may rest on the prior.
PRIOR_MIN_CV = 0.005
# The pairs overrule the prior: when their residuals are noisier than it at this upper quantile (chi-squared on m
# residuals), the history was quieter than the A/B's machine and the prior is dropped (a quiet history must not make
# a noisy agent's decisions bolder than alpha allows).
PRIOR_REJECT = 0.90
# An A/B with a prior looks first after this many pairs at least: 4 residuals of its own, enough for the pairs to
# overrule a prior 4x too quiet (A/A at 5 % noise with a 1.25 % prior: 0.6 % false "different" over 1,000 A/Bs; 1.0-1.2
# % from 4 pairs, 4.7 % from 2; tests/contract/test_ab.py).
PRIOR_FIRST_LOOK = 5


def is_failing(sample: Sample) -> bool:
    return isinstance(sample, str) and sample.lower() not in PASS_WORDS


@dataclass(frozen=True, slots=True)
class NoisePrior:
    """What the series' history says of one A/B pair's noise: the spread of one pair's log ratio (``scale``) and
    how many residuals it counts as (``weight``)."""

    scale: float
    weight: float

    def __post_init__(self) -> None:
        if not (self.scale > 0 and math.isfinite(self.scale)) or not self.weight > 0:
            raise ValueError(f"impossible noise prior: {self}")

    @classmethod
    def of_series(cls, robust_cv: float, runs: int) -> NoisePrior:
        """From a series' between-run robust CV (relative, perfdash.noise) over ``runs`` runs: a pair is two runs."""
        return cls(scale=math.sqrt(2) * max(robust_cv, PRIOR_MIN_CV),
                   weight=min(PRIOR_MAX_WEIGHT, MAD_EFFICIENCY * runs))


@dataclass(frozen=True, slots=True)
class AbPolicy:
    """How an A/B is run and decided. ``boundary_pct``: the smallest change that counts (see the module doc)."""

    direction: Better = Better.LOWER
    boundary_pct: float = 5.0
    alpha: float = 0.01  # bound on a false "different" (and a false "same") over the whole sequential A/B
    start: int = 6  # pairs at the first look (fewer: a scale resting on 3-4 residuals decides too boldly)
    cap: int = 160  # pairs at most (Pinpoint's cap); "unknown" there
    # exact: the boundary is exactly the other level (a bisection step: good's level or bad's). Otherwise the boundary
    # is the least change that counts, and "different" weighs "no change" against a mixture: 0.9 on the boundary,
    # 0.1 spread over 2, 4, 8, ... times it (up to a 1000-fold change), so a change far past the boundary in heavy
    # noise is "different" too (a test of the boundary alone barely tells two levels apart that are both far from
    # the data: a 14-fold slowdown in 40 % noise against a 10 % boundary gained 0.2 per pair).
    exact: bool = False
    prior: NoisePrior | None = None  # the series' own noise, pooled into the scale (see the module doc)

    def __post_init__(self) -> None:
        object.__setattr__(self, "direction", Better(self.direction))
        if self.start < 1 or self.cap < self.start:
            raise ValueError("start >= 1 and cap >= start are needed")
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {self.alpha}")
        if self.boundary_pct <= 0:
            raise ValueError("boundary_pct must be > 0")

    @property
    def schedule(self) -> tuple[int, ...]:
        """Total pairs at each look: ``start``, one more per look up to 8, then an eighth more per look, to the cap."""
        looks = [self.start]
        while looks[-1] < self.cap:
            looks.append(min(self.cap, looks[-1] + max(1, looks[-1] // 8)))
        return tuple(looks)

    @property
    def rounds(self) -> int:
        return len(self.schedule)

    @property
    def line_pct(self) -> float:
        """The midpoint, on the log scale the test works on, between no change and the boundary: about half the
        boundary for small ones (2.47 % for 5 %). A pair's log likelihood ratio is positive above it."""
        return (math.sqrt(1 + self.boundary_pct / 100) - 1) * 100

    @property
    def llr_bound(self) -> float:
        """The log likelihood ratio that decides: log(1 / alpha) ("different" above, "same" below its negative)."""
        return math.log(1 / self.alpha)

    @property
    def alpha_per_look(self) -> float:
        """The status test's level per look (Bonferroni over the schedule's looks)."""
        return self.alpha / self.rounds


def pairs_to_decide(scale: float, boundary_pct: float, alpha: float) -> int:
    """About the pairs an A/B needs at a known ``scale`` (one pair's log-ratio spread) to decide at ``alpha``: Wald's
    bound log(1 / alpha) over one pair's expected evidence between no change and the boundary, (level / scale)^2 / 2
    for Gaussian pairs (a lower figure for the clipped Student-t: the first look is where to start looking, not a
    promise)."""
    level = math.log1p(boundary_pct / 100.0)
    return max(1, math.ceil(2 * math.log(1 / alpha) * (scale / level) ** 2))


class AbRound(BaseModel):
    """One look at the pairs so far."""

    pairs: int  # total pairs at this look
    answer: AbAnswer
    change_pct: float | None  # median change of B against A, % (positive: B worse); failure-rate points for statuses
    p_different: float | None  # always-valid p of "B is no worse than A" (small: different)
    p_same: float | None  # always-valid p of "B is worse by the boundary" (small: same)
    reason: str
    llr: float | None = None  # log likelihood ratio of "different" (AbPolicy.exact: the mixture) against no change
    llr_same: float | None = None  # log likelihood ratio of the boundary against no change ("same" at -bound)
    scale_pct: float | None = None  # the spread of one pair's log ratio the test used, % (upper bound)
    residuals: int = 0  # residuals the scale rests on (this A/B's and those pooled from earlier A/Bs)


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
    line_pct: float  # where a pair's evidence changes sign (AbPolicy.line_pct)
    alpha: float
    alpha_per_look: float  # the status test's level per look
    llr_bound: float = 0.0  # log(1 / alpha): the log likelihood ratio that decides
    pooled_residuals: int = 0  # residuals of earlier A/Bs the scale was pooled with
    prior_scale_pct: float | None = None  # the series' noise a pair (NoisePrior.scale), %, when the A/B had one
    prior_weight: float | None = None  # the residuals that prior counted as
    carried_pairs: int = 0  # pairs of an earlier A/B of the same two sides this one continues (its first pairs)
    cap: int  # pairs at most
    capped: bool = False  # ended at the cap, still unknown

    @property
    def last(self) -> AbRound:
        return self.rounds[-1]


def balanced_order(pairs: int, rng: random.Random) -> list[tuple[AbSide, AbSide]]:
    """``pairs`` pairs, half of them A first (the odd one at random), shuffled."""
    a_first = pairs // 2 + (rng.random() < 0.5 if pairs % 2 else 0)
    a_b: tuple[AbSide, AbSide] = ("A", "B")
    b_a: tuple[AbSide, AbSide] = ("B", "A")
    orders = [a_b] * a_first + [b_a] * (pairs - a_first)
    rng.shuffle(orders)
    return orders


# The per-sample loops below map builtins rather than run generator expressions: a bisection's A/B looks at every
# pair again at each look, and these loops were most of a look's time (the same operations in the same order: the
# same numbers to the last bit).
def _has_status(a: Sequence[Sample], b: Sequence[Sample]) -> bool:
    return any(map(isinstance, a, itertools.repeat(str))) or any(map(isinstance, b, itertools.repeat(str)))


def _log_ratios(a: Sequence[float], b: Sequence[float], direction: Better) -> list[float]:
    if len(a) != len(b):
        raise ValueError("log ratios need paired samples")
    logs = map(math.log, map(operator.truediv, b, a))
    return list(logs) if direction is Better.LOWER else list(map(operator.neg, logs))


def _successive(d: Sequence[float]) -> list[float]:
    """``residuals`` of log ratios already taken."""
    return list(map(operator.truediv, map(operator.sub, d[1:], d), itertools.repeat(math.sqrt(2))))


def residuals(a: Sequence[Sample], b: Sequence[Sample], direction: Better = Better.LOWER) -> list[float]:
    """The noise an A/B saw, free of its level: successive differences of its log ratios over sqrt(2) (each has the
    spread of one log ratio whatever the change; slow drift cancels too). Empty for statuses."""
    if _has_status(a, b):
        return []
    return _successive(_log_ratios([float(x) for x in a], [float(y) for y in b], direction))


def _chi2_quantile(q: float, dof: float) -> float:
    """The chi-squared quantile, as scipy.stats.chi2.ppf computes it (2 P^-1(dof / 2, q), P the regularised lower
    incomplete gamma) without that method's argument checks and broadcasting: a decision takes one or two per look,
    and the generic ppf cost more than the rest of the look together."""
    return 2.0 * float(gammaincinv(dof / 2, q))


# Gaussian consistency of the clipped second moment: E[min(z^2, c^2)] for a standard normal z.
_PHI_C = math.erf(SCALE_CLIP / math.sqrt(2))
_CLIPPED_MOMENT = _PHI_C - 2 * SCALE_CLIP * math.exp(-SCALE_CLIP**2 / 2) / math.sqrt(2 * math.pi) \
    + SCALE_CLIP**2 * (1 - _PHI_C)


def _overruled(prior: NoisePrior, variance: float, m: int) -> bool:
    """The pairs' ``m`` residuals (of ``variance``) are noisier than the prior beyond its PRIOR_REJECT quantile."""
    return m >= 2 and variance > prior.scale**2 * _chi2_quantile(PRIOR_REJECT, m) / m


def noise_scale(res: Sequence[float], prior: NoisePrior | None = None) -> float | None:
    """An upper 90 % confidence bound of the spread of one log ratio, from residuals (and a prior); None with fewer
    than two residuals and no prior.

    Robust from 10 residuals on: the median absolute residual sets a clip at 2.5 of its scales, and the root mean
    square of the clipped residuals (made consistent for Gaussian noise) is the estimate. A prior's variance is
    pooled with theirs as ``prior.weight`` more residuals, unless they overrule it (PRIOR_REJECT). The estimate is
    inflated by sqrt(m / chi2_m(0.10)), m the residuals it rests on (the prior's weight included)."""
    m = len(res)
    if m < 2 and prior is None:
        return None
    if m == 0:
        variance = 0.0
    elif m < ROBUST_MIN or (rough := 1.4826 * statistics.median(map(abs, res))) == 0.0:
        # Too few for a median to set a clip (one small residual would clip the rest): the plain root mean square,
        # which an outlier can only make larger (slower, never bolder).
        variance = sum(map(operator.mul, res, res)) / m
    else:
        clip = SCALE_CLIP * rough
        variance = sum(map(min, map(operator.mul, res, res), itertools.repeat(clip * clip))) / m / _CLIPPED_MOMENT
    weight = float(m)
    if prior is not None and not _overruled(prior, variance, m):
        variance = (m * variance + prior.weight * prior.scale**2) / (m + prior.weight)
        weight += prior.weight
    return math.sqrt(variance) * math.sqrt(weight / _chi2_quantile(SCALE_QUANTILE, weight))


MIXTURE_TOP = math.log(1000.0)  # the largest level (log ratio) the mixture weighs: a 1000-fold change
# The mixture's weight on the levels past the boundary: "different" at the boundary needs log(1 / 0.9) = 0.1 more.
MIXTURE_WIDE = 0.1


def _mixture_levels(level: float) -> np.ndarray:
    """The boundary, then doublings of it up to MIXTURE_TOP."""
    levels = [level]
    while levels[-1] * 2 <= MIXTURE_TOP:
        levels.append(levels[-1] * 2)
    return np.asarray(levels)


def _t_llrs(d: np.ndarray, levels: np.ndarray, scale: float) -> np.ndarray:
    """Student-t log likelihood ratio of the log ratios ``d``: centred on ``level`` against centred on 0.

    Each pair's ratio is taken at the pair's value clipped to where the ratio peaks, (L +- sqrt(L^2 + 4 nu)) / 2 in
    scales (L: the level in scales): beyond the peaks the t ratio would fall back towards 0, so a 45-fold slowdown
    would count for less than a 5 % one; clipped, every pair counts at most that peak, an outlier included."""
    k = (T_DOF + 1) / 2
    x_level = levels[:, None] / scale
    half = np.sqrt(x_level * x_level + 4 * T_DOF) / 2
    x = np.minimum(np.maximum(d[None, :] / scale, x_level / 2 - half), x_level / 2 + half)  # np.clip, cheaper
    return k * (np.log1p(x * x / T_DOF) - np.log1p((x - x_level) ** 2 / T_DOF)).sum(axis=1)


def decide(a: Sequence[Sample], b: Sequence[Sample], policy: AbPolicy, final: bool = False,
           noise: Sequence[float] = ()) -> AbRound:
    """The decision on the pairs so far (``a[i]`` and ``b[i]`` were measured together). ``final``: at the cap.
    ``noise``: residuals (``residuals``) of earlier A/Bs of the same builds' machine, pooled into the scale."""
    if len(a) != len(b) or not a:
        raise ValueError("an A/B decision needs the same positive number of samples on both sides")
    if _has_status(a, b):
        return _decide_status(a, b, policy, final)
    fa, fb = list(map(float, a)), list(map(float, b))
    if any(map((0.0).__ge__, fa)) or any(map((0.0).__ge__, fb)):  # x <= 0
        raise ValueError("A/B samples must be positive (times, speedups, throughputs)")
    d = _log_ratios(fa, fb, policy.direction)
    change = math.expm1(statistics.median(d)) * 100.0
    pooled = [*noise, *_successive(d)]
    scale = noise_scale(pooled, policy.prior)
    pairs = len(d)
    why = "at the cap" if final else "measuring more"
    if scale is None:
        return AbRound(pairs=pairs, answer="unknown", change_pct=change, p_different=None, p_same=None,
                       residuals=len(pooled), reason=f"change {change:+.2f}%: too few pairs for the noise; {why}")
    level = math.log1p(policy.boundary_pct / 100.0)
    if scale == 0.0:  # identical ratios (a deterministic measurement): the side of the line is the answer
        llr = math.inf if d[0] > level / 2 else -math.inf
    else:  # the boundary's ratio, and (not exact) the mixture's levels in the same call: the boundary is the first
        each = _t_llrs(np.asarray(d), np.asarray([level]) if policy.exact else _mixture_levels(level), scale)
        llr = float(each[0])
    llr_same = llr  # "same": at A's level rather than at the boundary (the nearest change that counts)
    if not policy.exact and math.isfinite(llr):
        # a mixture of likelihood ratios is a likelihood ratio (Wald's bound holds): most weight on the boundary
        weights = np.full(len(each), MIXTURE_WIDE / max(1, len(each) - 1))
        weights[0] = 1.0 - MIXTURE_WIDE if len(each) > 1 else 1.0
        top = float(each.max())
        llr = top + math.log(float((weights * np.exp(each - top)).sum()))
    p_diff = min(1.0, math.exp(-llr)) if llr > -700 else 1.0
    p_same = min(1.0, math.exp(llr_same)) if llr_same < 700 else 1.0
    bound = policy.llr_bound
    common: dict[str, Any] = {"pairs": pairs, "change_pct": change, "p_different": p_diff, "p_same": p_same,
              "llr": llr if math.isfinite(llr) else math.copysign(1e9, llr),
              "llr_same": llr_same if math.isfinite(llr_same) else math.copysign(1e9, llr_same),
              "scale_pct": scale * 100.0,
              "residuals": len(pooled)}
    noise_text = f"noise {scale * 100:.3g}% a pair"
    if llr >= bound:
        return AbRound(answer="different", **common,
                       reason=f"B {change:+.2f}% worse: at the {policy.boundary_pct:.3g}% level, not at A's "
                              f"(log LR {llr:.1f} >= {bound:.1f}, {noise_text})")
    if llr_same <= -bound:
        return AbRound(answer="same", **common,
                       reason=f"change {change:+.2f}%: at A's level, not {policy.boundary_pct:.3g}% worse "
                              f"(log LR {llr_same:.1f} <= -{bound:.1f}, {noise_text})")
    return AbRound(answer="unknown", **common,
                   reason=f"change {change:+.2f}% (log LR {llr:.1f}, {noise_text}): {why}")


def _decide_status(a: Sequence[Sample], b: Sequence[Sample], policy: AbPolicy, final: bool) -> AbRound:
    fa, fb = (sum(map(is_failing, s)) for s in (a, b))
    ra, rb = fa / len(a), fb / len(b)
    change = (rb - ra) * 100.0
    p = float(fisher_exact(np.array([[fb, len(b) - fb], [fa, len(a) - fa]]), alternative="greater").pvalue)
    text = f"failure rate {ra:.0%} at A, {rb:.0%} at B (Fisher p={p:.2g})"
    if (ra == 0.0 and rb == 1.0) or p < policy.alpha_per_look:
        return AbRound(pairs=len(a), answer="different", change_pct=change, p_different=p, p_same=None, reason=text)
    if rb <= ra:
        return AbRound(pairs=len(a), answer="same", change_pct=change, p_different=p, p_same=None, reason=text)
    return AbRound(pairs=len(a), answer="unknown", change_pct=change, p_different=p, p_same=None,
                   reason=text + (": at the cap" if final else ": measuring more"))


Measure = Callable[[AbSide, int], Sample]  # (side, index of that side's sample) -> the sample
# A duet's pair, both sides measured at the same time on mirrored halves of the machine: (index of the pair, whether A
# runs on the first half) -> (A's sample, B's sample). The halves alternate as a sequential A/B's order does.
MeasurePair = Callable[[int, bool], tuple[Sample, Sample]]


def duet_halves(cpus: Sequence[int]) -> tuple[frozenset[int], frozenset[int]]:
    """The CPUs as two mirrored halves for a duet (the first half and the rest; an odd CPU out is left unused).
    A duet measures both builds at once, one on each half, so that what moves the whole machine for a while (the
    host's caches, memory bandwidth, frequency) moves both and cancels in their ratio (bench/README.md, "Duet")."""
    ordered = sorted(cpus)
    if len(ordered) < 2:
        raise ValueError("a duet needs at least two CPUs")
    half = len(ordered) // 2
    return frozenset(ordered[:half]), frozenset(ordered[half:2 * half])


def change_half_width_pct(a: Sequence[Sample], b: Sequence[Sample], direction: Better) -> float:
    """About the 95 % half-width of the change estimate, %: two standard errors of the mean log ratio."""
    if _has_status(a, b):
        return 0.0  # statuses: a failure rate, no change to settle (the deterministic case is decided at once)
    if len(a) < 2:
        return math.inf
    d = _log_ratios([float(x) for x in a], [float(y) for y in b], direction)
    return 2 * statistics.stdev(d) / math.sqrt(len(d)) * 100.0


def run_ab(measure: Measure, policy: AbPolicy, rng: random.Random, *, purpose: str, a: str, b: str,
           on_round: Callable[[AbRound], None] = lambda _r: None, noise: Sequence[float] = (),
           carried: AbRecord | None = None, measure_pair: MeasurePair | None = None) -> AbRecord:
    """Measure A and B in balanced random pairs, look by look, until "different", "same" or the cap.

    ``measure(side, i)`` returns the i-th sample of a side; a caller that resumes returns stored samples for the
    indices it has (the order comes from ``rng``, so seed it with the A/B's identity to replay the same order).
    ``noise``: residuals of earlier A/Bs on the same machine (a bisection's), pooled into the scale.
    ``carried``: an earlier A/B of the same two sides (a bisection step of the culprit against its parent) whose
    pairs this one continues: they are its first pairs (in their order) and its first look is on them. Valid because
    the likelihood ratio is taken over every pair from the first: under "no change" the chance that it *ever* reaches
    1 / alpha is at most alpha, whatever made the caller look at these sides (Ville's inequality).
    ``measure_pair``: a duet; each pair's two samples are measured at once by it (``measure`` is not called), A on
    the first half of the machine in the pairs the order puts A first."""
    if carried is not None and (carried.a, carried.b) != (a, b):
        raise ValueError("only an A/B of the same two sides can be continued")
    samples: dict[AbSide, list[Sample]] = {"A": list(carried.samples_a) if carried else [],
                                           "B": list(carried.samples_b) if carried else []}
    order: list[str] = list(carried.order) if carried else []
    first = len(samples["A"])
    record = AbRecord(purpose=purpose, a=a, b=b, answer="unknown", boundary_pct=policy.boundary_pct,
                      line_pct=policy.line_pct, alpha=policy.alpha, alpha_per_look=policy.alpha_per_look,
                      llr_bound=policy.llr_bound, pooled_residuals=len(noise), cap=policy.cap, carried_pairs=first,
                      prior_scale_pct=policy.prior.scale * 100.0 if policy.prior else None,
                      prior_weight=policy.prior.weight if policy.prior else None)
    pending: list[tuple[AbSide, AbSide]] = []  # balanced two at a time: every even count is half A-first
    looks = policy.schedule
    if first and first >= policy.start:  # the carried pairs are already past the first look: look at them now
        looks = (min(first, policy.cap), *(t for t in looks if t > first))
    for number, total in enumerate(looks, start=1):
        while len(samples["A"]) < total:
            if not pending:
                pending = balanced_order(2, rng)
            sides = pending.pop()
            if measure_pair is not None:
                sample_a, sample_b = measure_pair(len(samples["A"]), sides[0] == "A")
                samples["A"].append(sample_a)
                samples["B"].append(sample_b)
                order.extend(sides)
                continue
            for side in sides:
                samples[side].append(measure(side, len(samples[side])))
                order.append(side)
        result = decide(samples["A"], samples["B"], policy, final=number == len(looks), noise=noise)
        record.rounds.append(result)
        on_round(result)
        if result.answer != "unknown":
            break
    record.answer = record.rounds[-1].answer
    record.capped = record.answer == "unknown"
    record.samples_a, record.samples_b, record.order = samples["A"], samples["B"], "".join(order)
    return record
