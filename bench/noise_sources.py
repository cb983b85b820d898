"""Where the between-run spread of the speedup comes from, read off A/A runs bench/ab_noise.py measured with
``--processes K`` (issue 39 item 1).

Each run's pairs carry the worker process that timed them. Per model this prints:

- the between-run CV of the speedup as perfdash computes it (every pair pooled: median eager / median compiled);
- the between-process CV inside a run (each process's own speedup around its run's mean, pooled over runs), and
  what it predicts for the between-run CV if processes were the only source (that CV / sqrt(K));
- the run-level part: the between-run CV of the runs' mean process speedup with the process part taken out. When it
  is near zero, more processes per result is the cure; when it is not, something shared by all of a run's processes
  (the machine's state while the run lasted) moves the result, and more processes cannot remove it;
- the run-level part split once more: the CV left after a straight line through the runs in the order they ran
  (a drift of the machine over the measurement), and the CV without the outlying runs (more than 3 robust SDs from
  the median: a minute the machine was busy with something else);
- the between-run CV of other estimators of the same speedup, from the same pairs (median of the per-process
  speedups, their geometric mean, the median of the per-pair ratios), so a better estimator shows as a smaller CV;
- where the runs measured it (``contention`` in the samples, runner/contention.py), what competed with each worker's
  timed loop for the CPU beside how far that worker's speedup lay from the model's median: the rank correlation of
  the two, the most any process of an outlying run saw, and the between-run CV if the processes above a limit of
  steal or pressure had been measured again (left out here) — whether a run can recognise its own outlying
  measurement from outside the model before a rule re-measures it;
- who the pressure came from (where the runs read it): over the loops above the pressure limit and the others, how
  much of the machine anything but the worker used, how many of the worker's own threads were busy, and the
  processes named busiest beside the loops, by name, with the CPU seconds they took;
- the machine beside each run (where bench/ab_noise.py ran with ``--calibrate``): the calibration workload's figure
  around the run (bench.machine_calibration, the mean of before and after), its rank correlation with the run's
  speedup and latency, and each outlying run's figure against the median run's: whether a run that moved was a
  machine that moved, which a reference timed beside the model would recognise.

    python -m bench.noise_sources --raw-dir /tmp/ab_noise_runs_processes_3

Nothing is measured here: it reads the raw runs (``run_*/<samples file>``) only.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from bench.ab_noise import SAMPLES_FILE, sample_rows

# A worker's timed loop counts as contended above either share (the defaults of --steal-limit, --pressure-limit): a
# loop that lost 1 % of the machine to the hypervisor, or waited for a CPU 5 % of its wall time, against a quiet
# machine's near-zero.
STEAL_LIMIT = 0.01
PRESSURE_LIMIT = 0.05


@dataclass(frozen=True)
class RunPairs:
    """One model's pairs in one run, with the worker process of each and, where measured, what competed with each
    worker's timed loop (worker -> share of the machine stolen, share of the loop's wall time under CPU pressure)."""

    eager: np.ndarray
    compiled: np.ndarray
    process: np.ndarray
    steal: dict[int, float] = field(default_factory=dict)
    pressure: dict[int, float] = field(default_factory=dict)

    def workers(self) -> np.ndarray:
        return np.unique(self.process)

    def process_speedups(self) -> np.ndarray:
        return np.array([np.median(self.eager[self.process == p]) / np.median(self.compiled[self.process == p])
                         for p in self.workers()])

    def without(self, dropped: set[int]) -> RunPairs:
        """The run as if the ``dropped`` workers had not been kept (their pairs left out)."""
        keep = ~np.isin(self.process, sorted(dropped))
        return RunPairs(self.eager[keep], self.compiled[keep], self.process[keep],
                        {w: v for w, v in self.steal.items() if w not in dropped},
                        {w: v for w, v in self.pressure.items() if w not in dropped})


def read_pairs(raw_dir: Path) -> dict[str, list[RunPairs]]:
    """Per model, its pairs in each run, in the order the runs were measured (failed models left out)."""
    per_model: dict[str, list[RunPairs]] = {}
    for row in sample_rows(raw_dir):
        process = row.get("process") or [0] * len(row["eager_ms"])
        contention = row.get("contention") or ()
        per_model.setdefault(row["name"], []).append(RunPairs(
            np.asarray(row["eager_ms"], float), np.asarray(row["compiled_ms"], float), np.asarray(process, int),
            steal={c["process"]: c["steal_share"] for c in contention if c.get("steal_share") is not None},
            pressure={c["process"]: c["pressure_share"] for c in contention if c.get("pressure_share") is not None}))
    return per_model


def _cv_pct(values: Sequence[float]) -> float:
    """The SD of the logs, in percent (the between-run CV bench.ab_noise reports)."""
    return float(np.std(np.log(np.asarray(values, float)), ddof=1) * 100)


def _detrended_cv_pct(values: Sequence[float]) -> float:
    """The SD of the logs around a least-squares line in run order, in percent (two degrees of freedom used)."""
    logs = np.log(np.asarray(values, float))
    order = np.arange(len(logs))
    residuals = logs - np.polyval(np.polyfit(order, logs, 1), order)
    return float(math.sqrt(float(np.sum(residuals ** 2)) / (len(logs) - 2)) * 100)


def _outlying(values: Sequence[float], limit: float = 3.0) -> np.ndarray:
    """Which runs lie more than ``limit`` robust SDs (1.4826 MAD of the logs) from the median."""
    logs = np.log(np.asarray(values, float))
    spread = 1.4826 * float(np.median(np.abs(logs - np.median(logs))))
    return np.abs(logs - np.median(logs)) > limit * spread if spread > 0 else np.zeros(len(logs), bool)


# Estimators of one run's speedup from its pairs; perfdash's is the first.
ESTIMATORS: dict[str, Callable[[RunPairs], float]] = {
    "pooled median ratio (perfdash)": lambda r: float(np.median(r.eager) / np.median(r.compiled)),
    "median of process speedups": lambda r: float(np.median(r.process_speedups())),
    "geomean of process speedups": lambda r: float(np.exp(np.mean(np.log(r.process_speedups())))),
    "median of pair ratios": lambda r: float(np.median(r.eager / r.compiled)),
}


@dataclass(frozen=True)
class Sources:
    model: str
    runs: int
    processes: int
    between_run_cv_pct: float
    between_process_cv_pct: float
    process_only_prediction_pct: float
    run_level_cv_pct: float
    detrended_cv_pct: float
    outlying_runs: tuple[int, ...]
    cv_without_outlying_pct: float
    estimator_cv_pct: dict[str, float]


def sources(model: str, runs: Sequence[RunPairs]) -> Sources:
    per_run = [np.log(r.process_speedups()) for r in runs]
    k = min(len(p) for p in per_run)
    # the within-run (between-process) variance, pooled over runs; then the variance of the run means beyond it
    within = [float(np.var(p, ddof=1)) for p in per_run if len(p) > 1]
    between_process = math.sqrt(float(np.mean(within))) if within else math.nan
    run_means = np.array([float(np.mean(p)) for p in per_run])
    excess = float(np.var(run_means, ddof=1)) - (between_process ** 2 / k if within else 0.0)
    pooled = [ESTIMATORS["pooled median ratio (perfdash)"](r) for r in runs]
    outlying = _outlying(pooled)
    kept = [v for v, out in zip(pooled, outlying, strict=True) if not out]
    return Sources(
        model=model, runs=len(runs), processes=k,
        between_run_cv_pct=_cv_pct(pooled),
        between_process_cv_pct=between_process * 100,
        process_only_prediction_pct=between_process / math.sqrt(k) * 100,
        run_level_cv_pct=math.sqrt(max(excess, 0.0)) * 100,
        detrended_cv_pct=_detrended_cv_pct(pooled) if len(pooled) > 2 else math.nan,
        outlying_runs=tuple(int(i) for i in np.flatnonzero(outlying)),
        cv_without_outlying_pct=_cv_pct(kept) if len(kept) > 1 else math.nan,
        estimator_cv_pct={name: _cv_pct([f(r) for r in runs]) for name, f in ESTIMATORS.items()})


@dataclass(frozen=True)
class ContentionReading:
    """One model's worker processes against what competed with their timed loops (only runs that measured it)."""

    model: str
    workers: int  # worker loops with a contention reading
    steal_median: float
    steal_max: float
    pressure_median: float
    pressure_max: float
    # Spearman's rank correlation of each worker's distance from the model's median speedup (|log|) with its steal
    # and its pressure share, and the two-sided p-value of each; nan when a share never varies.
    steal_rho: float
    steal_p: float
    pressure_rho: float
    pressure_p: float
    outlying_runs_worst: dict[int, tuple[float, float]]  # outlying run -> the most steal and pressure of its workers
    contended_workers: int  # above the limits
    # the median distance (|log|, %) from the model's median speedup of the contended workers and of the others
    contended_distance_pct: float
    quiet_distance_pct: float
    cv_without_contended_pct: float  # the between-run CV with those workers' pairs left out


