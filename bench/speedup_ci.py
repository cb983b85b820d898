"""How right and how costly the speedup confidence intervals are (perfdash.confidence).

Coverage: simulated paired timings with a known speedup. Each pair shares a drift factor (machine load, frequency:
a slow random walk, as interleaving sees it) and gets its own lognormal noise; in some settings a share of the
iterations are outliers (a 1.5x stall). The true speedup is the ratio of the two population medians, E / C. For each
setting the bench draws --trials sample sets, computes the 95 % interval and counts how often it holds the truth,
beside the interval's mean relative width; the same for an unpaired bootstrap of the same statistic, to show what the
pairing buys. Cost: milliseconds per interval, and per 150-model run (what ingest adds).

    nice -n 5 .venv/bin/python -m bench.speedup_ci [--trials 400]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import bootstrap

from perfdash.confidence import speedup_interval

TRUE_SPEEDUP = 1.6


def _draw(rng: np.random.Generator, n: int, noise: float, drift: float, outliers: float) -> tuple[np.ndarray, ...]:
    walk = np.exp(np.cumsum(rng.normal(0, drift, n)))  # shared by the two timings of a pair
    eager = 16.0 * walk * np.exp(rng.normal(0, noise, n))
    compiled = 10.0 * walk * np.exp(rng.normal(0, noise, n))
    for series in (eager, compiled):
        stalls = rng.random(n) < outliers
        series[stalls] *= 1.5
    return eager, compiled


def _unpaired(eager: np.ndarray, compiled: np.ndarray) -> tuple[float, float]:
    result = bootstrap((eager, compiled), lambda e, c, axis=-1: np.median(e, axis=axis) / np.median(c, axis=axis),
                       vectorized=True, n_resamples=2000, method="percentile", rng=np.random.default_rng(1))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=400)
    args = parser.parse_args()
    rng = np.random.default_rng(2024)
    settings = [(30, 0.01, 0.0, 0.0), (50, 0.01, 0.0, 0.0), (50, 0.05, 0.0, 0.0), (50, 0.05, 0.01, 0.0),
                (50, 0.05, 0.01, 0.05), (30, 0.20, 0.02, 0.05)]
    print(f"true speedup {TRUE_SPEEDUP}x, 95 % intervals, {args.trials} sample sets per setting")
    print(f"{'pairs':>5} {'noise':>6} {'drift':>6} {'stalls':>6} | {'paired: coverage':>16} {'width':>7} |"
          f" {'unpaired: coverage':>18} {'width':>7}")
    for n, noise, drift, outliers in settings:
        hits = hits_unpaired = 0
        widths, widths_unpaired = [], []
        for _ in range(args.trials):
            eager, compiled = _draw(rng, n, noise, drift, outliers)
            interval = speedup_interval(eager, compiled)
            assert interval is not None
            hits += interval.low <= TRUE_SPEEDUP <= interval.high
            widths.append((interval.high - interval.low) / TRUE_SPEEDUP)
            low, high = _unpaired(eager, compiled)
            hits_unpaired += low <= TRUE_SPEEDUP <= high
            widths_unpaired.append((high - low) / TRUE_SPEEDUP)
        print(f"{n:>5} {noise:>6.0%} {drift:>6.0%} {outliers:>6.0%} | {hits / args.trials:>16.1%} "
              f"{np.mean(widths):>7.1%} | {hits_unpaired / args.trials:>18.1%} {np.mean(widths_unpaired):>7.1%}")
    eager, compiled = _draw(rng, 50, 0.05, 0.01, 0.0)
    speedup_interval(eager, compiled)
    start = time.perf_counter()
    repeats = 100
    for _ in range(repeats):
        speedup_interval(eager, compiled)
    per = (time.perf_counter() - start) / repeats
    print(f"cost: {per * 1000:.1f} ms per interval (50 pairs, 2000 resamples); {150 * per:.2f} s per 150-model run")


if __name__ == "__main__":
    main()
