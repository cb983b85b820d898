"""Measured A/B noise: the same models and configuration run many times through the real harness (A/A).

Two "builds" that are the same code are as different as two runs of ``perfdash run`` on this machine. This bench runs
``perfdash run`` ``--runs`` times (each a fresh process tree, like two nightly builds measured one after the other) on
the models of ``bench/data/ab_noise_models.toml`` (the nightly's three CPU models at tiny sizes), then reports, per
model and metric (speedup, compiled latency):

- the between-run distribution of the ratio of one run's value to the next run's (and to the median of all runs):
  its spread is the noise an A/B comparison of two builds meets;
- each run's within-run 95 % interval (the paired bootstrap of perfdash/confidence.py for the speedup; the same
  bootstrap of the median compiled time for the latency) and how often it holds the next run's value.

It writes ``bench/data/ab_noise.json`` (``AbNoise`` below; ``load_noise`` reads it), which bench/bisect_accuracy.py and
bench/detection.py read for their A/B noise instead of a constant.

    python -m bench.ab_noise --runs 30 --minutes 25     # measure, then analyse (leaves raw runs under --raw-dir)
    python -m bench.ab_noise --analyse-only              # analyse runs measured before
    python -m bench.ab_noise --runs 24 --minutes 12 --run-arg=--processes --run-arg=3
                                     # a candidate: its own raw dir and output file (ab_noise_processes_3.json)

A run measured in several worker processes (``--processes K``) has its intervals from the two-stage bootstrap over its
processes (perfdash/confidence.py), as the service computes them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from perfdash.confidence import latency_interval, speedup_interval
from perfdash.noise import MIN_RUNS, robust_cv
from runner.lifeline import dies_with_this_process
from runner.manifest import cpu_model, cpu_vector_isa

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "bench" / "data" / "ab_noise_models.toml"
OUTPUT = ROOT / "bench" / "data" / "ab_noise.json"  # measured on a quiet machine (the benches' default)
BUSY = ROOT / "bench" / "data" / "ab_noise_busy.json"  # the first measurement, under load 6.5-10 (bench/README.md)
SUITE = "timm_models"  # the suite only names the files here: every model brings its own builder
SAMPLES_FILE = "inductor_timm_models_float32_inference_cpu_samples.jsonl"
CSV_FILE = "inductor_timm_models_float32_inference_cpu_performance.csv"


class NoiseRow(BaseModel):
    """One model's metric over the A/A runs."""

    model: str
    metric: str  # speedup | abs_latency
    runs: int
    median: float
    between_run_cv_pct: float  # standard deviation of the log values, %
    between_run_robust_cv_pct: float  # 1.4826 MAD of the log values, % (what an outlier run does not move)
    pair_ratio_p05: float  # next run / this run: 5th, 50th, 95th percentile
    pair_ratio_p50: float
    pair_ratio_p95: float
    pair_ratio_max_abs_pct: float  # the largest move from one run to the next, %
    within_run_cv_pct: float  # median over runs of the within-run 95 % interval's half-width / 1.96, %
    next_run_in_interval: float  # share of runs whose 95 % interval holds the next run's value
    # share of runs whose series range (next_run_range, the robust CV of the other runs but these two)
    # holds the next run's value; None with too few runs, and in files written before it
    next_run_in_series_range: float | None = None
    values: tuple[float, ...]  # every run's value, in the order measured


class AbNoise(BaseModel):
    machine: str
    configuration: str
    command: str
    rows: tuple[NoiseRow, ...]
    run_args: tuple[str, ...] = ()  # what --run-arg appended to every run's `perfdash run` (none: the default)

    def cv_pct(self, metric: str) -> float:
        """The median over models of the between-run CV of ``metric``, %."""
        return float(statistics.median(r.between_run_cv_pct for r in self.rows if r.metric == metric))

    @property
    def speedup_cv_pct(self) -> float:
        return self.cv_pct("speedup")

    @property
    def latency_cv_pct(self) -> float:
        return self.cv_pct("abs_latency")

    def residuals(self, metric: str) -> np.ndarray:
        """The measured A/B noise of one measurement, as the simulating benches draw it: the log ratios of
        consecutive runs (what a paired A/B of two identical builds sees: slow changes of the machine's load cancel
        in them, fast ones do not), over sqrt(2) so that two independent draws differ as two runs did, pooled over
        the models, each model's median ratio removed."""
        parts = []
        for row in self.rows:
            if row.metric == metric:
                steps = np.diff(np.log(np.asarray(row.values)))
                parts.append((steps - np.median(steps)) / math.sqrt(2))
        return np.concatenate(parts)

    def robust_cvs(self, metric: str) -> tuple[float, ...]:
        """Each model's between-run robust CV of ``metric``, as a fraction (the simulated series' noise scales)."""
        return tuple(r.between_run_robust_cv_pct / 100.0 for r in self.rows if r.metric == metric)

    def shared_share(self, metric: str) -> float:
        """The share of the between-run variance of ``metric``'s log values that the models share run by run (the
        mean covariance of two models over the mean variance; the models were measured in the same runs), 0 when
        they do not move together."""
        logs = np.asarray([np.log(r.values) for r in self.rows if r.metric == metric])
        cov = np.cov(logs)
        k = len(logs)
        shared = (cov.sum() - np.trace(cov)) / (k * (k - 1))
        return max(0.0, float(shared / (np.trace(cov) / k)))


