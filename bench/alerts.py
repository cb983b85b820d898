"""Alerts people act on: the whole chain from a configuration's nightly series to GitHub issues, simulated.

One *configuration* is ``--series`` series (default 500: 150 models x 3-4 metrics) over ``--nights`` nights (default
a year). Each series is a speedup-like metric (higher is better), one value a night, with one of six noise models,
the first four at a 2 % scale, the last two at the between-run noise bench/ab_noise.py measured (``--noise-file``):

- ``gauss``: Gaussian 2 % (in log space, i.e. multiplicative);
- ``t3``: Student-t with 3 degrees of freedom, scaled so that its standard deviation is 2 % (heavy tails: a 3-sigma
  night is about four times as common as under the Gaussian);
- ``outliers``: Gaussian 2 %, and 5 % of nights slowed by 3-6 sigma (one-sided: the direction of a regression);
- ``common``: Gaussian 2 %, and ``SHIFTS_PER_YEAR`` environment changes: the whole configuration moves 3-10 % (either
  way) on one night, and that night's manifest differs from the night before (a new driver, kernel, ...);
- ``t3_measured``: Student-t with 3 degrees of freedom, each series at the measured between-run noise of one of the
  measured models in turn (its robust CV of speedup: 3.7, 1.7 and 6.3 % on the quiet machine), the t's robust CV
  (1.4826 MAD) set to it; its standard deviation is then 5.7, 2.6 and 9.7 % (measured: 6.2, 4.6 and 8.1 %);
- ``common_night``: common-mode noise: a factor shared by every series of the configuration (one machine) on each
  night, times each series' own Gaussian noise, together at the measured models' robust CVs in turn, half the
  variance shared (``COMMON_SHARE``; the measured models share none of their speedup's between-run variance and 8 %
  of their latency's, ``AbNoise.shared_share``: a stress, not the measured case).

Real regressions are planted in some series (``STEP_SHARE``: 5 % and 10 % slowdowns, one per series at most) and
land on a random night; the torch build of every night is known, so each night has a true level per series.

Each method is replayed night by night as production runs it. perfdash: the change-point detector
(service.detection.changepoint, incremental as the post-ingest hook runs it), the environment check
(service.detection.environment, on nights whose manifest changed: one finding, every series' baseline reset), and the
confirmation: every regression change point is a candidate whose last good and first bad builds are re-measured side
by side by perfbisect's own confirm step (``Bisector.confirm``: the sequential paired A/B of perfdash/ab.py with
the bisect job's defaults, from 6 pairs to at most 160, alpha 0.01, and the threshold a confirm request carries,
service.alerts.bisections.CONFIRM_THRESHOLD_SHARE of the 5 % minimum effect). The A/B samples are the true level of
each build times the *measured* A/B noise of this machine: draws from the speedup's run-to-run log deviations of
bench/ab_noise.py's A/A runs of the harness (bench/data/ab_noise.json; ``AbNoise.residuals``), not a within-run
figure. ``--ab-noise-scale`` multiplies them (what a quieter machine would see). The issue is
counted one night after the change point was found (the confirm job runs during the day after the nightly). As in the
service, the A/B's builds are the change point's last good and first bad widened by CONFIRM_MARGIN (2) nights each way:
an issue is false when the true levels of those two builds are equal.

Scored, per noise model:

- series level (every change point, either direction): share of the 5 % steps found within 3 and within 5 nights of
  landing, of the 10 % steps within 3 nights, and false alerts per 1,000 series-nights (an alert not within
  ``MATCH_NIGHTS`` after a real step);
- notification level: false GitHub issues per configuration per month (an issue whose good and bad builds have the
  same true level), the share of real 5 % regressions issued within 5 nights of landing (10 % too), environment
  shifts reported as one finding, and per-model issues filed on the nights after a shift.

The baselines (fixed 10 % against the previous night; z >= 5 over a 100-night lookback) file an issue for every
regression-direction alert, as their users do; an issue of theirs is false by the same rule.

Run from the repository root: ``python -m bench.detection --alerts [--series N] [--nights N] [--configurations N]``.

``python -m bench.alerts --series-noise [--series N] [--nights N] [--noise MODEL ...]`` (issue 39 item 2): each
confirm request also carries its series' own noise as the service sends it (the robust CV of the series' newest
``NOISE_WINDOW`` nights before the change point, service.queries.noise), which perfbisect pools into its A/B
(perfdash.ab.NoisePrior). Here the nightly noise (2 %) is quieter than the measured A/B noise, the case where the
A/B's own pairs must overrule the prior.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from perfbisect.procedure import Bisector
from perfbisect.state import BisectState
from perfbisect.stats import Policy

from bench.ab_noise import OUTPUT as AB_NOISE
from bench.ab_noise import ROOT, AbNoise, load_noise
from perfdash.noise import MIN_RUNS, robust_cv
from service.alerts.bisections import CONFIRM_THRESHOLD_SHARE
from service.alerts.confirmation import CONFIRM_MARGIN
from service.detection.changepoint import DetectionConfig, detect_change_points
from service.detection.environment import ShiftConfig, common_shift, series_move
from service.queries.noise import NOISE_WINDOW

NOISE = 0.02
# the measured-scale models last: a model's random stream is its index here (the rows printed before stay)
NOISE_MODELS = ("gauss", "t3", "outliers", "common", "t3_measured", "common_night")
MEASURED_MODELS = ("t3_measured", "common_night")
COMMON_SHARE = 0.5  # common_night: the share of a series' between-run variance shared by the whole configuration
T3_ROBUST_CV = 1.4826 * 0.7648923284609972  # a unit Student-t(3)'s 1.4826 MAD (its median |t| is t.ppf(0.75, 3))
OUTLIER_RATE = 0.05
SHIFTS_PER_YEAR = 4
STEP_SHARE = {0.05: 0.12, 0.10: 0.06}  # share of series with one planted regression of that size
WARMUP = 20  # nights of history before any method may alert
MATCH_NIGHTS = 10
CONFIRM_DELAY = 1  # nights from the change point to the issue (the confirm job runs the day after)
NIGHTS_PER_MONTH = 365.25 / 12


@dataclass
class Configuration:
    values: np.ndarray  # (series, nights)
    torch_level: np.ndarray  # (series, nights): the true level of each night's torch build
    steps: dict[int, tuple[int, float]]  # series -> (landing night, size)
    shift_nights: list[int]  # environment changes (manifest differs from the night before)


def make_configuration(rng: np.random.Generator, series: int, nights: int, noise_model: str,
                       measured: AbNoise | None = None) -> Configuration:
    """``measured``: the between-run noise of the measured-scale models (default the quiet machine's file)."""
    torch_level = np.ones((series, nights))
    steps: dict[int, tuple[int, float]] = {}
    draw = rng.random(series)
    edge = 0.0
    for size, share in STEP_SHARE.items():
        for s in np.flatnonzero((draw >= edge) & (draw < edge + share)):
            night = int(rng.integers(WARMUP + 15, nights - MATCH_NIGHTS))
            torch_level[s, night:] *= 1.0 - size
            steps[int(s)] = (night, size)
        edge += share
    if noise_model in MEASURED_MODELS:
        cvs = np.asarray((measured or load_noise()).robust_cvs("speedup"))
        scale = cvs[np.arange(series) % len(cvs)][:, None]  # each series at one measured model's noise, in turn
    if noise_model == "t3":
        noise = rng.standard_t(3, size=(series, nights)) * NOISE / math.sqrt(3.0)
    elif noise_model == "t3_measured":
        noise = rng.standard_t(3, size=(series, nights)) * scale / T3_ROBUST_CV
    elif noise_model == "common_night":
        shared = rng.normal(0.0, 1.0, size=(1, nights)) * math.sqrt(COMMON_SHARE)
        noise = scale * (shared + rng.normal(0.0, 1.0, size=(series, nights)) * math.sqrt(1.0 - COMMON_SHARE))
    else:
        noise = rng.normal(0.0, NOISE, size=(series, nights))
    if noise_model == "outliers":
        slowed = rng.random((series, nights)) < OUTLIER_RATE
        noise -= slowed * rng.uniform(3.0, 6.0, size=(series, nights)) * NOISE
    env = np.zeros(nights)
    shift_nights: list[int] = []
    if noise_model == "common":
        count = max(1, round(SHIFTS_PER_YEAR * nights / 365))
        slots = np.arange(WARMUP + 15, nights - MATCH_NIGHTS, 25)
        shift_nights = sorted(int(n) for n in rng.choice(slots, size=min(count, len(slots)), replace=False))
        for night in shift_nights:
            env[night:] += rng.choice((-1.0, 1.0)) * math.log1p(rng.uniform(0.03, 0.10))
    base = rng.uniform(0.8, 3.0, size=(series, 1))
    values = base * torch_level * np.exp(noise + env[None, :])
    return Configuration(values=values, torch_level=torch_level, steps=steps, shift_nights=shift_nights)


@dataclass
class Alert:
    series: int
    night: int  # the night it was raised
    start: int  # first night of the new level (the first bad build)
    regression: bool
    margin: int = 0  # nights the re-measured range reaches beyond the split on either side


@dataclass
class AlertTally:
    alerts: list[Alert] = field(default_factory=list)
    issues: list[Alert] = field(default_factory=list)
    environment_findings: list[int] = field(default_factory=list)  # nights
    confirmations: int = 0
    seconds: float = 0.0


def environment_resets(config: Configuration, shift: ShiftConfig) -> list[int]:
    """The nights detection reports an environment change: manifest changed and most series moved together."""
    found = []
    for night in config.shift_nights:
        moves = [m for m in (series_move(config.values[s, : night + 1], shift) for s in range(len(config.values)))
                 if m is not None]
        if common_shift(moves, shift) is not None:
            found.append(night)
    return found


def confirm_candidate(rng: np.random.Generator, good_level: float, bad_level: float, policy: Policy,
                      ab_noise: np.ndarray) -> bool:
    """perfbisect's confirm step on simulated A/B runs of the two builds, with the measured A/B noise."""

    class Oracle:
        def build(self, sha: str) -> str | None:
            return None

        def measure(self, sha: str, index: int) -> float:
            level = good_level if sha == "good" else bad_level
            return float(level * math.exp(rng.choice(ab_noise)))

    bisector = Bisector(Oracle(), policy, BisectState(identity={}))
    return bool(bisector.confirm("good", "bad").reproduced)


def with_series_noise(policy: Policy, before: np.ndarray) -> Policy:
    """``policy`` with the noise a confirm request carries: the robust CV of the series' nights before the change
    point (the newest NOISE_WINDOW), none with fewer than perfdash.noise.MIN_RUNS."""
    window = before[-NOISE_WINDOW:]
    if len(window) < MIN_RUNS:
        return policy
    return replace(policy, series_cv=robust_cv(window.tolist()), series_runs=len(window))


def perfdash(config: Configuration, rng: np.random.Generator, ab_noise: np.ndarray,
             margin: int = CONFIRM_MARGIN, series_noise: bool = False) -> AlertTally:
    started = time.perf_counter()
    out = AlertTally()
    detection = DetectionConfig(min_effect=0.05)
    out.environment_findings = environment_resets(config, ShiftConfig())
    resets = set(out.environment_findings)
    # what a confirm request of a speedup finding asks for (service.alerts.bisections)
    policy = Policy(direction="higher", threshold_pct=100.0 * detection.min_effect * CONFIRM_THRESHOLD_SHARE)
    series, nights = config.values.shape
    for s in range(series):
        values = config.values[s]
        baseline = 0
        for night in range(WARMUP, nights):
            if night in resets:
                baseline = night
                continue
            start = max(baseline, night + 1 - detection.window)
            for cp in detect_change_points(values[: night + 1], baseline_start=start, config=detection):
                if cp.index <= baseline:
                    continue
                baseline = cp.index
                alert = Alert(s, night, cp.index, cp.change_pct < 0, margin)
                out.alerts.append(alert)
                if alert.regression:
                    out.confirmations += 1
                    level = config.torch_level[s]
                    good, bad = max(0, cp.index - 1 - margin), min(cp.index + margin, night)
                    own = with_series_noise(policy, values[: cp.index]) if series_noise else policy
                    if confirm_candidate(rng, level[good], level[bad], own, ab_noise):
                        out.issues.append(alert)
    out.seconds = time.perf_counter() - started
    return out


def baseline(config: Configuration, rule: Callable[[np.ndarray], float | None]) -> AlertTally:
    """A baseline that alerts on tonight alone; every regression-direction alert is an issue (no confirmation)."""
    started = time.perf_counter()
    out = AlertTally()
    series, nights = config.values.shape
    for s in range(series):
        for night in range(WARMUP, nights):
            change = rule(config.values[s, : night + 1])
            if change is not None:
                alert = Alert(s, night, night, change < 0)
                out.alerts.append(alert)
                if alert.regression:
                    out.issues.append(alert)
    out.seconds = time.perf_counter() - started
    return out


def fixed_rule(history: np.ndarray, threshold: float = 0.10) -> float | None:
    change = history[-1] / history[-2] - 1.0
    return change if abs(change) >= threshold else None


def z_rule(history: np.ndarray, z: float = 5.0, lookback: int = 100) -> float | None:
    past = history[-lookback - 1 : -1]
    sd = past.std(ddof=1)
    change = history[-1] - past.mean()
    return change if sd > 0 and abs(change) / sd >= z else None


@dataclass
class Figures:
    found5_3: float
    found5_5: float
    found10_3: float
    false_per_1k: float
    false_issues_per_month: float
    issued5_5: float
    issued10_5: float
    shifts: int
    shifts_one_finding: int
    issues_after_shifts: int
    false_candidates_per_month: float  # what perfdash would file without the A/B
    worst_night_false: int  # the most false alerts one configuration raised on one night (common-mode noise clusters)


def figures(configs: Sequence[Configuration], outcomes: Sequence[AlertTally]) -> Figures:
    steps = {0.05: 0, 0.10: 0}
    found: dict[float, list[int]] = {0.05: [], 0.10: []}
    issued: dict[float, list[int]] = {0.05: [], 0.10: []}
    false_alerts = false_issues = series_nights = months = candidates = 0.0
    shifts = one_finding = after_shift = worst_night = 0
    for config, out in zip(configs, outcomes, strict=True):
        series, nights = config.values.shape
        series_nights += series * (nights - WARMUP)
        months += (nights - WARMUP) / NIGHTS_PER_MONTH
        for _s, (_night, size) in config.steps.items():
            steps[size] += 1
        matched: set[int] = set()
        false_nights: dict[int, int] = {}
        for alert in out.alerts:
            step = config.steps.get(alert.series)
            if step is not None and step[0] <= alert.night < step[0] + MATCH_NIGHTS:
                if alert.series not in matched:
                    matched.add(alert.series)
                    found[step[1]].append(alert.night - step[0])
            else:
                false_alerts += 1
                false_nights[alert.night] = false_nights.get(alert.night, 0) + 1
        worst_night = max(worst_night, *false_nights.values(), 0)
        issued_series: set[int] = set()
        for issue in out.issues:
            level = config.torch_level[issue.series]
            real = level[min(issue.start + issue.margin, issue.night)] < level[max(0, issue.start - 1 - issue.margin)]
            if not real:
                false_issues += 1
                if any(0 <= issue.start - n <= MATCH_NIGHTS for n in config.shift_nights):
                    after_shift += 1
            elif issue.series not in issued_series:
                issued_series.add(issue.series)
                landing, size = config.steps[issue.series]
                issued[size].append(issue.night + CONFIRM_DELAY - landing)
        candidates += sum(a.regression and not config.torch_level[a.series][min(a.start + a.margin, a.night)]
                          < config.torch_level[a.series][max(0, a.start - 1 - a.margin)] for a in out.alerts)
        shifts += len(config.shift_nights)
        one_finding += sum(n in out.environment_findings for n in config.shift_nights)

    def share(delays: list[int], total: int, within: int) -> float:
        return 100.0 * sum(d <= within for d in delays) / total if total else float("nan")

    return Figures(
        found5_3=share(found[0.05], steps[0.05], 3), found5_5=share(found[0.05], steps[0.05], 5),
        found10_3=share(found[0.10], steps[0.10], 3), false_per_1k=1000.0 * false_alerts / series_nights,
        false_issues_per_month=false_issues / months, issued5_5=share(issued[0.05], steps[0.05], 5),
        issued10_5=share(issued[0.10], steps[0.10], 5), shifts=shifts, shifts_one_finding=one_finding,
        issues_after_shifts=after_shift, false_candidates_per_month=candidates / months,
        worst_night_false=worst_night)


def series_subset(config: Configuration, out: AlertTally, keep: Sequence[int]) -> tuple[Configuration, AlertTally]:
    """The configuration and its alerts restricted to the series ``keep`` (renumbered in that order): the figures of
    one noise scale of a measured-scale model."""
    index = {old: new for new, old in enumerate(keep)}
    rows = list(keep)
    part = Configuration(values=config.values[rows], torch_level=config.torch_level[rows],
                         steps={index[s]: step for s, step in config.steps.items() if s in index},
                         shift_nights=config.shift_nights)
    tally = AlertTally(alerts=[replace(a, series=index[a.series]) for a in out.alerts if a.series in index],
                       issues=[replace(a, series=index[a.series]) for a in out.issues if a.series in index],
                       environment_findings=out.environment_findings, confirmations=out.confirmations,
                       seconds=out.seconds)
    return part, tally


def run(series: int, nights: int, configurations: int, seed: int, noise_models: Sequence[str] = NOISE_MODELS,
        margin: int = CONFIRM_MARGIN, ab_noise_scale: float = 1.0, noise_file: Path = AB_NOISE,
        series_noise: bool = False) -> int:
    measured = load_noise(noise_file)
    ab_noise = measured.residuals("speedup") * ab_noise_scale
    ab_cv = float(np.std(ab_noise, ddof=1))
    print(f"{configurations} configuration(s) x {series} series x {nights} nights per noise model "
          f"({configurations * (nights - WARMUP) / NIGHTS_PER_MONTH:.1f} configuration-months scored after a "
          f"{WARMUP}-night warm-up); planted regressions: "
          + ", ".join(f"{100 * share:.0f}% of series a {100 * size:.0f}% step" for size, share in STEP_SHARE.items())
          + f"; A/B noise: measured ({_shown(noise_file)}, {len(ab_noise)} run-to-run speedup deviations, SD "
            f"{100 * ab_cv:.2f}%, scale {ab_noise_scale:g}), range widened by {margin} night(s) each way, issue "
            f"{CONFIRM_DELAY} night after the change point"
          + ("; confirm requests carry their series' own noise" if series_noise else ""))
    cvs = ", ".join(f"{100 * cv:.1f}%" for cv in measured.robust_cvs("speedup"))
    print(f"measured-scale models: series noise the measured between-run robust CVs of speedup ({cvs}, in turn); "
          f"common_night shares {100 * COMMON_SHARE:.0f}% of the variance (measured: speedup "
          f"{100 * measured.shared_share('speedup'):.0f}%, latency {100 * measured.shared_share('abs_latency'):.0f}%)")
    header = (f"{'noise':12} {'method':24} {'5% <=3n':>8} {'5% <=5n':>8} {'10% <=3n':>8} {'false/1k':>8} | "
              f"{'false issues/cfg-month':>22} {'5% issued <=5n':>14} {'10% issued <=5n':>15} "
              f"{'env shifts: 1 finding':>21} {'issues after shifts':>19}")
    print(header)
    for number, noise_model in enumerate(NOISE_MODELS):
        if noise_model not in noise_models:
            continue
        rng = np.random.default_rng([seed, number])
        configs = [make_configuration(rng, series, nights, noise_model, measured) for _ in range(configurations)]
        rows: dict[str, list[AlertTally]] = {
            "perfdash": [], "fixed 10% vs prev. night": [], "z>=5, 100-pt lookback": []}
        for config in configs:
            rows["perfdash"].append(perfdash(config, rng, ab_noise, margin, series_noise))
            rows["fixed 10% vs prev. night"].append(baseline(config, fixed_rule))
            rows["z>=5, 100-pt lookback"].append(baseline(config, z_rule))
        for name, outcomes in rows.items():
            f = figures(configs, outcomes)
            env = (f"{f.shifts_one_finding}/{f.shifts}" if name == "perfdash" else f"0/{f.shifts}") if f.shifts else "-"
            after = str(f.issues_after_shifts) if f.shifts else "-"
            print(f"{noise_model:12} {name:24} {f.found5_3:8.1f} {f.found5_5:8.1f} {f.found10_3:8.1f} "
                  f"{f.false_per_1k:8.2f} | {f.false_issues_per_month:22.2f} {f.issued5_5:14.1f} {f.issued10_5:15.1f} "
                  f"{env:>21} {after:>19}")
            if name == "perfdash":
                print(f"{'':12} {'  without the A/B':24} {'':35} | {f.false_candidates_per_month:22.2f}   "
                      f"A/B re-measurements: {sum(o.confirmations for o in outcomes)}, "
                      f"{sum(o.seconds for o in outcomes):.0f} s; most false alerts on one night: "
                      f"{f.worst_night_false}")
            if name == "perfdash" and noise_model in MEASURED_MODELS:
                cvs = measured.robust_cvs("speedup")
                parts = []
                for k, cv in enumerate(cvs):
                    subsets = [series_subset(c, o, range(k, c.values.shape[0], len(cvs)))
                               for c, o in zip(configs, outcomes, strict=True)]
                    p = figures([c for c, _ in subsets], [o for _, o in subsets])
                    parts.append(f"{100 * cv:.1f}%: {p.found5_3:.1f} found <=3n, {p.issued5_5:.1f} issued <=5n, "
                                 f"{p.false_issues_per_month:.2f} false issues/month")
                print(f"{'':12}   by series noise (5 % steps; false issues of those series a month): "
                      + "; ".join(parts))
    return 0


def _shown(path: Path) -> str:
    """A noise file as printed: relative to the repository when it is in it."""
    return str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)


def main(argv: list[str] | None = None) -> int:
    """The notification-level bench alone (bench.detection --alerts runs it too), with ``--series-noise``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--series", type=int, default=500)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--configurations", type=int, default=1)
    parser.add_argument("--seed", type=int, default=20261122)  # bench.detection's
    parser.add_argument("--noise", action="append", choices=NOISE_MODELS, help="only these noise models")
    parser.add_argument("--series-noise", action="store_true",
                        help="confirm requests carry their series' own noise (perfbisect's A/B prior)")
    args = parser.parse_args(argv)
    return run(args.series, args.nights, args.configurations, args.seed, args.noise or NOISE_MODELS,
               series_noise=args.series_noise)


if __name__ == "__main__":
    sys.exit(main())
