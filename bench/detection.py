"""Benchmark perfdash's regression detection against two common baselines on synthetic nightly series.

Each synthetic series is one metric of one model, one value a night, with multiplicative noise (2 % or 5 % coefficient
of variation), occasional single-night spikes (+-15..50 %, about one night in 60), and either no change, one step of
3/5/10/30 %, or several steps. Every method is replayed night by night, exactly as it would run in production (it sees
only the nights so far; perfdash stores what it found and starts from there the next night), and its alerts are scored:

- an alert raised within ``MATCH_NIGHTS`` nights after a real change (and before the next one) finds that change; the
  first one counts for recall and delay (nights after the night it landed; 0 = that very night, which no
  method that waits for a second point can reach),
  later ones for the same change are duplicates (alert noise, but not false);
- every other alert is false; a false alert whose new level starts on a spike's night or the night before it (the
  spike is one of its first two points) is counted again under "spike" (a single-night spike that alerted), and one
  whose new level starts within two nights of a real change is counted again under "late" (a real change, but found
  after the match window: under 5 % noise a 5 % step is one sigma, and it takes weeks to stand out).

Baselines: a fixed 10 % threshold against one reference run (the previous night, as Intel's inductor-tools compare a
target build to a reference build) and z >= 5 over a 100-point lookback (conbench's default). A last row is no method
but a reference: an oracle that knows the true level, the noise's sigma and the spike nights, and z-tests the newest
2, 3 and 4 nights at one false alert per 1,000 nights; no method that has to estimate those gets much closer to the
best recall possible at that false alert rate, so the distance to it is about what better statistics could still win.

Run from the repository root: ``.venv/bin/python -m bench.detection [--series N] [--nights N] [--seed S] [--sweep]``

``--alerts`` runs the notification-level bench instead (bench/alerts.py: six noise models, environment shifts,
the A/B confirmation, GitHub issues per configuration and month; ``--series`` is then series per configuration,
default 500, ``--nights`` default 365, ``--configurations`` per noise model). Its figures are at the end of this file.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.ab_noise import OUTPUT as AB_NOISE
from service.detection.changepoint import DetectionConfig, detect_change_points

MATCH_NIGHTS = 10
WARMUP = 10  # nights of history before any method may alert
STEP_SIZES = (0.03, 0.05, 0.10, 0.30)
NOISE_LEVELS = (0.02, 0.05)
SPIKE_RATE = 1 / 60


@dataclass
class Series:
    values: np.ndarray
    level: np.ndarray  # the true level each night (only the oracle looks)
    changes: list[int]  # first night of each new level
    steps: list[float]  # relative size of each change
    spikes: set[int]
    noise: float


@dataclass
class Score:
    found: dict[float, list[int]] = field(default_factory=dict)  # step size -> delays of the changes found
    total: dict[float, int] = field(default_factory=dict)
    false_alerts: int = 0
    duplicates: int = 0
    spike_alerts: int = 0
    late_alerts: int = 0
    nights: int = 0


def make_series(rng: np.random.Generator, nights: int, noise: float, steps: Sequence[float]) -> Series:
    level = np.ones(nights)
    changes = []
    if steps:
        # Changes land after the warm-up with room for MATCH_NIGHTS after each, at least 15 nights apart.
        slots = np.sort(rng.choice(np.arange(WARMUP + 15, nights - MATCH_NIGHTS, 15), size=len(steps), replace=False))
        for night, step in zip(slots, steps, strict=True):
            sign = rng.choice((-1.0, 1.0))
            level[night:] *= 1.0 + sign * step
            changes.append(int(night))
    values = level * np.exp(rng.normal(0.0, noise, nights))
    # Single-night spikes: two bad nights in a row are indistinguishable from a change on the second night, so a spike
    # never follows another.
    spikes: set[int] = set()
    for i in np.flatnonzero(rng.random(nights) < SPIKE_RATE):
        if int(i) - 1 not in spikes:
            spikes.add(int(i))
    for i in spikes:
        values[i] *= 1.0 + rng.choice((-1.0, 1.0)) * rng.uniform(0.15, 0.5)
    return Series(values=values, level=level, changes=changes, steps=list(steps), spikes=spikes, noise=noise)


# A method sees the series so far and returns tonight's alerts: the night each reported change starts on. A factory
# makes one method per series; it is handed the series, which only the oracle looks at.
Method = Callable[[np.ndarray], list[int]]
Factory = Callable[[Series], Method]


def perfdash_method(**overrides: float) -> Factory:
    def factory(series: Series) -> Method:
        state = {"baseline": 0}
        config = DetectionConfig(**{"min_effect": 0.05, **overrides})  # type: ignore[arg-type]

        def tonight(history: np.ndarray) -> list[int]:
            found = detect_change_points(history, baseline_start=state["baseline"], config=config)
            if found:
                state["baseline"] = found[-1].index
            return [cp.index for cp in found]

        return tonight

    return factory


def otava_method(window_len: int = 30, max_pvalue: float = 0.001, min_magnitude: float = 0.05) -> Factory:
    """Apache Otava's own detector (``apache-otava`` 0.8.0, ``otava.analysis.compute_change_points``: windowed
    E-divisive split, t-test merge; the library perfdash's service/detection/changepoint.py follows), run as Otava
    runs nightly: the whole series so far, incrementally (its ``new_data``/``old_weak_cp``), every change point it
    reports at an index not reported before is an alert. Same minimum effect as perfdash (5 %, Otava's
    ``min_magnitude``); p-value 0.001 and window 30, Otava's documented defaults for ``otava analyze``."""
    from otava.analysis import compute_change_points  # the dev extra; imported here so the other rows run without

    def factory(series: Series) -> Method:
        state: dict[str, object] = {"weak": None, "seen": set()}

        def tonight(history: np.ndarray) -> list[int]:
            weak = state["weak"]
            found, state["weak"] = compute_change_points(
                [float(v) for v in history], window_len=window_len, max_pvalue=max_pvalue,
                min_magnitude=min_magnitude, new_data=1 if weak is not None else None, old_weak_cp=weak)
            seen: set[int] = state["seen"]  # type: ignore[assignment]
            new = [int(cp.index) for cp in found if int(cp.index) not in seen]
            seen.update(new)
            return new

        return tonight

    return factory