def load_noise(path: Path = OUTPUT) -> AbNoise:
    return AbNoise.model_validate_json(path.read_text())


def run_argv(output_dir: Path, run_args: Sequence[str] = ()) -> list[str]:
    """One A/A run; ``run_args``: a candidate's extra flags (``--processes 3``), after the default ones."""
    return [sys.executable, "-m", "perfdash.cli", "run", "--suite", SUITE, "--models-file", str(MODELS),
            "--performance", "--batch-size", "4", "--output-dir", str(output_dir), "--no-progress", *run_args]


def args_slug(run_args: Sequence[str]) -> str:
    """The extra flags as a file-name part (``--processes 3`` -> ``processes_3``); empty for none."""
    return "_".join(part for arg in run_args for part in re.split(r"[^A-Za-z0-9.]+", arg) if part)


def default_paths(run_args: Sequence[str]) -> tuple[Path, Path]:
    """The raw runs' directory and the output file: a candidate's own, so it neither resumes the default's runs
    nor overwrites the default's figures."""
    suffix = f"_{args_slug(run_args)}" if run_args else ""
    raw = Path(os.environ.get("TMPDIR", "/tmp")) / f"ab_noise_runs{suffix}"
    return raw, OUTPUT.with_name(f"ab_noise{suffix}.json")


# in the raw directory: the extra flags its runs were measured with (not run_*: that names the runs)
RUN_ARGS_FILE = "candidate_args.json"


# in a run's directory with --calibrate: the machine calibration right before and right after it
CALIBRATION_FILES = ("calibration_before.json", "calibration_after.json")


def write_calibration(path: Path) -> None:
    """The machine calibration workload (bench.machine_calibration) timed now in a fresh process, into ``path``;
    a calibration that fails is said on stderr and leaves no file (the runs go on)."""
    from bench.machine_calibration import CalibrationError, calibrate

    try:
        path.write_text(json.dumps(dataclasses.asdict(calibrate([], os.environ.copy()))))
    except CalibrationError as exc:
        print(f"machine calibration: {exc}", file=sys.stderr)


def measure(raw_dir: Path, runs: int, minutes: float, run_args: Sequence[str] = (), calibrate: bool = False) -> None:
    """``runs`` runs of ``perfdash run`` one after the other (stopping early after ``minutes``); runs already in
    ``raw_dir`` count, if they were measured with the same ``run_args``. ``calibrate``: time the machine calibration
    workload right before and after each run (a few seconds each), so that bench.noise_sources can set a run's move
    beside the machine's own."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    recorded = raw_dir / RUN_ARGS_FILE
    if recorded.exists() and json.loads(recorded.read_text()) != list(run_args):
        raise SystemExit(f"{raw_dir} holds runs measured with --run-arg {json.loads(recorded.read_text())}, not "
                         f"{list(run_args)}: use another --raw-dir")
    recorded.write_text(json.dumps(list(run_args)))
    deadline = time.monotonic() + minutes * 60
    done = len(list(raw_dir.glob("run_*")))
    while done < runs and time.monotonic() < deadline:
        out = raw_dir / f"run_{done:03d}"
        if calibrate:
            out.mkdir(parents=True, exist_ok=True)
            write_calibration(out / CALIBRATION_FILES[0])
        started = time.monotonic()
        proc = subprocess.run(run_argv(out, run_args), capture_output=True, text=True, env=os.environ.copy(),
                              check=False, preexec_fn=dies_with_this_process())  # killed with the bench
        if calibrate:
            write_calibration(out / CALIBRATION_FILES[1])
        print(f"run {done}: rc={proc.returncode} {time.monotonic() - started:.0f}s", flush=True)
        if proc.returncode != 0:
            print(proc.stderr[-2000:], file=sys.stderr)
        done += 1


@dataclass(frozen=True)
class RunValue:
    speedup: float
    latency_ms: float
    speedup_ci: tuple[float, float] | None
    latency_ci: tuple[float, float] | None


def run_samples(run: Path) -> Iterator[dict[str, Any]]:
    """Each model's samples row of one run; a model that failed (no pairs) is left out."""
    samples = run / SAMPLES_FILE
    if not samples.exists():
        return
    for line in samples.read_text().splitlines():
        row = json.loads(line)
        if row["eager_ms"] and row["compiled_ms"]:
            yield row


