"""Change-point detection over one series of nightly values: pure maths, no database, no I/O.

The method follows Apache Otava (formerly Hunter, MongoDB's approach): E-divisive means ranks the candidate split
points of a window, and a two-sample t-test decides whether a candidate is a real change. What makes it quiet enough
to trust every morning, and quick enough to find a 5 % step under 2 % noise within three nights (each rule was
measured with bench/detection.py; its docstring has the figures):

- work in log space, so a change is relative (5 % of a 0.2 ms latency and of a 2 s compile time look alike);
- robust levels: points further than ``outlier_k`` noise scales from their side's median are spikes and left out, a
  new level never starts on one (its first two points must be inliers), and the change must survive dropping its
  most extreme point after the split (``loo_z``; ``loo_z_noisy`` in a noisy series, see below, where a spike can be
  within ``outlier_k`` sigmas), so a single noisy night is never a level. On a new level's first nights its median
  is two or three points; two spikes in the same direction two nights apart pull it between them, and the night the
  outlier rule then drops is an ordinary one at the old level: such a night among a new level's first
  ``newest_splits`` means the "level" is the spikes;
- the noise: the pooled variance of the split's two sides together with the series' own night-to-night noise (first
  differences over the last ``2 * window`` nights, spikes trimmed). Both are estimates from largely the same nights,
  so the t-test gets the degrees of freedom of the larger one, not their sum (which would make its tails too light
  and every p-value too small);
- significance that depends on when the evidence comes, because every night tests the newest splits again. The
  false-alert budget (about one per 1,000 series-nights) is spent mostly on the fourth night of a new level, where a
  step of the minimum effect first stands out of 2 % noise: ``p_value_max`` there (and for older splits, tightened as
  ``(fresh_after / n) ** 2`` since an old split has been tried on every night since), ``p_value_three_points``
  (stricter) on the third night, ``p_value_two_points`` (strict: only a large step) on the second. An oracle that
  knows the level and sigma gains the same way from spending its budget late (on bench/detection.py's series it
  finds about 1.5 % more of the 5 % steps within three nights testing only the fourth night than testing the
  second, third and fourth alike). Stricter still: a split just after a stored change (the points that triggered
  that change were its most extreme ones, so the new baseline is biased towards them), and a noisy series, one whose
  noise is above ``noisy_above`` (0.6) of the minimum effect: there, spikes of the size that the outlier rule removes
  under 2 % noise are only three sigma and pass as noise, so the t-test's normal tails understate how often noise
  alone looks like a level (``noisy_factor``). The cutoff is above half the minimum effect because it is compared
  with an estimate: a 2 % series' noise estimated from 20 to 30 nights comes out above 2.5 % one time in ten or
  twenty, and a 2 % series taken for noisy finds its 5 % steps a night or two later;
- a minimum effect per metric, as "not significantly smaller than the minimum effect": the change's one-sided 95 %
  confidence interval must reach it. A rule on the point estimate (>= 5 %, or a fraction of it) would drop real 5 %
  steps whose noisy estimate came out at 4 %, the ones the morning report is for; the interval still keeps a 3 %
  step quiet once its level has a few nights (under 2 % noise, a 3 % step with ten points after it has an upper
  bound of about 4.2 %);
- a split that is significant but below the minimum effect is no alert, but it bounds the search: later nights are
  compared with the level after it, not with a mix of both levels (which makes every noisy night after a small
  unreported step look like a change);
- candidates: the highest local maxima of the E-divisive statistic, and always the newest splits (two to
  ``newest_splits`` points after), where a fresh step has too few points to be E-divisive's best split.

The E-divisive statistic is hand-written (numpy, O(n^2) over a window of at most ``window`` points) because scipy has
no energy-statistics change-point routine and Otava's own package pulls in a CLI and database clients.

Speed (issue 31: every series of PyTorch's whole matrix, ~200,000 searches a night): the arrays are 2 to 60 points,
so the cost is numpy's per-call overhead, not arithmetic. Medians and means are taken with the same floating-point
operations as np.median and ndarray.mean but fewer calls; a candidate split is rejected by its cheapest rule first;
"no change" is proven from a bound on |t| before the full test; and a segment where no split can be more than "no
change" (_any_split_possible, all splits at once) skips the E-divisive statistic; a run's newest windows are
pre-checked together (detect_change_points_many, _splits_possible). The answer is the search's before this, to the
last bit (tests/detection/test_changepoint_speed.py; bench/detection_speed.py times it).

A stored change point is the baseline: callers pass ``baseline_start`` (the index of the last stored change) and only
the points from there on are searched, so an old change is never found again and the new level is what later nights
are compared with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy import special

from perfdash.metric_registry import SPEEDUP, min_effect_of

# A level needs at least this many points before a change.
_MIN_LEVEL = 3


@dataclass(frozen=True, slots=True)
class DetectionConfig:
    min_effect: float = SPEEDUP.min_effect  # relative, e.g. 0.05 = 5 %; per metric: for_metric
    # Two-sided t-test on the log values of both sides' inliers, for a new level of four or more points (older splits:
    # see fresh_after). bench/detection.py --sweep shows the trade-off between recall and false alerts.
    p_value_max: float = 1.5e-3
    p_value_two_points: float = 1e-5  # a level of exactly two points: only a large step alerts on its second night
    p_value_three_points: float = 4e-4  # ... of three points
    min_before: int = 8  # points before a split for its level to be a settled baseline (fewer: see short_level)
    min_after: int = 2  # points after a change: one noisy night never alerts
    # In a noisy series (see noisy_above), a spike next to a 2-sigma night looks like a new level on two points:
    # wait for this many.
    min_after_noisy: int = 3
    window: int = 60  # points searched at once (E-divisive is O(n^2)); longer histories are walked in windows
    outlier_k: float = 3.0  # points further than k robust sigmas from their side's median are spikes
    pair_k: float = 2.5  # two points after a change must agree: |a1 - a2| <= pair_k * sqrt(2) * sigma
    loo_z: float = 2.0  # without its most extreme point after the split, the change must still have |t| >= loo_z
    loo_z_noisy: float = 3.0  # ... in a noisy series, where a spike can be within outlier_k sigmas
    ci_z: float = 1.645  # one-sided 95 %: the change must not be significantly smaller than min_effect
    # p_value_max times this for a split fewer than min_before points after the last stored change or boundary.
    short_level_factor: float = 0.03
    # A series is noisy where its noise is above this fraction of the minimum effect: it waits for min_after_noisy
    # points, and every p-value threshold is multiplied by noisy_factor.
    noisy_above: float = 0.6
    noisy_factor: float = 0.1
    # relative; a deliberate floor under each series' own noise estimate (series_noise), not a global noise figure:
    # a perfectly flat history (simulators, cached values) is not infinitely tight
    noise_floor: float = 0.002
    max_candidates: int = 3  # local maxima of the E-divisive statistic tried per segment
    newest_splits: int = 4  # splits with 2..newest_splits points after them are always tried too
    # A split with n points after it has been tested on earlier nights already; every night tries it again, so its
    # p-value must beat p_value_max * (fresh_after / n) ** 2 once it is older than fresh_after nights.
    fresh_after: int = 4
    # A significant split below the minimum effect bounds the search if both sides have this many points.
    boundary_min: int = 5

    def __post_init__(self) -> None:
        if not 0 < self.min_effect < 1:
            raise ValueError(f"min_effect must be in (0, 1), got {self.min_effect}")
        p_values = (self.p_value_max, self.p_value_two_points, self.p_value_three_points)
        if not all(0 < p < 1 for p in p_values):
            raise ValueError(f"p-values must be in (0, 1), got {p_values}")
        if self.min_after < 2 or self.min_before < 3:
            raise ValueError("min_after must be >= 2 and min_before >= 3")
        if self.window < self.min_before + self.min_after:
            raise ValueError("window is shorter than min_before + min_after")

    @classmethod
    def for_metric(cls, metric: str, **overrides: Any) -> DetectionConfig:
        return cls(min_effect=min_effect_of(metric), **overrides)


@dataclass(frozen=True, slots=True)
class ChangePoint:
    """A level change: ``values[index]`` is the first point of the new level."""

    index: int
    before_mean: float  # arithmetic mean of the inliers before, in the series' units
    after_mean: float
    change_pct: float  # 100 * (after / before - 1), from the log-space means
    p_value: float
    n_before: int
    n_after: int


@dataclass(frozen=True, slots=True)
class Noise:
    """A series' night-to-night noise in log units: ``robust`` (MAD, for telling spikes apart) and ``sd`` with its
    degrees of freedom ``df`` (efficient, for the tests)."""

    robust: float
    sd: float
    df: int


def energy_statistic(z: np.ndarray, min_size: int = 2) -> np.ndarray:
    """E-divisive means' Q(tau) for every split tau of ``z`` (alpha = 1); -inf where a side has < min_size points.

    Q(tau) = m n / (m + n) * (2/(m n) sum|x-y| - 1/C(m,2) sum_{i<k}|x_i-x_k| - 1/C(n,2) sum_{j<k}|y_j-y_k|)
    with x = z[:tau], y = z[tau:] (Matteson & James 2014). Block sums of the distance matrix come from a 2-D prefix sum
    P, read as whole rows, columns and its diagonal (slices, not fancy indexing: this runs for every series every
    night). The block starting at row or column 0 drops the terms of P's zero row and column, which add or subtract
    exactly 0.
    """
    n_total = len(z)
    q = np.full(n_total, -np.inf)
    if n_total < 2 * min_size:
        return q
    prefix = np.zeros((n_total + 1, n_total + 1))
    np.cumsum(np.abs(z[:, None] - z[None, :]), axis=0, out=prefix[1:, 1:])
    np.cumsum(prefix[1:, 1:], axis=1, out=prefix[1:, 1:])
    lo, hi = min_size, n_total - min_size + 1
    m = np.arange(lo, hi, dtype=float)
    n = n_total - m
    diagonal = prefix.diagonal()[lo:hi]
    last_column = prefix[lo:hi, n_total]
    cross = last_column - diagonal  # block(0, tau, tau, end)
    within_x = diagonal / 2.0  # block(0, tau, 0, tau) / 2
    within_y = (prefix[n_total, n_total] - last_column - prefix[n_total, lo:hi] + diagonal) / 2.0
    e_hat = 2.0 * cross / (m * n) - within_x / (m * (m - 1) / 2.0) - within_y / (n * (n - 1) / 2.0)
    q[lo:hi] = m * n / (m + n) * e_hat
    return q


def _median(x: np.ndarray) -> float:
    """np.median of a 1-D array without NaNs, to the last bit (the middle of the sorted values, or the mean of the
    two middle ones), at a fraction of its per-call cost."""
    s = np.sort(x)
    half = len(s) // 2
    return float(s[half]) if len(s) % 2 else float((s[half - 1] + s[half]) / 2.0)


def _mean(x: np.ndarray) -> float:
    """x.mean() to the last bit (numpy's own pairwise sum over the count), without its per-call dispatch."""
    return float(_add(x) / len(x))


_add = np.add.reduce


def series_noise(logs: np.ndarray, floor: float) -> Noise:
    """The night-to-night noise of a series, from its first differences (divided by sqrt(2)).

    Differences cancel level changes (a step moves one difference) and a spike moves only two, so this is the series'
    own noise even across changes. ``robust`` is their MAD; ``sd`` their standard deviation once differences beyond
    four robust scales (spikes, large steps) are trimmed, with about 2/3 of a degree of freedom per difference
    (neighbouring differences share a point).
    """
    if len(logs) < 4:
        return Noise(floor, floor, 1)
    diffs = np.diff(logs)
    spread = np.abs(diffs - _median(diffs))
    mad = 1.4826 * _median(spread)
    robust = max(mad / math.sqrt(2.0), floor)
    kept = diffs[spread <= 4.0 * max(mad, floor * math.sqrt(2.0))]
    if len(kept) < 3:
        return Noise(robust, robust, 1)
    sd = math.sqrt(_mean((kept - _mean(kept)) ** 2)) / math.sqrt(2.0)
    return Noise(robust, max(sd, floor), max(2 * len(kept) // 3, 1))


def _candidates(q: np.ndarray, limit: int) -> list[int]:
    """The highest local maxima of Q, best first."""
    padded = np.concatenate(([-np.inf], q, [-np.inf]))
    is_peak = np.isfinite(q) & (q >= padded[:-2]) & (q >= padded[2:])
    peaks = np.flatnonzero(is_peak)
    return [int(i) for i in peaks[np.argsort(-q[peaks], kind="stable")][:limit]]


class _Boundary:
    """A split that is significant but below the minimum effect: no alert, but the search treats it as a level edge."""


_BOUNDARY = _Boundary()


def _test_split(logs: np.ndarray, raw: np.ndarray, tau: int, config: DetectionConfig, noise: Noise,
                z_cap: float) -> ChangePoint | _Boundary | None:
    # Most candidates are no change (bench/detection_speed.py: 95 % of those tried on a night of PyTorch's matrix), so
    # the rules that reject one run first, the cheapest (the few points after the split) before the rest; every value
    # is computed with the same floating-point operations as np.median and ndarray.mean, so the answer is the same to
    # the last bit (tests/detection/test_changepoint_speed.py compares it with the plain numpy form).
    before, after = logs[:tau], logs[tau:]
    n_all_after = len(after)
    sigma = noise.robust
    effect = math.log1p(config.min_effect)
    noisy = noise.sd > config.noisy_above * effect
    limit = config.outlier_k * sigma
    # A level needs most of its points to agree, and never starts on a spike: a spike among few points leaves too few
    # inliers to count, and one on the first or second night after the split leaves the level resting on one night.
    if n_all_after < (config.min_after_noisy if noisy else config.min_after):
        return None
    keep_after = np.abs(after - _median(after)) <= limit
    n_after = int(np.count_nonzero(keep_after))
    if n_after < config.min_after or n_after < 0.75 * n_all_after or not (keep_after[0] and keep_after[1]):
        return None
    # With exactly two points after, a spike and a normal night are equally far from their median, so the filter below
    # cannot tell which is the spike: demand that the two agree as two draws of the same level would.
    if n_all_after == 2 and abs(after[1] - after[0]) > config.pair_k * math.sqrt(2.0) * sigma:
        return None
    median_before = _median(before)
    keep_before = np.abs(before - median_before) <= limit
    n_before = int(np.count_nonzero(keep_before))
    if n_before < _MIN_LEVEL:
        return None
    # On a new level's first nights its median is two or three points: if two of them are spikes in the same direction,
    # the median sits between them and the night that is dropped as the outlier is a normal one, back at the old level.
    # A dropped night that is an inlier of the old level says the "level" is the spikes.
    if n_all_after <= config.newest_splits and n_after < n_all_after:
        dropped = np.abs(after[~keep_after] - median_before)
        if (dropped <= limit).any():
            return None
    b = before[keep_before] if n_before < tau else before
    a = after[keep_after] if n_after < n_all_after else after
    mean_b, mean_a = _mean(b), _mean(a)
    diff = mean_a - mean_b
    # ... and both must have moved, each by at least half the minimum effect: a spike next to a night that is merely a
    # little noisy in the same direction is not a new level.
    if n_all_after == 2 and np.any(np.sign(diff) * (after - mean_b) < effect / 2):
        return None
    settled = n_before >= config.min_before
    # Anything but "no change" needs p <= p_cap, so |t| >= z_cap (a t quantile is never below the normal one): with
    # the pooled variance at its smallest (no spread within the sides), a |t| below that is no change, and the squares,
    # the leave-one-out test and the t distribution are not needed. The margin is far above rounding.
    least_sigma = noise.sd * math.sqrt(noise.df / (n_after + n_before - 2 + noise.df)) if settled else noise.sd
    if abs(diff) < z_cap * (1.0 - 1e-9) * least_sigma * math.sqrt(1.0 / n_after + 1.0 / n_before):
        return None
    # The t-test: the pooled variance of both sides averaged with the series' noise, or, for a level too short to
    # estimate anything from (not settled), the series' noise alone. The series' noise comes from the same nights as
    # the two sides (their first differences), so it is no independent evidence: the degrees of freedom are those of
    # the better of the two estimates, not their sum.
    if settled:
        squares = float(_add((a - mean_a) ** 2)) + float(_add((b - mean_b) ** 2))
        df = max(n_after + n_before - 2, noise.df)
        test_sigma = math.sqrt((squares + noise.sd**2 * noise.df) / (n_after + n_before - 2 + noise.df))
    else:
        test_sigma, df = noise.sd, noise.df
    t_stat = diff / (test_sigma * math.sqrt(1.0 / n_after + 1.0 / n_before))
    # No single night carries the change: without the most extreme point after the split it must still be there.
    extreme = int(np.argmax(np.sign(diff) * (a - mean_b)))
    rest = np.concatenate((a[:extreme], a[extreme + 1 :]))
    rest_diff = _mean(rest) - mean_b
    loo_z = config.loo_z_noisy if noisy else config.loo_z
    if rest_diff * diff <= 0 or abs(rest_diff) < loo_z * test_sigma * math.sqrt(1 / n_before + 1 / len(rest)):
        return None
    p_value = float(2.0 * special.stdtr(df, -abs(t_stat)))
    if n_all_after == 2:
        threshold = config.p_value_two_points
    elif n_all_after == 3:
        threshold = config.p_value_three_points
    else:
        threshold = config.p_value_max * min(1.0, config.fresh_after / n_all_after) ** 2
    if not settled:
        threshold *= config.short_level_factor
    if noisy:
        threshold *= config.noisy_factor
    significant = p_value <= config.p_value_max and min(n_all_after, n_before) >= config.boundary_min
    if not p_value <= threshold:
        return _BOUNDARY if significant else None
    se = abs(diff / t_stat) if t_stat else math.inf
    if abs(diff) + config.ci_z * se < effect:
        # Significant but small: no alert, yet the levels on either side are not one level.
        return _BOUNDARY
    raw_before, raw_after = raw[:tau][keep_before], raw[tau:][keep_after]
    return ChangePoint(
        index=tau,
        before_mean=_mean(raw_before),
        after_mean=_mean(raw_after),
        change_pct=100.0 * math.expm1(diff),
        p_value=p_value,
        n_before=n_before,
        n_after=n_after,
    )


def _any_split_possible(logs: np.ndarray, config: DetectionConfig, noise: Noise, z_cap: float) -> bool:
    """Whether any split of the segment could be more than "no change" in _test_split: its rules on the counts of
    inliers, and a |t| that reaches z_cap with the smallest variance the t-test can use, for every split at once
    (arrays of splits x points; each side's median is its middle value once the other side is set to infinity and
    the row sorted, as np.median finds it). False proves that every candidate _segment would try is no change, so
    the E-divisive statistic and the candidates are not needed: most segments of a night (a series that did not
    move). The sides' means here are sums in another order than _test_split's, which may differ in the last bits:
    the |t| test keeps a margin far above that."""
    n_total = len(logs)
    effect = math.log1p(config.min_effect)
    noisy = noise.sd > config.noisy_above * effect
    fewest_after = max(config.min_after, config.min_after_noisy if noisy else config.min_after)
    taus = np.arange(_MIN_LEVEL, n_total - fewest_after + 1)
    if not len(taus):
        return False
    rows = np.arange(len(taus))
    after_side = np.arange(n_total)[None, :] >= taus[:, None]
    limit = config.outlier_k * noise.robust
    kept = []
    for side, size in ((~after_side, taus), (after_side, n_total - taus)):
        ordered = np.sort(np.where(side, logs, np.inf), axis=1)
        # (x + x) / 2 is x exactly: one expression for odd and even sides
        median = (ordered[rows, (size - 1) // 2] + ordered[rows, size // 2]) / 2.0
        kept.append(side & (np.abs(logs[None, :] - median[:, None]) <= limit))
    keep_before, keep_after = kept
    n_after, n_before = keep_after.sum(axis=1), keep_before.sum(axis=1)
    counted = ((n_after >= config.min_after) & (n_after >= 0.75 * (n_total - taus)) & (n_before >= _MIN_LEVEL)
               & keep_after[rows, taus] & keep_after[rows, taus + 1])
    if not counted.any():
        return False
    n_a, n_b = np.maximum(n_after, 1), np.maximum(n_before, 1)
    diff = (keep_after @ logs) / n_a - (keep_before @ logs) / n_b
    settled = n_before >= config.min_before
    least_sigma = np.where(settled, noise.sd * np.sqrt(noise.df / np.maximum(n_a + n_b - 2 + noise.df, 1)), noise.sd)
    reach = np.abs(diff) * (1.0 + 1e-6) + 1e-9 >= z_cap * least_sigma * np.sqrt(1.0 / n_a + 1.0 / n_b)
    return bool((counted & reach).any())


def _segment(logs: np.ndarray, raw: np.ndarray, offset: int, config: DetectionConfig, noise: Noise, z_cap: float,
             out: list[ChangePoint]) -> None:
    """Binary segmentation: the first candidate that is a change (or a boundary) splits the segment, and both sides
    are searched again."""
    if len(logs) < _MIN_LEVEL + config.min_after or not _any_split_possible(logs, config, noise, z_cap):
        return
    q = energy_statistic(logs)
    q[:_MIN_LEVEL] = -np.inf
    q[len(logs) - config.min_after + 1 :] = -np.inf
    candidates = _candidates(q, config.max_candidates)
    candidates += [tau for tau in range(len(logs) - 2, len(logs) - config.newest_splits - 1, -1)
                   if tau >= _MIN_LEVEL and tau not in candidates]
    for tau in candidates:
        found = _test_split(logs, raw, tau, config, noise, z_cap)
        if found is None:
            continue
        if isinstance(found, ChangePoint):
            out.append(replace(found, index=found.index + offset))
        _segment(logs[:tau], raw[:tau], offset, config, noise, z_cap, out)
        _segment(logs[tau:], raw[tau:], offset + tau, config, noise, z_cap, out)
        return


def _least_z(config: DetectionConfig) -> float:
    """The smallest |t| whose p-value can be a change or a boundary: the normal quantile of the loosest threshold that
    _test_split can apply (a t quantile, for any degrees of freedom, is above it)."""
    loosest = max(config.p_value_max, config.p_value_two_points, config.p_value_three_points)
    p_cap = max(config.p_value_max, loosest * max(1.0, config.short_level_factor) * max(1.0, config.noisy_factor))
    return float(-special.ndtri(min(p_cap, 1.0) / 2.0))


def detect_change_points(values: Sequence[float], *, baseline_start: int = 0,
                         config: DetectionConfig | None = None) -> list[ChangePoint]:
    """Change points of ``values`` (oldest first, all > 0) at or after ``baseline_start``, sorted by index.

    ``baseline_start`` is the index of the last stored change point: the search never looks before it, so its new
    level is the baseline. Only the last ``config.window`` points are searched. Every change point returned has at
    least ``config.min_after`` points after it.
    """
    config = config or DetectionConfig()
    raw = np.asarray(values, dtype=float)
    if raw.ndim != 1:
        raise ValueError("values must be one-dimensional")
    if np.any(~np.isfinite(raw)) or np.any(raw <= 0):
        raise ValueError("values must be finite and > 0 (failed runs are status changes, not levels)")
    if not 0 <= baseline_start <= len(raw):
        raise ValueError(f"baseline_start {baseline_start} outside 0..{len(raw)}")
    logs = np.log(raw)
    z_cap = _least_z(config)
    found: list[ChangePoint] = []
    base = baseline_start
    # A long unexamined history (a backfill of old CSVs) is walked in overlapping windows, as the nightly run would
    # have seen it, each window starting at the last change found; a nightly call is the single last window.
    end = len(raw) if len(raw) - base <= config.window else base + config.window
    while True:
        start = max(base, end - config.window)
        window: list[ChangePoint] = []
        noise = series_noise(logs[max(0, end - 2 * config.window) : end], math.log1p(config.noise_floor))
        _segment(logs[start:end], raw[start:end], start, config, noise, z_cap, window)
        if window:
            found += window
            base = max(cp.index for cp in window)
        if end == len(raw):
            break
        end = min(len(raw), end + config.window // 2)
    return sorted(found, key=lambda cp: cp.index)


def _splits_possible(logs: np.ndarray, config: DetectionConfig, robust: np.ndarray, sd: np.ndarray, df: np.ndarray,
                     z_cap: float) -> np.ndarray:
    """_any_split_possible for many segments of one length at once (rows of ``logs``, each with its series' noise):
    the same rules and the same margin, as arrays of segments x splits x points, so that numpy's per-call overhead
    is paid once for all of a run's steady series instead of once a series (issue 31). Each side's median is read
    from one sort of its segment: the k-th smallest of a side is the first sorted value by which k + 1 of the side's
    points have been seen (the same values as sorting each side, so the same medians)."""
    count, n_total = logs.shape
    effect = math.log1p(config.min_effect)
    noisy = sd > config.noisy_above * effect
    fewest_after = np.where(noisy, max(config.min_after, config.min_after_noisy), config.min_after)
    taus = np.arange(_MIN_LEVEL, n_total - config.min_after + 1)
    if not len(taus):
        return np.zeros(count, dtype=bool)
    order = np.argsort(logs, axis=1, kind="stable")
    ordered = np.take_along_axis(logs, order, axis=1)
    # seen_before[s, t, j]: how many of the first j + 1 sorted values of segment s are before split taus[t]
    seen_before = np.cumsum(order[:, None, :] < taus[None, :, None], axis=2, dtype=np.int32)
    seen_after = np.arange(1, n_total + 1, dtype=np.int32) - seen_before
    after_side = np.arange(n_total)[None, :] >= taus[:, None]
    limit = (config.outlier_k * robust)[:, None, None]
    kept = []
    for seen, side, size in ((seen_before, ~after_side, taus), (seen_after, after_side, n_total - taus)):
        low = np.take_along_axis(ordered, np.argmax(seen > ((size - 1) // 2)[None, :, None], axis=2), axis=1)
        high = np.take_along_axis(ordered, np.argmax(seen > (size // 2)[None, :, None], axis=2), axis=1)
        median = (low + high) / 2.0  # (x + x) / 2 is x exactly: one expression for odd and even sides
        kept.append(side[None] & (np.abs(logs[:, None, :] - median[:, :, None]) <= limit))
    keep_before, keep_after = kept
    n_after, n_before = keep_after.sum(axis=2), keep_before.sum(axis=2)
    rows = np.arange(len(taus))
    counted = ((n_after >= config.min_after) & (n_after >= 0.75 * (n_total - taus)) & (n_before >= _MIN_LEVEL)
               & keep_after[:, rows, taus] & keep_after[:, rows, taus + 1]
               & (taus[None, :] <= (n_total - fewest_after)[:, None]))
    n_a, n_b = np.maximum(n_after, 1), np.maximum(n_before, 1)
    diff = (np.einsum("stl,sl->st", keep_after, logs) / n_a - np.einsum("stl,sl->st", keep_before, logs) / n_b)
    settled = n_before >= config.min_before
    sd_, df_ = sd[:, None], df[:, None]
    least_sigma = np.where(settled, sd_ * np.sqrt(df_ / np.maximum(n_a + n_b - 2 + df_, 1)), sd_)
    reach = np.abs(diff) * (1.0 + 1e-6) + 1e-9 >= z_cap * least_sigma * np.sqrt(1.0 / n_a + 1.0 / n_b)
    return (counted & reach).any(axis=1)


@dataclass(frozen=True, slots=True)
class Search:
    """One series to search: detect_change_points's arguments."""

    values: Sequence[float]
    baseline_start: int = 0
    config: DetectionConfig = DetectionConfig()


# Segments checked by one _splits_possible call at most: its arrays are segments x 57 splits x 60 points, and they
# must stay in the core's cache (720 windows of 60 points, 2026-11-25, this machine: 37 ms of CPU in batches of 32,
# 58 ms in batches of 256, 67 ms one by one; /tmp script, not kept).
_BATCH = 32


def detect_change_points_many(searches: Sequence[Search]) -> list[list[ChangePoint]]:
    """detect_change_points of each search, the same answers: a run's searches (720 series x metrics), most of which
    are one window of a series that did not move. Those single windows are first checked together, by segment
    length and configuration (_splits_possible); a window that can hold no change is answered [] at once, the
    others are searched one by one as before."""
    out: list[list[ChangePoint] | None] = [None] * len(searches)
    groups: dict[tuple[int, DetectionConfig], list[tuple[int, np.ndarray, Noise]]] = {}
    for i, search in enumerate(searches):
        config = search.config
        raw = np.asarray(search.values, dtype=float)
        n = len(raw)
        base = search.baseline_start
        if raw.ndim != 1 or not 0 <= base <= n or n - base > config.window:
            continue  # the general path: it raises what is wrong, or walks a long history in windows
        if n - base < _MIN_LEVEL + config.min_after:
            continue
        if np.any(~np.isfinite(raw)) or np.any(raw <= 0):
            continue
        logs = np.log(raw)
        noise = series_noise(logs[max(0, n - 2 * config.window) : n], math.log1p(config.noise_floor))
        groups.setdefault((n - base, config), []).append((i, logs[base:], noise))
    for (_length, config), members in groups.items():
        z_cap = _least_z(config)
        for chunk in range(0, len(members), _BATCH):
            part = members[chunk : chunk + _BATCH]
            possible = _splits_possible(np.stack([logs for _, logs, _ in part]), config,
                                        np.array([noise.robust for _, _, noise in part]),
                                        np.array([noise.sd for _, _, noise in part]),
                                        np.array([noise.df for _, _, noise in part], dtype=float), z_cap)
            for (i, _, _), can in zip(part, possible, strict=True):
                if not can:
                    out[i] = []
    return [found if found is not None else detect_change_points(s.values, baseline_start=s.baseline_start,
                                                                  config=s.config)
            for found, s in zip(out, searches, strict=True)]
