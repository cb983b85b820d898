"""The change-point search as it was before issue 31's speed work (service/detection/changepoint.py at a98314c), kept
unchanged as the reference that tests/detection/test_changepoint_speed.py compares the faster search with: same
configuration and result types, plain numpy calls (np.median, ndarray.mean, fancy-indexed prefix sums).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import special

from service.detection.changepoint import ChangePoint, DetectionConfig, Noise

_MIN_LEVEL = 3


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
    spread = np.abs(diffs - np.median(diffs))
    mad = 1.4826 * float(np.median(spread))
    robust = max(mad / math.sqrt(2.0), floor)
    kept = diffs[spread <= 4.0 * max(mad, floor * math.sqrt(2.0))]
    if len(kept) < 3:
        return Noise(robust, robust, 1)
    sd = float(np.sqrt(np.mean((kept - kept.mean()) ** 2))) / math.sqrt(2.0)
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


def _t_test(a: np.ndarray, b: np.ndarray, noise: Noise, settled: bool) -> tuple[float, float, float]:
    """(t, two-sided p, sigma): the pooled variance of both sides averaged with the series' noise, or, for a level too
    short to estimate anything from (``settled`` false), the series' noise alone.

    The series' noise comes from the same nights as the two sides (their first differences), so it is no independent
    evidence: the degrees of freedom are those of the better of the two estimates, not their sum."""
    n_a, n_b = len(a), len(b)
    if settled:
        squares = float(((a - a.mean()) ** 2).sum()) + float(((b - b.mean()) ** 2).sum())
        df = max(n_a + n_b - 2, noise.df)
        sigma = math.sqrt((squares + noise.sd**2 * noise.df) / (n_a + n_b - 2 + noise.df))
    else:
        sigma, df = noise.sd, noise.df
    diff = float(a.mean() - b.mean())
    t_stat = diff / (sigma * math.sqrt(1.0 / n_a + 1.0 / n_b))
    return t_stat, float(2.0 * special.stdtr(df, -abs(t_stat))), sigma


def _test_split(logs: np.ndarray, raw: np.ndarray, tau: int, config: DetectionConfig,
                noise: Noise) -> ChangePoint | _Boundary | None:
    before, after = logs[:tau], logs[tau:]
    sigma = noise.robust
    effect = math.log1p(config.min_effect)
    noisy = noise.sd > config.noisy_above * effect
    keep_before = np.abs(before - np.median(before)) <= config.outlier_k * sigma
    keep_after = np.abs(after - np.median(after)) <= config.outlier_k * sigma
    n_before, n_after = int(keep_before.sum()), int(keep_after.sum())
    # A level needs most of its points to agree, and never starts on a spike: a spike among few points leaves too few
    # inliers to count, and one on the first or second night after the split leaves the level resting on one night.
    min_after = config.min_after_noisy if noisy else config.min_after
    if (n_before < _MIN_LEVEL or len(after) < min_after or n_after < config.min_after
            or n_after < 0.75 * len(after) or not (keep_after[0] and keep_after[1])):
        return None
    # On a new level's first nights its median is two or three points: if two of them are spikes in the same direction,
    # the median sits between them and the night that is dropped as the outlier is a normal one, back at the old level.
    # A dropped night that is an inlier of the old level says the "level" is the spikes.
    if len(after) <= config.newest_splits:
        dropped = np.abs(after[~keep_after] - np.median(before))
        if np.any(dropped <= config.outlier_k * sigma):
            return None
    # With exactly two points after, a spike and a normal night are equally far from their median, so the filter above
    # cannot tell which is the spike: demand that the two agree as two draws of the same level would.
    if len(after) == 2 and abs(after[1] - after[0]) > config.pair_k * math.sqrt(2.0) * sigma:
        return None
    b, a = before[keep_before], after[keep_after]
    diff = float(a.mean() - b.mean())
    # ... and both must have moved, each by at least half the minimum effect: a spike next to a night that is merely a
    # little noisy in the same direction is not a new level.
    if len(after) == 2 and np.any(np.sign(diff) * (after - b.mean()) < effect / 2):
        return None
    settled = n_before >= config.min_before
    t_stat, p_value, test_sigma = _t_test(a, b, noise, settled)
    # No single night carries the change: without the most extreme point after the split it must still be there.
    rest = np.delete(a, int(np.argmax(np.sign(diff) * (a - b.mean()))))
    rest_diff = float(rest.mean() - b.mean())
    loo_z = config.loo_z_noisy if noisy else config.loo_z
    if rest_diff * diff <= 0 or abs(rest_diff) < loo_z * test_sigma * math.sqrt(1 / n_before + 1 / len(rest)):
        return None
    if len(after) == 2:
        threshold = config.p_value_two_points
    elif len(after) == 3:
        threshold = config.p_value_three_points
    else:
        threshold = config.p_value_max * min(1.0, config.fresh_after / len(after)) ** 2
    if not settled:
        threshold *= config.short_level_factor
    if noisy:
        threshold *= config.noisy_factor
    significant = p_value <= config.p_value_max and min(len(after), n_before) >= config.boundary_min
    if not p_value <= threshold:
        return _BOUNDARY if significant else None
    se = abs(diff / t_stat) if t_stat else math.inf
    if abs(diff) + config.ci_z * se < effect:
        # Significant but small: no alert, yet the levels on either side are not one level.
        return _BOUNDARY
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


def _segment(logs: np.ndarray, raw: np.ndarray, offset: int, config: DetectionConfig, noise: Noise,
             out: list[ChangePoint]) -> None:
    """Binary segmentation: the first candidate that is a change (or a boundary) splits the segment, and both sides
    are searched again."""
    if len(logs) < _MIN_LEVEL + config.min_after:
        return
    q = energy_statistic(logs)
    q[:_MIN_LEVEL] = -np.inf
    q[len(logs) - config.min_after + 1 :] = -np.inf
    candidates = _candidates(q, config.max_candidates)
    candidates += [tau for tau in range(len(logs) - 2, len(logs) - config.newest_splits - 1, -1)
                   if tau >= _MIN_LEVEL and tau not in candidates]
    for tau in candidates:
        found = _test_split(logs, raw, tau, config, noise)
        if found is None:
            continue
        if isinstance(found, ChangePoint):
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
        noise = series_noise(logs[max(0, end - 2 * config.window) : end], math.log1p(config.noise_floor))
        _segment(logs[start:end], raw[start:end], start, config, noise, window)
        if window:
            found += window
            base = max(cp.index for cp in window)
        if end == len(raw):
            break
        end = min(len(raw), end + config.window // 2)
    return sorted(found, key=lambda cp: cp.index)
