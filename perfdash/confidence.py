"""How sure a speedup is: a confidence interval from the model's raw timing samples.

The runner times eager and compiled back to back, interleaved (``eager_ms[i]`` and ``compiled_ms[i]`` ran one after
the other), and reports speedup = median(eager) / median(compiled) (runner/outcome.py). The interval is a paired
bootstrap of exactly that statistic (scipy.stats.bootstrap, ``paired=True``): pairs are resampled together, so the
frequency drift and machine load that move both timings of a pair stay in the resamples instead of being averaged
away. Percentile intervals, not BCa: BCa's acceleration comes from a jackknife of the median, which is degenerate for
the tied, discrete values of small timing samples (scipy then returns NaN); the percentile interval is defined for
any sample. A fixed seed makes the interval a function of the samples, so the same run always shows the same
interval. Coverage on simulated paired timings is measured by bench/speedup_ci.py.

Two intervals that overlap cannot tell a change from noise: perfdash.judgement applies that to every comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def speedup_interval(eager_ms: Sequence[float], compiled_ms: Sequence[float], *, level: float = CONFIDENCE_LEVEL,
                     resamples: int = RESAMPLES) -> Interval | None:
    """The ``level`` confidence interval of median(eager) / median(compiled) over the paired samples; None when
    there are too few pairs or the two lists do not pair up."""
    if len(eager_ms) != len(compiled_ms) or len(eager_ms) < MIN_SAMPLES:
        return None
    eager, compiled = np.asarray(eager_ms, dtype=float), np.asarray(compiled_ms, dtype=float)
    if np.all(eager == eager[0]) and np.all(compiled == compiled[0]):
        ratio = float(eager[0] / compiled[0])  # no spread at all: the bootstrap has nothing to resample
        return Interval(ratio, ratio)
    result = bootstrap((eager, compiled), _median_ratio, paired=True, vectorized=True, n_resamples=resamples,
                       confidence_level=level, method="percentile", rng=np.random.default_rng(_SEED))
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (np.isfinite(low) and np.isfinite(high)):
        return None
    return Interval(low, high)