def contention_reading(model: str, runs: Sequence[RunPairs], outlying_runs: Sequence[int],
                       steal_limit: float = STEAL_LIMIT, pressure_limit: float = PRESSURE_LIMIT
                       ) -> ContentionReading | None:
    """None when no run of the model measured contention (files from before runner/contention.py)."""
    measured = [r for r in runs if r.steal or r.pressure]
    if not measured:
        return None
    center = float(np.median(np.concatenate([np.log(r.process_speedups()) for r in measured])))
    distance, steal, pressure = [], [], []
    for r in measured:
        for worker, speedup in zip(r.workers(), r.process_speedups(), strict=True):
            distance.append(abs(math.log(speedup) - center))
            steal.append(r.steal.get(int(worker), 0.0))
            pressure.append(r.pressure.get(int(worker), 0.0))
    is_contended = [s > steal_limit or p > pressure_limit for s, p in zip(steal, pressure, strict=True)]

    def median_distance_pct(contended_ones: bool) -> float:
        picked = [d for d, c in zip(distance, is_contended, strict=True) if c == contended_ones]
        return float(np.median(picked)) * 100 if picked else math.nan

    def rank(shares: list[float]) -> tuple[float, float]:
        if len(set(shares)) < 2 or len(set(distance)) < 2:
            return math.nan, math.nan
        result = spearmanr(distance, shares)
        return float(result.statistic), float(result.pvalue)

    def contended(r: RunPairs) -> set[int]:
        return {int(w) for w in r.workers()
                if r.steal.get(int(w), 0.0) > steal_limit or r.pressure.get(int(w), 0.0) > pressure_limit}

    # a run whose every worker was contended keeps them all: a rule would measure it again, not drop it
    cleaned = [r.without(drop) if (drop := contended(r)) and drop != set(map(int, r.workers())) else r for r in runs]
    pooled = [ESTIMATORS["pooled median ratio (perfdash)"](r) for r in cleaned]
    steal_rho, steal_p = rank(steal)
    pressure_rho, pressure_p = rank(pressure)
    return ContentionReading(
        model=model, workers=len(distance),
        steal_median=float(np.median(steal)), steal_max=max(steal),
        pressure_median=float(np.median(pressure)), pressure_max=max(pressure),
        steal_rho=steal_rho, steal_p=steal_p, pressure_rho=pressure_rho, pressure_p=pressure_p,
        outlying_runs_worst={i: (max(runs[i].steal.values(), default=0.0), max(runs[i].pressure.values(), default=0.0))
                             for i in outlying_runs},
        contended_workers=sum(len(contended(r)) for r in runs),
        contended_distance_pct=median_distance_pct(True), quiet_distance_pct=median_distance_pct(False),
        cv_without_contended_pct=_cv_pct(pooled) if len(pooled) > 1 else math.nan)