# The oracle tests the mean of the newest k points, for each k in ORACLE_K, against the true level before them.
ORACLE_K = (2, 3, 4)


def oracle_threshold(false_per_night: float = 1e-3, nights: int = 2_000_000) -> float:
    """The |z| at which the oracle raises ``false_per_night`` alerts on a series that never changes.

    An alert is the first night of a run of nights with any |z_k| above the threshold (the night after, the same
    extreme point is still in the newest k, and raising it again would be a duplicate, not news). Found on simulated
    standard normal noise (fixed seed, so every run of the bench uses the same threshold).
    """
    z = np.random.default_rng(0).standard_normal(nights)
    sums = np.concatenate([[0.0], np.cumsum(z)])
    worst = np.zeros(nights)
    for k in ORACLE_K:
        means = np.full(nights, 0.0)
        means[k - 1 :] = (sums[k:] - sums[:-k]) / math.sqrt(k)
        worst = np.maximum(worst, np.abs(means))
    low, high = 2.0, 6.0
    for _ in range(40):
        mid = (low + high) / 2
        alarm = worst > mid
        rate = float(np.mean(alarm[1:] & ~alarm[:-1]))
        low, high = (mid, high) if rate > false_per_night else (low, mid)
    return high


def oracle_method(threshold: float) -> Factory:
    """The best a method could do with what no real one knows: the true level, the noise's sigma and which nights
    are spikes (skipped). It raises a z-test on the mean of the newest 2, 3 or 4 other nights against the true level
    before them, at a threshold set for one false alert per 1,000 nights: a reference for how close perfdash comes
    to the possible, not a method (it also alerts on 3 % steps, which the bench does not count as false)."""

    def factory(series: Series) -> Method:
        logs, truth, sigma = np.log(series.values), np.log(series.level), series.noise
        state = {"alarm": False, "raised": 0}

        def tonight(history: np.ndarray) -> list[int]:
            nights = [i for i in range(len(history) - 1, -1, -1) if i not in series.spikes][: max(ORACLE_K)]
            start = None
            for k in ORACLE_K:
                if len(nights) >= k:
                    newest = nights[:k]
                    z = (logs[newest].mean() - truth[newest[-1] - 1]) / (sigma / math.sqrt(k))
                    if abs(z) > threshold:
                        start = newest[-1]
            # One alert per run of alarming nights (the same extreme night stays among the newest k for a while),
            # unless the level really moved since the last one.
            night = len(history) - 1
            moved = bool(np.any(np.diff(truth[state["raised"] : night + 1])))
            raised = start is not None and (not state["alarm"] or moved)
            state["alarm"] = start is not None
            if raised:
                state["raised"] = night
            return [start] if raised else []

        return tonight

    return factory


