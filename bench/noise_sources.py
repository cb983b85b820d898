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
  speedups, their geometric mean, the median of the per-pair ratios), so a better estimator shows as a smaller CV.

    python -m bench.noise_sources --raw-dir /tmp/ab_noise_runs_processes_3

Nothing is measured here: it reads the raw runs (``run_*/<samples file>``) only.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.ab_noise import sample_rows


@dataclass(frozen=True)
class RunPairs:
    """One model's pairs in one run, with the worker process of each."""

    eager: np.ndarray
    compiled: np.ndarray
    process: np.ndarray

    def process_speedups(self) -> np.ndarray:
        return np.array([np.median(self.eager[self.process == p]) / np.median(self.compiled[self.process == p])
                         for p in np.unique(self.process)])


def read_pairs(raw_dir: Path) -> dict[str, list[RunPairs]]:
    """Per model, its pairs in each run, in the order the runs were measured (failed models left out)."""
    per_model: dict[str, list[RunPairs]] = {}
    for row in sample_rows(raw_dir):
        process = row.get("process") or [0] * len(row["eager_ms"])
        per_model.setdefault(row["name"], []).append(RunPairs(
            np.asarray(row["eager_ms"], float), np.asarray(row["compiled_ms"], float), np.asarray(process, int)))
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
    args = parser.parse_args(argv)
    per_model = read_pairs(args.raw_dir)
    rows = [sources(m, runs) for m, runs in sorted(per_model.items()) if len(runs) >= 3]
    if not rows:
        raise SystemExit(f"{args.raw_dir}: fewer than 3 runs of any model")
    print_sources(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