def print_contention(readings: Sequence[ContentionReading], steal_limit: float, pressure_limit: float) -> None:
    print()
    print("what competed with each worker's timed loop (shares; rho: Spearman's, against the worker's distance from "
          "the median speedup)")
    print(f"{'model':24} {'workers':>7} {'steal med/max':>15} {'pressure med/max':>17} {'rho steal (p)':>15} "
          f"{'rho pressure (p)':>17} {'contended':>9} {'off% c/q':>11} {'CV% without':>11}  "
          "outlying runs: worst steal/pressure")
    for c in readings:
        worst = "; ".join(f"run {i}: {s:.4f}/{p:.4f}" for i, (s, p) in c.outlying_runs_worst.items()) or "-"
        print(f"{c.model:24} {c.workers:>7} {c.steal_median:>7.4f}/{c.steal_max:<7.4f} "
              f"{c.pressure_median:>8.4f}/{c.pressure_max:<8.4f} {c.steal_rho:>6.2f} ({c.steal_p:.3f}) "
              f"{c.pressure_rho:>8.2f} ({c.pressure_p:.3f}) {c.contended_workers:>9} "
              f"{c.contended_distance_pct:>5.2f}/{c.quiet_distance_pct:<5.2f} {c.cv_without_contended_pct:>11.2f}"
              f"  {worst}")
    print(f"(contended: steal share > {steal_limit:g} or pressure share > {pressure_limit:g}; 'off% c/q': the median "
          "distance of contended / quiet workers from the median speedup; 'CV% without': the between-run CV of the "
          "speedup with the contended workers' pairs left out, as if measured again)")