def sample_rows(raw_dir: Path) -> Iterator[dict[str, Any]]:
    """Each model's samples row of each run, runs in the order they were measured; a model that failed (no pairs)
    is left out."""
    for run in sorted(raw_dir.glob("run_*")):
        yield from run_samples(run)


def run_value(row: dict[str, Any]) -> RunValue:
    """One model's speedup and compiled latency in one run, with their within-run 95 % intervals."""
    eager, compiled, process = row["eager_ms"], row["compiled_ms"], row.get("process") or ()
    ci = speedup_interval(eager, compiled, process=process)
    latency_ci = latency_interval(compiled, process=process)
    return RunValue(speedup=statistics.median(eager) / statistics.median(compiled),
                    latency_ms=statistics.median(compiled),
                    speedup_ci=(ci.low, ci.high) if ci else None,
                    latency_ci=(latency_ci.low, latency_ci.high) if latency_ci else None)


def read_runs(raw_dir: Path) -> dict[str, list[RunValue]]:
    """Per model, the runs in the order they were measured (a run where the model failed is left out)."""
    per_model: dict[str, list[RunValue]] = {}
    for row in sample_rows(raw_dir):
        per_model.setdefault(row["name"], []).append(run_value(row))
    return per_model


def _pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q))


def next_run_range(value: float, cv: float, level: float = 0.95) -> tuple[float, float]:
    """Where the next run of an unchanged series would fall if whole runs moved as a normal law of the series' noise
    ``cv`` (its robust CV, perfdash.noise): value x exp(+-z sqrt(2) cv), a prediction interval in log space (the next
    run and this one each carry one run's noise). A run's own confidence interval cannot be this: it sees its pairs,
    not how far whole runs move; and even an exact one would hold the next run's value only P(|Z| < z / sqrt 2), 83 %
    at 95 %."""
    half = float(statistics.NormalDist().inv_cdf(0.5 + level / 2)) * math.sqrt(2) * cv
    return value * math.exp(-half), value * math.exp(half)


def next_in_series_range(values: Sequence[float]) -> float | None:
    """How often the next run's value falls in the range the series' noise gives around a run
    (next_run_range), the noise estimated from the other runs (all but the run and the next, so that
    neither sets the range that tests it; in an A/A block every run is of the same code, as a series' history of
    unchanged runs is). None with too few runs for an estimate."""
    held = []
    for i in range(len(values) - 1):
        others = [v for j, v in enumerate(values) if j not in (i, i + 1)]
        if len(others) < MIN_RUNS:
            return None
        low, high = next_run_range(values[i], robust_cv(others))
        held.append(low <= values[i + 1] <= high)
    return sum(held) / len(held) if held else None


def noise_row(model: str, metric: str, values: Sequence[float], intervals: Sequence[tuple[float, float] | None]
              ) -> NoiseRow:
    """The between-run spread of one metric and how often a run's own 95 % interval holds the next run's value."""
    logs = np.log(np.asarray(values, dtype=float))
    center = float(np.median(logs))
    # log ratio of consecutive runs: an A/B of two identical builds measured one after the other
    pair_logs = np.diff(logs)
    held = [lo <= nxt <= hi for (ci, nxt) in zip(intervals[:-1], values[1:], strict=True) if ci for lo, hi in [ci]]
    within = [math.log(hi / lo) / (2 * 1.959964) for ci in intervals if ci for lo, hi in [ci]]
    mad = float(np.median(np.abs(logs - center))) * 1.4826
    return NoiseRow(
        model=model, metric=metric, runs=len(values),
        median=float(math.exp(center)),
        between_run_cv_pct=float(np.std(logs, ddof=1) * 100),
        between_run_robust_cv_pct=mad * 100,
        pair_ratio_p05=float(math.exp(_pct(pair_logs, 5))), pair_ratio_p50=float(math.exp(_pct(pair_logs, 50))),
        pair_ratio_p95=float(math.exp(_pct(pair_logs, 95))),
        pair_ratio_max_abs_pct=float((math.exp(np.max(np.abs(pair_logs))) - 1) * 100),
        within_run_cv_pct=float(statistics.median(within) * 100) if within else math.nan,
        next_run_in_interval=sum(held) / len(held) if held else math.nan,
        next_run_in_series_range=next_in_series_range(values),
        values=tuple(float(v) for v in values),
    )


