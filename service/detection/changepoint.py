"""Change-point detection over one series of nightly values: pure maths, no database, no I/O.

The method follows Apache Otava (formerly Hunter, MongoDB's approach): E-divisive means ranks the candidate split
points of a window, and a two-sample t-test decides whether the best candidate is a real change. Three additions
make it quiet enough to trust every morning:

- work in log space, so a change is relative (5 % of a 0.2 ms latency and of a 2 s compile time look alike);
- robust noise and levels: the noise scale is the MAD of the points before the split, and points further than
  ``outlier_k`` noise scales from their side's median are left out of the test, so a single-night spike is never a
  level (with two points after a split, a spike and a normal night disagree, both become outliers, and nothing is left
  to test);
- a minimum effect per metric, tested as "not significantly smaller than the minimum effect" (the change's 90 %
  confidence interval reaches it). A point estimate >= 5 % would miss half of all real 5 % steps on the night after
  they land; the interval form finds them while still ignoring small changes once the evidence is plentiful.

The E-divisive statistic is hand-written (numpy, O(n^2) over a window of at most ``window`` points) because scipy has
no energy-statistics change-point routine and Otava's own package pulls in a CLI and database clients.

A stored change point is the baseline: callers pass ``baseline_start`` (the index of the last stored change) and only
the points from there on are searched, so an old change is never found again and the new level is what later nights
are compared with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

# Minimum relative effect per metric, as the dashboard defines regressions (DESIGN.md, "Detection and bisection").
MIN_EFFECT: dict[str, float] = {
    "speedup": 0.05,
    "abs_latency": 0.05,
    "compression_ratio": 0.05,
    "compilation_latency": 0.10,
}
# A level needs at least this many points before a change (with fewer than min_before, the noise is the series').
_MIN_LEVEL = 3
# Which way is better for each metric: a change in the other direction is a regression.
HIGHER_IS_BETTER: dict[str, bool] = {
    "speedup": True,
    "abs_latency": False,
    "compression_ratio": True,
    "compilation_latency": False,
}


@dataclass(frozen=True, slots=True)
class DetectionConfig:
    min_effect: float = 0.05  # relative, e.g. 0.05 = 5 %
    p_value_max: float = 5e-4  # two-sided t-test on the log values of both sides' inliers
    min_before: int = 8  # points before a change to estimate the noise from them (fewer: the series' own noise)
    min_after: int = 2  # points after a change: one noisy night never alerts
    # In a series whose noise is above half the minimum effect, a spike next to a 2-sigma night looks like a new
    # level on two points: wait for this many.
    min_after_noisy: int = 3
    window: int = 60  # points searched at once (E-divisive is O(n^2)); longer histories are walked in windows
    outlier_k: float = 3.0  # points further than k robust sigmas from their side's median are spikes
    pair_k: float = 2.5  # two points after a change must agree: |a1 - a2| <= pair_k * sqrt(2) * sigma
    ci_z: float = 1.645  # one-sided 95 %: the change must not be significantly below min_effect
    noise_floor: float = 0.002  # relative; a perfectly flat history (simulators, cached values) is not infinitely tight
    max_candidates: int = 3  # local maxima of the E-divisive statistic tried per segment before giving up
    # A split with n_after points has been tested on (n_after - min_after) earlier nights already; every night tries
    # it again, so its p-value must beat p_value_max * fresh_after / n_after once it is older than fresh_after nights.
    fresh_after: int = 4

    def __post_init__(self) -> None:
        if not 0 < self.min_effect < 1:
            raise ValueError(f"min_effect must be in (0, 1), got {self.min_effect}")
        if not 0 < self.p_value_max < 1:
            raise ValueError(f"p_value_max must be in (0, 1), got {self.p_value_max}")
        if self.min_after < 2 or self.min_before < 3:
            raise ValueError("min_after must be >= 2 and min_before >= 3")
        if self.window < self.min_before + self.min_after:
            raise ValueError("window is shorter than min_before + min_after")

    @classmethod
    def for_metric(cls, metric: str, **overrides: float | int) -> DetectionConfig:
        return cls(min_effect=MIN_EFFECT[metric], **overrides)  # type: ignore[arg-type]


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

    @property
    def relative_change(self) -> float:
        return self.change_pct / 100.0

    def is_regression(self, higher_is_better: bool) -> bool:
        return (self.change_pct < 0) if higher_is_better else (self.change_pct > 0)


def energy_statistic(z: np.ndarray, min_size: int = 2) -> np.ndarray:
    """E-divisive means' Q(tau) for every split tau of ``z`` (alpha = 1); -inf where a side has < min_size points.

    Q(tau) = m n / (m + n) * (2/(m n) sum|x-y| - 1/C(m,2) sum_{i<k}|x_i-x_k| - 1/C(n,2) sum_{j<k}|y_j-y_k|)
    with x = z[:tau], y = z[tau:] (Matteson & James 2014). Block sums of the distance matrix come from a 2-D prefix sum.
    """
    n_total = len(z)
    q = np.full(n_total, -np.inf)
    if n_total < 2 * min_size:
        return q
    distances = np.abs(z[:, None] - z[None, :])
    prefix = np.zeros((n_total + 1, n_total + 1))
    prefix[1:, 1:] = distances.cumsum(0).cumsum(1)
    taus = np.arange(min_size, n_total - min_size + 1)
    end = n_total

    def block(r0: np.ndarray | int, r1: np.ndarray | int, c0: np.ndarray | int, c1: np.ndarray | int) -> np.ndarray:
        return prefix[r1, c1] - prefix[r0, c1] - prefix[r1, c0] + prefix[r0, c0]

    m = taus.astype(float)
    n = (end - taus).astype(float)
    cross = block(0, taus, taus, end)
    within_x = block(0, taus, 0, taus) / 2.0
    within_y = block(taus, end, taus, end) / 2.0
    e_hat = 2.0 * cross / (m * n) - within_x / (m * (m - 1) / 2.0) - within_y / (n * (n - 1) / 2.0)
    q[taus] = m * n / (m + n) * e_hat
    return q


def pooled_t_test(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Student's two-sample t-test with pooled variance: (t, two-sided p), as scipy.stats.ttest_ind(equal_var=True).

    Written out because ttest_ind's argument handling costs ~1 ms a call, and detection runs it for every candidate of
    every series and metric each night; the p-value still comes from scipy (the t distribution's CDF).
    """
    n_a, n_b = len(a), len(b)
    df = n_a + n_b - 2
    pooled = (float(((a - a.mean()) ** 2).sum()) + float(((b - b.mean()) ** 2).sum())) / df
    diff = float(a.mean() - b.mean())
    se = math.sqrt(pooled * (1.0 / n_a + 1.0 / n_b))
    if se == 0.0:
        return (math.copysign(math.inf, diff), 0.0) if diff else (0.0, 1.0)
    t_stat = diff / se
    return t_stat, float(2.0 * special.stdtr(df, -abs(t_stat)))