@dataclass(frozen=True)
class LoopGroup:
    """Worker loops on one side of the pressure limit, and who competed with them."""

    loops: int
    pressure_median: float
    others_share_median: float  # nan without a reading
    own_busy_threads_median: float
    busiest: list[tuple[str, float, int]]  # (process name, CPU seconds beside these loops, loops it was named in)


def _process_name(entry: str) -> str:
    """"name (pid) 0.31 s" -> name (the name may itself hold spaces and parentheses)."""
    return entry.rsplit(" (", 1)[0]


def _seconds(entry: str) -> float:
    return float(entry.rsplit(" ", 2)[-2])


def who_competed(raw_dir: Path, pressure_limit: float = PRESSURE_LIMIT, top: int = 5) -> dict[str, LoopGroup]:
    """The worker loops of every model and run, split at ``pressure_limit`` ("contended" above, "quiet" at or
    below), each group with who else used the CPU beside its loops; groups without a reading of who are left out
    (files from before the readings)."""
    loops: dict[str, list[dict]] = {"contended": [], "quiet": []}
    for row in sample_rows(raw_dir):
        for c in row.get("contention") or ():
            if c.get("pressure_share") is not None and c.get("others_cpu_share") is not None:
                loops["contended" if c["pressure_share"] > pressure_limit else "quiet"].append(c)
    out = {}
    for group, readings in loops.items():
        if not readings:
            continue
        seconds: dict[str, float] = {}
        named: dict[str, int] = {}
        for c in readings:
            for entry in c.get("busiest_others") or ():
                name = _process_name(entry)
                seconds[name] = seconds.get(name, 0.0) + _seconds(entry)
                named[name] = named.get(name, 0) + 1
        threads = [c["own_busy_threads"] for c in readings if c.get("own_busy_threads") is not None]
        out[group] = LoopGroup(
            loops=len(readings), pressure_median=float(np.median([c["pressure_share"] for c in readings])),
            others_share_median=float(np.median([c["others_cpu_share"] for c in readings])),
            own_busy_threads_median=float(np.median(threads)) if threads else math.nan,
            busiest=sorted(((n, s, named[n]) for n, s in seconds.items()), key=lambda t: -t[1])[:top])
    return out


def print_who(groups: dict[str, LoopGroup], pressure_limit: float) -> None:
    print()
    print(f"who competed with the timed loops (split at pressure share {pressure_limit:g}; others: the share of all "
          "CPUs' time anything but the worker used; threads: the worker's own busy threads)")
    for name, g in groups.items():
        busiest = "; ".join(f"{n} {s:.1f} s in {k} loops" for n, s, k in g.busiest) or "-"
        print(f"{name:10} {g.loops:>4} loops, pressure median {g.pressure_median:.3f}, others median "
              f"{g.others_share_median:.3f}, threads median {g.own_busy_threads_median:g}; busiest beside them: "
              f"{busiest}")


@dataclass(frozen=True)
class MachineBeside:
    """One model's runs against the machine calibration around each (runs with both a value and a figure)."""

    model: str
    runs: int
    rho_speedup: float  # Spearman's, machine figure against the run's speedup
    p_speedup: float
    rho_latency: float  # ... against the run's compiled latency
    p_latency: float
    outlying: tuple[tuple[int, float, float], ...]  # (run, speedup / median, machine figure / median)