def analyse(raw_dir: Path, command: str, run_args: Sequence[str] = ()) -> AbNoise:
    per_model = read_runs(raw_dir)
    rows: list[NoiseRow] = []
    for model, runs in sorted(per_model.items()):
        if len(runs) < 3:
            continue
        rows.append(noise_row(model, "speedup", [r.speedup for r in runs], [r.speedup_ci for r in runs]))
        rows.append(noise_row(model, "abs_latency", [r.latency_ms for r in runs], [r.latency_ci for r in runs]))
    return AbNoise(machine=f"{os.cpu_count()} cores of {cpu_model()}, {cpu_vector_isa()} (the load beside it: see the "
                           "command's notes)",
                   configuration=f"perfdash run --suite {SUITE} --models-file {MODELS.relative_to(ROOT)} "
                                 "--performance --batch-size 4 (inductor, float32, inference, cpu, default repeats)"
                                 + (f" {' '.join(run_args)}" if run_args else ""),
                   command=command, rows=tuple(rows), run_args=tuple(run_args))


def print_table(noise: AbNoise) -> None:
    print(f"{'model':24} {'metric':12} {'runs':>4} {'median':>8} {'CV%':>6} {'rCV%':>6} {'p05':>6} {'p95':>6} "
          f"{'max|d|%':>7} {'within%':>7} {'next in CI':>10} {'in range':>8}")
    for r in noise.rows:
        print(f"{r.model:24} {r.metric:12} {r.runs:4d} {r.median:8.3f} {r.between_run_cv_pct:6.2f} "
              f"{r.between_run_robust_cv_pct:6.2f} {r.pair_ratio_p05:6.3f} {r.pair_ratio_p95:6.3f} "
              f"{r.pair_ratio_max_abs_pct:7.1f} {r.within_run_cv_pct:7.2f} {r.next_run_in_interval:10.0%} "
              f"{'–' if r.next_run_in_series_range is None else f'{r.next_run_in_series_range:.0%}':>8}")
    print(f"A/B noise (median between-run CV of the speedup over models): {noise.speedup_cv_pct:.2f} %; "
          f"of the latency: {noise.latency_cv_pct:.2f} %")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--minutes", type=float, default=25.0, help="stop measuring after this long")
    parser.add_argument("--run-arg", action="append", default=[], metavar="ARG",
                        help="a flag appended to every run's `perfdash run` (repeatable, in order; write "
                             "--run-arg=--processes --run-arg=3): a candidate measured against the default")
    parser.add_argument("--raw-dir", type=Path,
                        help="where the raw runs go (default: $TMPDIR/ab_noise_runs, with the --run-arg flags "
                             "appended to the name)")
    parser.add_argument("--analyse-only", action="store_true")
    parser.add_argument("--calibrate", action="store_true",
                        help="time the machine calibration workload before and after each run (bench.noise_sources "
                             "sets each run's move beside the machine's)")
    parser.add_argument("--output", type=Path,
                        help=f"default: {OUTPUT.relative_to(ROOT)}, with the --run-arg flags appended to the name")
    args = parser.parse_args(argv)
    default_raw, default_output = default_paths(args.run_arg)
    args.raw_dir = args.raw_dir or default_raw
    args.output = args.output or default_output
    if not args.analyse_only:
        measure(args.raw_dir, args.runs, args.minutes, args.run_arg, calibrate=args.calibrate)
    elif (recorded := args.raw_dir / RUN_ARGS_FILE).exists() and not args.run_arg:
        args.run_arg = json.loads(recorded.read_text())  # analysing a candidate's runs: say which candidate
    noise = analyse(args.raw_dir, "python -m bench.ab_noise " + " ".join(argv if argv is not None else sys.argv[1:]),
                    args.run_arg)
    print_table(noise)
    args.output.write_text(noise.model_dump_json(indent=1) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