def noise_sigma(logs: np.ndarray, floor: float) -> float:
    """The night-to-night noise of a series: MAD of its first differences / sqrt(2).

    Differences cancel level changes (a step moves one difference) and a spike moves only two, so this is the series'
    own noise even across changes; a stretch just after a stored change has too few points to estimate it alone.
    """
    if len(logs) < 3:
        return floor
    diffs = np.diff(logs)
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    return max(1.4826 * mad / math.sqrt(2.0), floor)


def _candidates(q: np.ndarray, limit: int) -> list[int]:
    """The highest local maxima of Q, best first."""
    padded = np.concatenate(([-np.inf], q, [-np.inf]))
    is_peak = np.isfinite(q) & (q >= padded[:-2]) & (q >= padded[2:])
    peaks = np.flatnonzero(is_peak)
    return [int(i) for i in peaks[np.argsort(-q[peaks], kind="stable")][:limit]]


def _test_split(logs: np.ndarray, raw: np.ndarray, tau: int, config: DetectionConfig,
                noise: tuple[float, int]) -> ChangePoint | None:
    before, after = logs[:tau], logs[tau:]
    sigma, noise_df = noise
    keep_before = np.abs(before - np.median(before)) <= config.outlier_k * sigma
    keep_after = np.abs(after - np.median(after)) <= config.outlier_k * sigma
    n_before, n_after = int(keep_before.sum()), int(keep_after.sum())
    # A level needs most of its points to agree: a spike among few points leaves too few inliers to count.
    min_after = config.min_after if sigma <= math.log1p(config.min_effect) / 2 else config.min_after_noisy
    if n_before < _MIN_LEVEL or len(after) < min_after or n_after < config.min_after or n_after < 0.75 * len(after):
        return None
    # With exactly two points after, a spike and a normal night are equally far from their median, so the filter above
    # cannot tell which is the spike: demand that the two agree as two draws of the same level would.
    if len(after) == 2 and abs(after[1] - after[0]) > config.pair_k * math.sqrt(2.0) * sigma:
        return None
    b, a = before[keep_before], after[keep_after]
    diff = float(a.mean() - b.mean())
    # ... and both must have moved, each by at least half the minimum effect: a spike next to a night that is merely a
    # little noisy in the same direction is not a new level.
    if len(after) == 2 and np.any(np.sign(diff) * (after - b.mean()) < math.log1p(config.min_effect) / 2):
        return None
    # Pooled variance: with two points after a change their own variance is meaningless (Welch would have ~1 degree of
    # freedom); the spread before the change is the noise estimate, and the inlier filter has removed spikes.
    if n_before >= config.min_before:
        t_stat, p_value = pooled_t_test(a, b)
    else:
        # Too few points since the last change to estimate the noise from them: use the series' own noise (known
        # sigma, its degrees of freedom from the differences it came from).
        t_stat = diff / (sigma * math.sqrt(1.0 / n_before + 1.0 / n_after))
        p_value = float(2.0 * special.stdtr(noise_df, -abs(t_stat)))
    threshold = config.p_value_max * min(1.0, config.fresh_after / len(after))
    if not math.isfinite(p_value) or p_value > threshold:
        return None
    se = abs(diff / t_stat) if t_stat else math.inf
    if abs(diff) + config.ci_z * se < math.log1p(config.min_effect):
        return None
    raw_before, raw_after = raw[:tau][keep_before], raw[tau:][keep_after]
    return ChangePoint(
        index=tau,
        before_mean=float(raw_before.mean()),
        after_mean=float(raw_after.mean()),
        change_pct=100.0 * math.expm1(diff),
        p_value=p_value,
        n_before=n_before,
        n_after=n_after,
    )


