"""Noise-change findings (issue 39 item 4) on simulated nightly series: how often a spread change is filed where there
is none, and how soon a planted one is.

The series are bench/alerts.py's configurations (``make_configuration``: speedup-like series at a 2 % between-run
noise, one of its noise models ``gauss``, ``t3``, ``outliers``, ``common``, 12 % of the series with a 5 % step and 6 %
with a 10 % step, and in ``common`` four environment shifts a year on nights whose manifest changed). On top, in a
share of the series without a step, a spread change lands on a random night (``PLANTED``):

- ``jump x3`` / ``x5`` / ``x10``: the between-run noise multiplied (2 % -> 6 % / 10 % / 20 %), the median unchanged;
- ``alternating``: the runs alternate between two levels 20 % apart (the old median between them);
- ``bimodal``: each run on one of the two levels at random (two nights in a row on one level are common: the
  change-point rule reads some as steps, and its findings start the noise rule's comparison again);
- ``slow 30 %``: 30 % of the runs, at random, 20 % slower (one-sided: the median holds, the mass is one side).

Each series is replayed night by night as the service runs it: the change-point detector incrementally
(service.detection.changepoint, every change point it finds is the series' new baseline), an environment shift's night
starts both the change points' baseline and the noise comparison again (the manifest changed), and then the noise rule
(service.detection.spread.newest_spread_change over the runs since the last shift, its last noise finding's newest
runs and its last change point whose level held, ``level_start``, as service.detection.detector.noise_changes picks
them; at most HISTORY runs). Scored:

- false noise findings per 1,000 series-nights, on the series with no planted spread change, and of them those within
  ``MATCH_NIGHTS`` nights after a planted step or a shift (the level shifts the rule must not read as a spread);
- per planted kind: % found within ``MATCH_NIGHTS`` nights of landing, % found at all, the median delay (nights), and
  the extra findings on the same series after the first (each change should be one finding).

Run from the repository root: ``python -m bench.noise_change [--series N] [--nights N] [--seed S]``.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from bench.alerts import MEASURED_MODELS, NOISE, NOISE_MODELS, WARMUP, make_configuration
from service.detection.changepoint import DetectionConfig, detect_change_points
from service.detection.spread import HISTORY, NEWEST_RUNS, level_start, newest_spread_change

MATCH_NIGHTS = 10
PLANTED = ("jump x3", "jump x5", "jump x10", "alternating", "bimodal", "slow 30 %")
PLANTED_SHARE = 0.05  # of the series, per planted kind


@dataclass
class Tally:
    null_nights: int = 0
    false: int = 0
    false_near_level: int = 0  # within MATCH_NIGHTS after a planted step or an environment shift
    planted: dict[str, list[int | None]] = field(default_factory=dict)  # kind -> delay of the first finding, or None
    extra: dict[str, int] = field(default_factory=dict)  # kind -> findings after the first
    seconds: float = 0.0


def plant(rng: np.random.Generator, values: np.ndarray, kind: str, night: int, shifts: list[int]) -> None:
    """Turn ``values`` (one series without a step, 2 % noise around a level that moves only on the environment
    shifts' nights) into a spread change of ``kind`` from ``night`` on, in place: each night's deviation from its
    level is what changes, the level stays."""
    bounds = [0, *sorted(shifts), len(values)]
    level = np.empty(len(values))
    for a, b in itertools.pairwise(bounds):
        if b > a:
            level[a:b] = np.median(values[a:b])
    n = len(values) - night
    noise = np.log(values[night:] / level[night:])
    if kind.startswith("jump"):
        factor = np.exp(noise * (float(kind.split("x")[1]) - 1.0))
    elif kind == "alternating":
        factor = np.where(np.arange(n) % 2 == 0, 0.9, 1.1)
    elif kind == "bimodal":
        factor = rng.choice((0.9, 1.1), n)
    elif kind == "slow 30 %":
        factor = np.where(rng.random(n) < 0.3, 0.8, 1.0)
    else:
        raise ValueError(kind)
    values[night:] *= factor


def replay(values: np.ndarray, shifts: set[int], detection: DetectionConfig) -> list[int]:
    """The nights the noise rule files a finding on this series, replayed night by night."""
    baseline, noise_start, found, change_points = 0, 0, [], []
    for night in range(WARMUP, len(values)):
        if night in shifts:
            baseline = noise_start = night
        start = max(baseline, night + 1 - detection.window)
        for cp in detect_change_points(values[: night + 1], baseline_start=start, config=detection):
            baseline = max(baseline, cp.index)
            change_points.append(cp.index)
        # as the service: the hard bounds (shift, last noise finding, the runs read), then the change points whose
        # level held
        first = max(noise_start, night + 1 - HISTORY)
        first = level_start(values[: night + 1], change_points, first, detection.min_effect)
        if newest_spread_change(values[first: night + 1], detection.min_effect) is not None:
            found.append(night)
            noise_start = night + 1 - NEWEST_RUNS  # a reported spread is the level the next is judged against
    return found


def run(series: int, nights: int, seed: int, noise_models: tuple[str, ...]) -> None:
    detection = DetectionConfig(min_effect=0.05)
    measured = sorted(set(noise_models) & set(MEASURED_MODELS))
    scale = f"{NOISE:.0%} noise scale" + (f", {' and '.join(measured)} at bench/data/ab_noise.json's measured robust "
                                          f"CVs" if measured else "")
    print(f"noise-change findings: a series' between-run spread that changes while its median holds; {series} series "
          f"x {nights} nights per noise model ({scale}; bench/alerts.py's planted 5 %/10 % steps and "
          f"environment shifts); {PLANTED_SHARE:.0%} of the series per planted spread change (median held), landing "
          f"after night {WARMUP + 30}")
    print(f"false/1k: noise findings per 1,000 series-nights where no spread change was planted (near step/shift: of "
          f"them, within {MATCH_NIGHTS} nights after a level step or shift); per planted kind: % found within "
          f"{MATCH_NIGHTS} nights / at all, d = median delay (nights); extra: findings after the first on a planted "
          f"series")
    header = f"{'noise':9} {'false/1k':>8} {'near step/shift':>15} |" + "".join(f" {k:>19}" for k in PLANTED)
    print(header + "  extra  seconds")
    for model in noise_models:
        rng = np.random.default_rng([seed, NOISE_MODELS.index(model)])
        config = make_configuration(rng, series, nights, model)
        tally = Tally(planted={k: [] for k in PLANTED}, extra=dict.fromkeys(PLANTED, 0))
        free = [s for s in range(series) if s not in config.steps]
        chosen = rng.permutation(free)
        per_kind = max(1, round(PLANTED_SHARE * series))
        planted: dict[int, tuple[str, int]] = {}
        for i, kind in enumerate(PLANTED):
            for s in chosen[i * per_kind: (i + 1) * per_kind]:
                night = int(rng.integers(WARMUP + 30, nights - 2 * MATCH_NIGHTS))
                plant(rng, config.values[s], kind, night, config.shift_nights)
                planted[int(s)] = (kind, night)
        shifts = set(config.shift_nights)
        started = time.perf_counter()
        for s in range(series):
            found = replay(config.values[s], shifts, detection)
            if s in planted:
                kind, landed = planted[s]
                after = [n for n in found if n >= landed]
                tally.planted[kind].append(after[0] - landed if after else None)
                tally.extra[kind] += max(0, len(after) - 1)
                continue
            tally.null_nights += nights - WARMUP
            tally.false += len(found)
            step = config.steps.get(s)
            near = ([step[0]] if step else []) + sorted(shifts)
            tally.false_near_level += sum(any(0 <= n - c < MATCH_NIGHTS for c in near) for n in found)
        tally.seconds = time.perf_counter() - started
        cells = ""
        for kind in PLANTED:
            delays = tally.planted[kind]
            hit = [d for d in delays if d is not None]
            median = f"{statistics.median(hit):.0f}" if hit else "-"
            soon = 100 * sum(d <= MATCH_NIGHTS for d in hit) / len(delays)
            cells += f" {soon:5.1f}/{100 * len(hit) / len(delays):5.1f} d{median:>2}{'':>3}"
        per_k = 1000 * tally.false / tally.null_nights
        near_k = 1000 * tally.false_near_level / tally.null_nights
        print(f"{model:9} {per_k:8.2f} {near_k:15.2f} |{cells}  {sum(tally.extra.values()):5d}  {tally.seconds:7.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])  # the first paragraph, whole
    parser.add_argument("--series", type=int, default=300, help="series per noise model (default 300)")
    parser.add_argument("--nights", type=int, default=200, help="nights per series (default 200)")
    parser.add_argument("--seed", type=int, default=20261128)
    parser.add_argument("--noise", action="append", choices=NOISE_MODELS, help="only these noise models (repeatable)")
    args = parser.parse_args()
    run(args.series, args.nights, args.seed, tuple(args.noise or NOISE_MODELS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
