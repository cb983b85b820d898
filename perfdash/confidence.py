"""How sure a speedup is: a confidence interval from the model's raw timing samples.

The runner times eager and compiled back to back, interleaved (``eager_ms[i]`` and ``compiled_ms[i]`` ran one after
the other), and reports speedup = median(eager) / median(compiled) (runner/outcome.py). The interval is a paired
bootstrap of exactly that statistic (scipy.stats.bootstrap, ``paired=True``): pairs are resampled together, so the
frequency drift and machine load that move both timings of a pair stay in the resamples instead of being averaged
away. Percentile intervals, not BCa: BCa's acceleration comes from a jackknife of the median, which is degenerate for
the tied, discrete values of small timing samples (scipy then returns NaN); the percentile interval is defined for
any sample. A fixed seed makes the interval a function of the samples, so the same run always shows the same
interval. Coverage on simulated paired timings is measured by bench/speedup_ci.py.

A result measured in several worker processes (``perfdash run --processes K``) says which process timed each pair.
Its interval is a two-stage (cluster) bootstrap: each resample draws K processes with replacement, then pairs with
replacement within each drawn process. What one process's state (memory layout, thread placement) does to all its
pairs then widens the interval as it moves the next run, instead of passing for K times as many independent pairs.

Two intervals that overlap cannot tell a change from noise: perfdash.judgement applies that to every comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import bootstrap

CONFIDENCE_LEVEL = 0.95
RESAMPLES = 2000
MIN_SAMPLES = 5  # fewer pairs than this give no interval worth showing
_SEED = 20240611


@dataclass(frozen=True, slots=True)
class Interval:
    low: float
    high: float

    def __post_init__(self) -> None:
        if not (np.isfinite(self.low) and np.isfinite(self.high)) or self.low > self.high:
            raise ValueError(f"not an interval: [{self.low}, {self.high}]")

    @property
    def text(self) -> str:
        return f"{self.low:.2f}–{self.high:.2f}x"


def _median_ratio(eager: np.ndarray, compiled: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(eager, axis=axis) / np.median(compiled, axis=axis)


def _process_resamples(process: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Indices into the pairs, one row per resample of the two-stage bootstrap (processes, then pairs within each
    drawn process); -1 pads a row where the drawn processes hold fewer pairs than the most."""
    groups = [np.flatnonzero(process == p) for p in np.unique(process)]
    sizes = np.array([len(g) for g in groups])
    widest = int(sizes.max())
    members = np.full((len(groups), widest), -1)
    for row, group in enumerate(groups):
        members[row, : len(group)] = group
    drawn = rng.integers(len(groups), size=(resamples, len(groups)))  # processes
    within = (rng.random((resamples, len(groups), widest)) * sizes[drawn][..., None]).astype(int)  # pairs
    picked = np.take_along_axis(members[drawn], within, axis=2)
    picked[np.arange(widest) >= sizes[drawn][..., None]] = -1
    return picked.reshape(resamples, -1)


def _clustered(values: tuple[np.ndarray, ...], process: np.ndarray, statistic: Callable[..., np.ndarray], level: float,
               resamples: int) -> tuple[float, float]:
    """The percentile interval of ``statistic`` (of the values' columns, along the last axis) over the two-stage
    bootstrap's resamples."""
    index = _process_resamples(process, resamples, np.random.default_rng(_SEED))
    padded = [np.where(index >= 0, v[np.maximum(index, 0)], np.nan) for v in values]
    replicates = statistic(*padded)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(replicates, [tail, 100 - tail])
    return float(low), float(high)


def _nan_median_ratio(eager: np.ndarray, compiled: np.ndarray) -> np.ndarray:
    return np.nanmedian(eager, axis=-1) / np.nanmedian(compiled, axis=-1)


def _several(process: Sequence[int], count: int) -> np.ndarray | None:
    """The process indices as an array when they name more than one process for ``count`` pairs, else None."""
    if len(process) != count or len(set(process)) < 2:
        return None
    return np.asarray(process, dtype=int)


def speedup_interval(eager_ms: Sequence[float], compiled_ms: Sequence[float], *, process: Sequence[int] = (),
                     level: float = CONFIDENCE_LEVEL, resamples: int = RESAMPLES) -> Interval | None:
    """The ``level`` confidence interval of median(eager) / median(compiled) over the paired samples; None when
    there are too few pairs or the two lists do not pair up. ``process``: the worker process of each pair
    (ModelSamples.process); naming two or more, the interval is the two-stage bootstrap's."""
    if len(eager_ms) != len(compiled_ms) or len(eager_ms) < MIN_SAMPLES:
        return None
    eager, compiled = np.asarray(eager_ms, dtype=float), np.asarray(compiled_ms, dtype=float)
    if np.all(eager == eager[0]) and np.all(compiled == compiled[0]):
        ratio = float(eager[0] / compiled[0])  # no spread at all: the bootstrap has nothing to resample
        return Interval(ratio, ratio)
    processes = _several(process, len(eager))
    if processes is not None:
        return Interval(*_clustered((eager, compiled), processes, _nan_median_ratio, level, resamples))
    result = bootstrap((eager, compiled), _median_ratio, paired=True, vectorized=True, n_resamples=resamples,
                       confidence_level=level, method="percentile", rng=np.random.default_rng(_SEED))
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (np.isfinite(low) and np.isfinite(high)):
        return None
    return Interval(low, high)


def latency_interval(compiled_ms: Sequence[float], *, process: Sequence[int] = (), level: float = CONFIDENCE_LEVEL,
                     resamples: int = RESAMPLES) -> Interval | None:
    """The ``level`` confidence interval of median(compiled) (abs_latency), resampled as ``speedup_interval``
    resamples; None with fewer than MIN_SAMPLES timings."""
    compiled = np.asarray(compiled_ms, dtype=float)
    if len(compiled) < MIN_SAMPLES:
        return None
    if np.all(compiled == compiled[0]):
        return Interval(float(compiled[0]), float(compiled[0]))
    processes = _several(process, len(compiled))
    if processes is not None:
        return Interval(*_clustered((compiled,), processes, lambda c: np.nanmedian(c, axis=-1), level, resamples))
    result = bootstrap((compiled,), np.median, vectorized=True, n_resamples=resamples, confidence_level=level,
                       method="percentile", rng=np.random.default_rng(_SEED))
    return Interval(float(result.confidence_interval.low), float(result.confidence_interval.high))