def _segment(logs: np.ndarray, raw: np.ndarray, offset: int, config: DetectionConfig, noise: tuple[float, int],
             out: list[ChangePoint]) -> None:
    """Binary segmentation: find the best split of this segment, then look for more on both sides of it."""
    if len(logs) < _MIN_LEVEL + config.min_after:
        return
    q = energy_statistic(logs)
    q[:_MIN_LEVEL] = -np.inf
    q[len(logs) - config.min_after + 1 :] = -np.inf
    for tau in _candidates(q, config.max_candidates):
        found = _test_split(logs, raw, tau, config, noise)
        if found is None:
            continue
        out.append(ChangePoint(**{**_as_dict(found), "index": found.index + offset}))
        _segment(logs[:tau], raw[:tau], offset, config, noise, out)
        _segment(logs[tau:], raw[tau:], offset + tau, config, noise, out)
        return


def _as_dict(cp: ChangePoint) -> dict[str, float | int]:
    return {name: getattr(cp, name) for name in ChangePoint.__slots__}


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
    found: list[ChangePoint] = []
    base = baseline_start
    # A long unexamined history (a backfill of old CSVs) is walked in overlapping windows, as the nightly run would
    # have seen it, each window starting at the last change found; a nightly call is the single last window.
    end = len(raw) if len(raw) - base <= config.window else base + config.window
    while True:
        start = max(base, end - config.window)
        window: list[ChangePoint] = []
        history = logs[max(0, end - 2 * config.window) : end]
        noise = (noise_sigma(history, math.log1p(config.noise_floor)), max(len(history) - 2, 1))
        _segment(logs[start:end], raw[start:end], start, config, noise, window)
        if window:
            found += window
            base = max(cp.index for cp in window)
        if end == len(raw):
            break
        end = min(len(raw), end + config.window // 2)
    return sorted(found, key=lambda cp: cp.index)