def fixed_threshold_method(threshold: float = 0.10) -> Factory:
    def factory(series: Series) -> Method:
        def tonight(history: np.ndarray) -> list[int]:
            return [len(history) - 1] if abs(history[-1] / history[-2] - 1.0) >= threshold else []

        return tonight

    return factory


def zscore_method(z: float = 5.0, lookback: int = 100) -> Factory:
    def factory(series: Series) -> Method:
        def tonight(history: np.ndarray) -> list[int]:
            past = history[-lookback - 1 : -1]
            sd = past.std(ddof=1)
            return [len(history) - 1] if sd > 0 and abs(history[-1] - past.mean()) / sd >= z else []

        return tonight

    return factory


def score(series_list: Sequence[Series], factory: Factory) -> Score:
    result = Score()
    for series in series_list:
        method = factory(series)
        matched: set[int] = set()
        for step in series.steps:
            result.total[step] = result.total.get(step, 0) + 1
        for night in range(WARMUP, len(series.values)):
            result.nights += 1
            for start in method(series.values[: night + 1]):
                change = next((i for i, c in enumerate(series.changes)
                               if c <= night < c + MATCH_NIGHTS
                               and (i + 1 == len(series.changes) or night < series.changes[i + 1])), None)
                if change is None:
                    result.false_alerts += 1
                    if start in series.spikes or start + 1 in series.spikes:
                        result.spike_alerts += 1
                    if any(abs(start - c) <= 2 for c in series.changes):
                        result.late_alerts += 1
                elif change in matched:
                    result.duplicates += 1
                else:
                    matched.add(change)
                    step = series.steps[change]
                    result.found.setdefault(step, []).append(night - series.changes[change])
    return result


def build_corpus(rng: np.random.Generator, per_kind: int, nights: int, noise: float) -> list[Series]:
    corpus = [make_series(rng, nights, noise, ()) for _ in range(per_kind)]
    for step in STEP_SIZES:
        corpus += [make_series(rng, nights, noise, (step,)) for _ in range(per_kind)]
    multi = (0.05, 0.10, 0.30)
    corpus += [make_series(rng, nights, noise, tuple(rng.choice(multi, size=3))) for _ in range(per_kind)]
    return corpus