def machine_beside(raw_dir: Path, outlying: dict[str, tuple[int, ...]]) -> list[MachineBeside]:
    """Per model, the rank correlation of the machine's figure around each run with the run's speedup and latency,
    and where each of the model's ``outlying`` runs (indices among its runs, as sources() names them) stood; empty
    when no run has a calibration (bench.ab_noise without --calibrate)."""
    from bench.ab_noise import CALIBRATION_FILES
    from bench.machine_calibration import Calibration, machine_figure

    per_model: dict[str, list[tuple[float, float, float | None]]] = {}
    for run in sorted(raw_dir.glob("run_*")):
        samples = run / SAMPLES_FILE
        if not samples.exists():
            continue
        calibrations = [Calibration(**json.loads(path.read_text())) if path.exists() else None
                        for path in (run / name for name in CALIBRATION_FILES)]
        figure = machine_figure(*calibrations)
        for line in samples.read_text().splitlines():
            row = json.loads(line)
            if row["eager_ms"] and row["compiled_ms"]:
                compiled = float(np.median(row["compiled_ms"]))
                per_model.setdefault(row["name"], []).append(
                    (float(np.median(row["eager_ms"])) / compiled, compiled, figure))
    found = []
    for model, runs in sorted(per_model.items()):
        measured = [(i, s, c, f) for i, (s, c, f) in enumerate(runs) if f is not None]
        if len(measured) < 3:
            continue
        speedups, latencies, figures = (np.array([m[k] for m in measured]) for k in (1, 2, 3))
        rho_s, p_s = spearmanr(figures, speedups)
        rho_c, p_c = spearmanr(figures, latencies)
        index = {i: n for n, (i, *_rest) in enumerate(measured)}
        out = tuple((i, float(speedups[index[i]] / np.median(speedups)), float(figures[index[i]] / np.median(figures)))
                    for i in outlying.get(model, ()) if i in index)
        found.append(MachineBeside(model, len(measured), float(rho_s), float(p_s), float(rho_c), float(p_c), out))
    return found


def print_machine(rows: Sequence[MachineBeside]) -> None:
    print()
    print("the machine beside each run (bench.machine_calibration around it; rho: Spearman's, figure against value)")
    print(f"{'model':24} {'runs':>4} {'rho speedup (p)':>16} {'rho latency (p)':>16}  outlying runs: speedup / machine "
          "against the median run")
    for m in rows:
        outlying = "; ".join(f"run {i}: {s:.3f} / {f:.3f}" for i, s, f in m.outlying) or "-"
        print(f"{m.model:24} {m.runs:>4} {m.rho_speedup:>7.2f} ({m.p_speedup:.3f}) {m.rho_latency:>7.2f} "
              f"({m.p_latency:.3f})  {outlying}")


def print_sources(rows: Sequence[Sources]) -> None:
    print(f"{'model':24} {'runs':>4} {'K':>2} {'between-run CV%':>15} {'process CV%':>11} "
          f"{'/sqrt(K)':>8} {'run-level CV%':>13} {'detrended CV%':>13} {'no outliers CV%':>15}  outlying runs")
    for s in rows:
        print(f"{s.model:24} {s.runs:>4} {s.processes:>2} {s.between_run_cv_pct:>15.2f} "
              f"{s.between_process_cv_pct:>11.2f} {s.process_only_prediction_pct:>8.2f} {s.run_level_cv_pct:>13.2f} "
              f"{s.detrended_cv_pct:>13.2f} {s.cv_without_outlying_pct:>15.2f}  "
              f"{', '.join(map(str, s.outlying_runs)) or '-'}")
    print()
    print(f"{'between-run CV% of the speedup by estimator':44} " + " ".join(f"{s.model[:14]:>14}" for s in rows))
    for name in ESTIMATORS:
        print(f"{name:44} " + " ".join(f"{s.estimator_cv_pct[name]:>14.2f}" for s in rows))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--raw-dir", type=Path, required=True, help="bench.ab_noise's raw runs (run_*/...)")
    parser.add_argument("--steal-limit", type=float, default=STEAL_LIMIT,
                        help="a worker's loop is contended above this share of the machine stolen (%(default)s)")
    parser.add_argument("--pressure-limit", type=float, default=PRESSURE_LIMIT,
                        help="... or above this share of its wall time under CPU pressure (%(default)s)")
    args = parser.parse_args(argv)
    per_model = read_pairs(args.raw_dir)
    models = [(m, runs) for m, runs in sorted(per_model.items()) if len(runs) >= 3]
    if not models:
        raise SystemExit(f"{args.raw_dir}: fewer than 3 runs of any model")
    rows = [sources(m, runs) for m, runs in models]
    print_sources(rows)
    readings = [c for (m, runs), row in zip(models, rows, strict=True)
                if (c := contention_reading(m, runs, row.outlying_runs, args.steal_limit, args.pressure_limit))]
    if readings:
        print_contention(readings, args.steal_limit, args.pressure_limit)
    if groups := who_competed(args.raw_dir, args.pressure_limit):
        print_who(groups, args.pressure_limit)
    if machine := machine_beside(args.raw_dir, {row.model: row.outlying_runs for row in rows}):
        print_machine(machine)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