def _recall_cell(s: Score, step: float, within: int) -> str:
    delays = s.found.get(step, [])
    total = s.total.get(step, 0)
    if not total:
        return "-"
    in_time = sum(d <= within for d in delays)
    median = f"{statistics.median(delays):.0f}" if delays else "-"
    return f"{100 * in_time / total:5.1f}/{100 * len(delays) / total:5.1f} d{median}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, help="series per kind (flat, each step size, multi-change): 100; "
                                                    "with --alerts, series per configuration: 500")
    parser.add_argument("--nights", type=int, help="nights per series: 90; with --alerts 365")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--sweep", action="store_true",
                        help="also perfdash at other p-value thresholds (recall against false alerts)")
    parser.add_argument("--no-otava", action="store_true", help="leave out the Apache Otava baseline row")
    parser.add_argument("--alerts", action="store_true",
                        help="the notification-level bench (bench/alerts.py) instead of the series-level one")
    parser.add_argument("--configurations", type=int, default=1, help="with --alerts: configurations per noise model")
    parser.add_argument("--noise", action="append",
                        choices=("gauss", "t3", "outliers", "common", "t3_measured", "common_night"),
                        help="with --alerts: only these noise models (repeatable; default all six, bench/alerts.py)")
    parser.add_argument("--ab-noise-scale", type=float, default=1.0,
                        help="with --alerts: multiply the measured A/B noise (bench/data/ab_noise.json) by this")
    parser.add_argument("--noise-file", type=Path, default=AB_NOISE,
                        help="with --alerts: the measured A/B noise (bench/ab_noise.py's output; default the quiet "
                             "machine's bench/data/ab_noise.json, bench/data/ab_noise_busy.json the loaded one's)")
    parser.add_argument("--confirm-margin", type=int,
                        help="with --alerts: nights the A/B's range is widened each way (default the service's)")
    args = parser.parse_args()
    if args.alerts:
        from bench.alerts import NOISE_MODELS, run
        from service.alerts.confirmation import CONFIRM_MARGIN

        margin = CONFIRM_MARGIN if args.confirm_margin is None else args.confirm_margin
        return run(args.series or 500, args.nights or 365, args.configurations, args.seed,
                   args.noise or NOISE_MODELS, margin, args.ab_noise_scale, args.noise_file)
    args.series, args.nights = args.series or 100, args.nights or 90

    methods = {
        "perfdash E-div + t-test": perfdash_method(),
        "fixed 10% vs ref. run": fixed_threshold_method(),
        "z>=5, 100-pt lookback": zscore_method(),
    }
    if not args.no_otava:
        try:
            import otava.analysis  # noqa: F401 (only whether it is there)
        except ImportError:
            print("Apache Otava row left out: `pip install --no-deps --target ~/.cache/perfdash/otava "
                  "apache-otava==0.8.0` and PYTHONPATH=~/.cache/perfdash/otava (its numpy pin would downgrade the "
                  "venv's numpy), or --no-otava")
        else:
            methods["Apache Otava 0.8.0"] = otava_method()
    oracle_z = oracle_threshold()
    if args.sweep:
        default = DetectionConfig()
        for factor in (0.25, 0.5, 2.0, 4.0):
            methods[f"perfdash p x{factor:g}"] = perfdash_method(
                p_value_max=factor * default.p_value_max,
                p_value_three_points=factor * default.p_value_three_points,
                p_value_two_points=factor * default.p_value_two_points)
    print(f"{args.series} series per kind x 6 kinds x {len(NOISE_LEVELS)} noise levels, {args.nights} nights each; "
          f"alerts matched to a change within {MATCH_NIGHTS} nights")
    print("step cells: % found within 3 nights / % found within the match window, d = median delay (nights)")
    for noise in NOISE_LEVELS:
        corpus = build_corpus(np.random.default_rng([args.seed, round(noise * 1000)]), args.series, args.nights, noise)
        spikes = sum(len(s.spikes) for s in corpus)
        print(f"\n== noise CV {100 * noise:.0f}% ({len(corpus)} series, {spikes} single-night spikes) ==")
        header = f"{'method':26}" + "".join(f"{f'step {100 * s:.0f}%':>15}" for s in STEP_SIZES)
        header += f" {'false/1k':>8} {'late/1k':>7} {'dup/1k':>6} {'spike':>5}"
        print(header)
        seconds = []
        for name, factory in [*methods.items(), ("oracle (known level, sd)", oracle_method(oracle_z))]:
            started = time.perf_counter()
            s = score(corpus, factory)
            seconds.append(f"{time.perf_counter() - started:.0f}")
            cells = "".join(f"{_recall_cell(s, step, 3):>15}" for step in STEP_SIZES)
            per_k, late_k, dup_k = (1000 * n / s.nights for n in (s.false_alerts, s.late_alerts, s.duplicates))
            print(f"{name:26}{cells} {per_k:8.2f} {late_k:7.2f} {dup_k:6.2f} {s.spike_alerts:5d}")
        print(f"   wall seconds per method, in order: {', '.join(seconds)}")
        print(f"   series-nights scored per method: {s.nights}; oracle: |z| > {oracle_z:.2f} on the mean of the newest "
              f"{'/'.join(map(str, ORACLE_K))} nights\n   (one false alert per 1,000 nights of pure noise)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# Last printed (2026-11-23 17:21 UTC, `nice .venv/bin/python -m bench.detection --series 100`, 2-core machine shared
# with another engineer's jobs; `uptime` load average after the run: 0.86, 1.01, 1.13):
#
# 100 series per kind x 6 kinds x 2 noise levels, 90 nights each; alerts matched to a change within 10 nights
# step cells: % found within 3 nights / % found within the match window, d = median delay (nights)
#
# == noise CV 2% (600 series, 928 single-night spikes) ==
# method                            step 3%        step 5%       step 10%       step 30% false/1k late/1k dup/1k spike
# perfdash E-div + t-test     37.0/ 60.0 d3  85.1/ 96.4 d2  99.0/100.0 d1 100.0/100.0 d1     0.90    0.17   0.06     0
# fixed 10% vs ref. run        9.0/ 23.0 d4  11.8/ 24.1 d4  58.7/ 61.7 d0  98.5/ 98.5 d0    29.33    1.17   3.42   715
# z>=5, 100-pt lookback        6.0/ 15.0 d6   3.1/ 11.3 d5  24.9/ 28.9 d0  58.8/ 59.3 d0     9.17    0.48   1.71   436
# oracle (known level, sd)    40.0/ 42.0 d2  92.3/ 92.8 d1 100.0/100.0 d0 100.0/100.0 d0     0.85    0.00   0.15     1
#    wall seconds per method, in order: 28, 0, 1, 1
#    series-nights scored per method: 48000; oracle: |z| > 3.46 on the mean of the newest 2/3/4 nights
#    (one false alert per 1,000 nights of pure noise)
#
# == noise CV 5% (600 series, 873 single-night spikes) ==
# method                            step 3%        step 5%       step 10%       step 30% false/1k late/1k dup/1k spike
# perfdash E-div + t-test      2.0/  6.0 d8   3.6/ 15.5 d5  28.6/ 74.8 d4  98.5/100.0 d2     1.88    1.00   0.00     0
# fixed 10% vs ref. run       55.0/ 79.0 d2  61.9/ 85.6 d2  68.0/ 89.3 d0  99.5/ 99.5 d0   152.38    5.29  19.44   738
# z>=5, 100-pt lookback        2.0/  7.0 d6   3.1/  5.7 d3   2.9/  7.8 d4  43.5/ 44.5 d0     6.46    0.17   0.38   309
# oracle (known level, sd)     3.0/  4.0 d2  11.9/ 12.9 d2  70.4/ 71.4 d2 100.0/100.0 d0     0.96    0.02   0.08     0
#    wall seconds per method, in order: 30, 0, 1, 1
#    series-nights scored per method: 48000; oracle: |z| > 3.46 on the mean of the newest 2/3/4 nights
#    (one false alert per 1,000 nights of pure noise)
#
# A second seed (`... --series 100 --seed 7`, 17:17 UTC, load 1.28, 1.15, 1.20), perfdash and oracle rows:
#
# == noise CV 2% (600 series, 935 single-night spikes) ==
# perfdash E-div + t-test     33.0/ 63.0 d3  84.8/ 99.5 d2  99.0/100.0 d1 100.0/100.0 d1     0.83    0.10   0.02     0
# oracle (known level, sd)    44.0/ 44.0 d2  93.6/ 95.1 d1 100.0/100.0 d0 100.0/100.0 d0     0.92    0.00   0.04     1
# == noise CV 5% (600 series, 859 single-night spikes) ==
# perfdash E-div + t-test      0.0/  2.0 d7   4.0/ 10.9 d5  39.3/ 78.6 d4  99.5/100.0 d2     1.58    0.73   0.04     1
# oracle (known level, sd)     2.0/  2.0 d2  11.9/ 11.9 d2  74.0/ 74.5 d2 100.0/100.0 d0     0.85    0.02   0.21     0
#
# The trade-off (`... --series 50 --sweep`, 17:18 UTC, load 1.10, 1.15, 1.18; "p xF": all three p-value thresholds
# times F), perfdash and oracle rows:
#
# == noise CV 2% (300 series, 478 single-night spikes) ==
# perfdash E-div + t-test     32.0/ 66.0 d4  87.9/100.0 d2 100.0/100.0 d1 100.0/100.0 d1     0.79    0.08   0.00     0
# perfdash p x0.25            22.0/ 50.0 d4  74.7/ 99.0 d3 100.0/100.0 d1 100.0/100.0 d1     0.46    0.12   0.04     0
# perfdash p x0.5             22.0/ 52.0 d4  79.8/100.0 d3 100.0/100.0 d1 100.0/100.0 d1     0.62    0.08   0.04     0
# perfdash p x2               36.0/ 70.0 d3  90.9/100.0 d2 100.0/100.0 d1 100.0/100.0 d1     1.17    0.04   0.00     0
# perfdash p x4               38.0/ 70.0 d3  91.9/ 99.0 d2 100.0/100.0 d1 100.0/100.0 d1     1.67    0.00   0.00     0
# oracle (known level, sd)    30.0/ 30.0 d2  93.9/ 96.0 d1 100.0/100.0 d0 100.0/100.0 d0     0.96    0.00   0.21     1
# == noise CV 5% (300 series, 455 single-night spikes) ==
# perfdash E-div + t-test      0.0/  0.0 d-   5.6/ 15.0 d4  35.7/ 82.7 d4  98.9/100.0 d2     1.83    0.38   0.04     1
# perfdash p x0.25             0.0/  0.0 d-   5.6/ 12.1 d4  22.4/ 70.4 d4 100.0/100.0 d2     1.62    0.71   0.00     1
# perfdash p x0.5              0.0/  0.0 d-   5.6/ 15.0 d4  27.6/ 76.5 d4 100.0/100.0 d2     1.67    0.58   0.04     1
# perfdash p x2                0.0/  0.0 d-   6.5/ 17.8 d5  39.8/ 82.7 d4  98.9/100.0 d2     1.92    0.38   0.08     1
# perfdash p x4                2.0/  6.0 d5   9.3/ 21.5 d4  43.9/ 82.7 d3  98.9/100.0 d2     2.54    0.46   0.04     1
# oracle (known level, sd)     4.0/  4.0 d1  10.3/ 11.2 d2  71.4/ 71.4 d2 100.0/100.0 d0     0.71    0.04   0.12     0
#
# Against issue 5's targets (seed 20261122 / seed 7):
# - >= 95 % of 5 % steps found within 3 nights at 2 % noise: missed, 85.1 % / 84.8 % (the method before this one:
#   80.5 %). Not reachable at <= 1 false alert per 1,000 nights: the oracle, which knows the true level, the noise's
#   sigma and which nights are spikes, finds 92.3 % / 93.6 %, and 93.8 % / 95.1 % when it spends its whole budget on
#   the fourth night (ORACLE_K = (4,), threshold 3.23). The distance to it is the cost of estimating the baseline and
#   the noise from the series and of the spike guards. Looser thresholds buy recall with false alerts (the sweep, 50
#   series per kind: default 87.9 % at 0.79/1k, x2 90.9 % at 1.17/1k, x4 91.9 % at 1.67/1k); the default keeps false
#   alerts under one per 1,000, which the morning report needs more.
# - <= 1 false alert per 1,000 series-nights: met at 2 % noise (0.90 / 0.83). Missed at 5 % noise (1.88 / 1.58, the
#   method before: 4.46), but 1.00 / 0.73 of it is "late": real changes, split within two nights of where they
#   landed, reported after the 10-night match window (under 5 % noise a 5 % step is one sigma and takes weeks to
#   stand out); the rest, 0.88 / 0.85, is under the target. Stricter thresholds do not bring the count down (sweep
#   x0.25: 1.62/1k): the changes are found later still, and are late alerts all the same.
# - single spikes never alert: none at 2 % noise; at 5 % noise none / one, and that one is a real 3 % step found late,
#   whose split the bench places the night before a spike (it is counted under late too).
#
# Before this (2026-11-22, the method before the one above, same command): 2 % noise, 5 % steps within 3 nights
# 80.5 %, false 1.38/1k; 5 % noise, false 4.46/1k.


# ---------------------------------------------------------------------------------------------------------------------
# Alerts people act on (issue 16): `nice -n 5 .venv/bin/python -m bench.detection --alerts` (bench/alerts.py), 500
# series per configuration over 365 nights, one configuration per noise model, 2026-11-24 01:41-01:56 UTC. The printed
# table (170 columns) is in bench/README.md, "Alerts: notification level"; the lines that answer the targets:
#
# noise     method     5% <=3n 5% <=5n 10% <=3n false/1k | false issues/cfg-month  5% issued <=5n  env shifts
# gauss     perfdash      94.7    96.5    100.0     0.84 |   0.00 (7.32 unconfirmed)         94.7
# gauss     fixed 10%      3.5     3.5     41.4     0.56 |   1.41                             3.5
# gauss     z>=5           1.8     1.8     55.2     0.00 |   0.88                             0.0
# t3        perfdash      92.8   100.0    100.0     1.37 |   0.00 (10.23)                    95.7
# outliers  perfdash      75.0    85.7     94.4     4.09 |   0.00 (49.94)                    75.0
# outliers  fixed 10%     16.1    21.4     44.4    36.47 | 235.38                             5.4
# outliers  z>=5           8.9     8.9     22.2     2.04 |  31.67                             0.0
# common    perfdash      83.6    85.2     96.9     0.95 |   0.00 (7.50)                     80.3  4/4, 0 issues after
# common    fixed 10%      6.6     6.6     50.0     1.46 |   6.09                             4.9  0/4, 52 issues after
# common    z>=5           0.0     0.0     31.2     0.45 |   3.18                             0.0  0/4, 33 issues after
#
# Targets: <= 1 false issue per configuration-month in every noise model: met (0 in 45 configuration-months);
# >= 90 % of 5 % steps issued within 5 nights at 2 % Gaussian noise: met (94.7 %); >= 65 % with outliers: met
# (75.0 %); every environment shift one finding with no per-model issue: met (4/4, 0). See bench/README.md for the
# cost (A/B re-measurements a year) and the one-night-margin run that missed the 90 %. Second seed (`--seed 7`, also
# there): 0 false issues in all four; 5 % steps issued within 5 nights 96.2 % Gaussian, 75.0 % outliers.
