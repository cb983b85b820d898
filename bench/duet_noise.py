"""Duet A/A: two builds measured at the same time on mirrored halves of the machine, against one after the other
(issue 39 item 1, "Duet-style A/B ... worth a trial for confirmation and bisection").

bench/ab_noise.py found that what moves a whole run is outside the guest's view: no steal, no pressure, no other
process, and a reference workload timed right before and after a run does not move with it (bench.noise_sources'
"machine beside"). If that move is shared by everything running on the machine at that moment (the host's caches,
memory bandwidth, frequency), two builds timed at once see the same move, and their ratio cancels it: that is the
duet method (Bulej et al., "Duet Benchmarking", 2020). If the move belongs to each process (its memory layout, its
compiled kernels' placement), a duet cancels nothing.

Each cycle runs, on the nightly's three A/A models of bench/data/ab_noise_models.toml:

- a duet: two ``perfdash run --threads N`` at once, side A on one half of the CPUs and side B on the other (each run
  and everything it starts pinned there), the halves swapped every cycle so that a difference between the halves
  (interrupts land on the first CPU) shows as its own figure instead of as noise;
- a solo run: the same command alone on the first half, the sequential A/B's measurement with the same resources.

For each model and metric it prints the A/B noise of one measurement (the log ratio of the two values compared, over
sqrt 2; the SD and the robust SD, 1.4826 MAD): sequential (consecutive solo runs, what perfbisect compares today)
against duet (side A over side B of the same cycle, the halves' difference taken out), and that difference itself.

    python -m bench.duet_noise --cycles 12 --minutes 30 --raw-dir /tmp/duet_runs
    python -m bench.duet_noise --analyse-only --raw-dir /tmp/duet_runs

Measuring holds the whole machine: run it alone.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel

from bench.ab_noise import ROOT, RunValue, run_argv, run_samples, run_value
from perfdash.ab import duet_halves
from runner.lifeline import die_with_parent
from runner.manifest import cpu_model, cpu_vector_isa

OUTPUT = ROOT / "bench" / "data" / "duet_noise.json"
SIDES = ("duet_a", "duet_b", "solo")  # the raw directory's parts, each holding run_000, run_001, ... by cycle
CORES_FILE = "cores.json"  # per cycle, the CPUs side A ran on


def halves(cpus: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The machine's CPUs as perfbisect's duet splits them (perfdash.ab.duet_halves), each half in order."""
    first, second = duet_halves(cpus)
    return tuple(sorted(first)), tuple(sorted(second))


def pinned_to(cpus: Sequence[int], parent: int) -> Callable[[], None]:
    """A ``preexec_fn``: the run and all it starts stay on ``cpus`` and die with this bench."""
    def setup() -> None:
        os.sched_setaffinity(0, set(cpus))
        die_with_parent(parent)
    return setup


def cycle_argv(out: Path, threads: int) -> list[str]:
    return run_argv(out, ["--threads", str(threads)])


def measure(raw_dir: Path, cycles: int, minutes: float) -> None:
    """``cycles`` cycles of a duet then a solo run (cycles already in ``raw_dir`` count), stopping after ``minutes``."""
    first, second = halves(sorted(os.sched_getaffinity(0)))
    threads = len(first)
    cores_path = raw_dir / CORES_FILE
    cores: list[list[int]] = json.loads(cores_path.read_text()) if cores_path.exists() else []
    deadline = time.monotonic() + minutes * 60
    while len(cores) < cycles and time.monotonic() < deadline:
        i = len(cores)
        a_cpus, b_cpus = (first, second) if i % 2 == 0 else (second, first)
        started = time.monotonic()
        logs = [raw_dir / side / f"run_{i:03d}.log" for side in ("duet_a", "duet_b")]
        procs = []
        for log, cpus in zip(logs, (a_cpus, b_cpus), strict=True):
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("w") as stderr_file:  # a file, not a pipe: a side that writes much never blocks on it
                procs.append(subprocess.Popen(cycle_argv(log.with_suffix(""), threads), env=os.environ.copy(),
                                              stdout=subprocess.DEVNULL, stderr=stderr_file,
                                              preexec_fn=pinned_to(cpus, os.getpid())))
        duet = [(p.wait(), log.read_text()) for p, log in zip(procs, logs, strict=True)]
        duet_s = time.monotonic() - started
        solo = subprocess.run(cycle_argv(raw_dir / "solo" / f"run_{i:03d}", threads), env=os.environ.copy(),
                              capture_output=True, text=True, check=False, preexec_fn=pinned_to(first, os.getpid()))
        cores.append(list(a_cpus))
        cores_path.write_text(json.dumps(cores))
        print(f"cycle {i}: duet rc={duet[0][0]},{duet[1][0]} {duet_s:.0f}s; solo rc={solo.returncode} "
              f"{time.monotonic() - started - duet_s:.0f}s", flush=True)
        for rc, err in [*duet, (solo.returncode, solo.stderr)]:
            if rc != 0:
                print(err[-2000:], file=sys.stderr)


class DuetRow(BaseModel):
    """One model's metric: the A/B noise of one measurement, sequential against duet (%, log scale)."""

    model: str
    metric: str  # speedup | abs_latency
    cycles: int
    sequential_sd_pct: float  # consecutive solo runs' log ratios, SD / sqrt 2
    sequential_robust_sd_pct: float  # the same, 1.4826 MAD / sqrt 2
    duet_sd_pct: float  # log(side A / side B) of each cycle, the halves' difference taken out, SD / sqrt 2
    duet_robust_sd_pct: float
    halves_difference_pct: float  # the first half's value over the second's, median over cycles, % above 1
    duet_over_solo_pct: float  # the duet's median value over the solo runs' (what sharing the machine costs), %
    # the draws themselves, as bench/bisect_accuracy.py samples them: one measurement's log deviation (a compared
    # pair's log ratio over sqrt 2, its median taken out), sequential (consecutive solo runs) and duet (per cycle)
    sequential_residuals: tuple[float, ...] = ()
    duet_residuals: tuple[float, ...] = ()


DuetPart = Literal["duet", "sequential"]


class DuetNoise(BaseModel):
    kind: Literal["duet"] = "duet"  # tells this file from bench.ab_noise's AbNoise
    machine: str
    configuration: str
    command: str
    rows: tuple[DuetRow, ...]

    def residuals(self, metric: str, part: DuetPart = "duet") -> np.ndarray:
        """The measured A/B noise of one measurement, pooled over the models (bench.ab_noise.AbNoise.residuals'
        counterpart): a duet's or the sequential solo runs'."""
        return np.concatenate([r.duet_residuals if part == "duet" else r.sequential_residuals
                               for r in self.rows if r.metric == metric])


def measured_residuals(path: Path, metric: str, part: DuetPart = "duet") -> np.ndarray:
    """The A/B noise draws of a measured noise file, either kind: bench.ab_noise's (consecutive runs of the
    nightly's configuration) or this bench's (``part`` of a duet block)."""
    from bench.ab_noise import AbNoise

    data = json.loads(path.read_text())
    if data.get("kind") == "duet":
        return DuetNoise.model_validate(data).residuals(metric, part)
    return AbNoise.model_validate(data).residuals(metric)


def _sd_pct(logs: np.ndarray) -> float:
    return float(np.std(logs, ddof=1) / math.sqrt(2) * 100)


def _robust_sd_pct(logs: np.ndarray) -> float:
    return float(np.median(np.abs(logs - np.median(logs))) * 1.4826 / math.sqrt(2) * 100)


def duet_row(model: str, metric: str, side_a: Sequence[float], side_b: Sequence[float], solo: Sequence[float],
             a_on_first: Sequence[bool]) -> DuetRow:
    """``side_a``/``side_b``/``solo``: the cycle's values (the same cycles, in order); ``a_on_first``: whether side
    A ran on the first half that cycle."""
    a, b, s = (np.log(np.asarray(v, dtype=float)) for v in (side_a, side_b, solo))
    first_over_second = np.where(np.asarray(a_on_first), a - b, b - a)
    halves = float(np.median(first_over_second))
    # side A over side B with the halves' difference taken out: what two identical builds differ by in a duet
    duet = np.where(np.asarray(a_on_first), a - b - halves, a - b + halves)
    sequential = np.diff(s)
    return DuetRow(sequential_residuals=tuple((sequential - np.median(sequential)) / math.sqrt(2)),
                   duet_residuals=tuple((duet - np.median(duet)) / math.sqrt(2)),
                   model=model, metric=metric, cycles=len(s),
                   sequential_sd_pct=_sd_pct(sequential), sequential_robust_sd_pct=_robust_sd_pct(sequential),
                   duet_sd_pct=_sd_pct(duet), duet_robust_sd_pct=_robust_sd_pct(duet),
                   halves_difference_pct=(math.exp(halves) - 1) * 100,
                   duet_over_solo_pct=(math.exp(float(np.median(np.concatenate([a, b]))) - float(np.median(s)))
                                       - 1) * 100)


def analyse(raw_dir: Path, command: str) -> DuetNoise:
    """The rows of the cycles where all three runs measured the model."""
    cores: list[list[int]] = json.loads((raw_dir / CORES_FILE).read_text())
    first = tuple(cores[0]) if cores else ()  # measure() puts side A on the first half in cycle 0
    per_side = {side: read_runs_by_cycle(raw_dir / side) for side in SIDES}
    rows = []
    for model in sorted(per_side["solo"]):
        cycles = [i for i in range(len(cores)) if all(i in per_side[side].get(model, {}) for side in SIDES)]
        if len(cycles) < 3:
            continue
        on_first = [tuple(cores[i]) == first for i in cycles]
        for metric in ("speedup", "abs_latency"):
            values = {side: [getattr(per_side[side][model][i], "speedup" if metric == "speedup" else "latency_ms")
                             for i in cycles] for side in SIDES}
            rows.append(duet_row(model, metric, values["duet_a"], values["duet_b"], values["solo"], on_first))
    return DuetNoise(machine=f"{os.cpu_count()} cores of {cpu_model()}, {cpu_vector_isa()}",
                     configuration=" ".join(cycle_argv(Path("OUT"), len(first))[1:]) + " (each side on half the CPUs)",
                     command=command, rows=tuple(rows))


def read_runs_by_cycle(side_dir: Path) -> dict[str, dict[int, RunValue]]:
    """Per model, cycle -> its value in that cycle's run (a cycle where the model failed is left out)."""
    by_cycle: dict[str, dict[int, RunValue]] = {}
    for run in sorted(side_dir.glob("run_*")):
        for row in run_samples(run):
            by_cycle.setdefault(row["name"], {})[int(run.name.removeprefix("run_"))] = run_value(row)
    return by_cycle


def print_table(noise: DuetNoise) -> None:
    print("A/B noise of one measurement, % (SD / robust SD): sequential solo runs against a duet")
    print(f"{'model':24} {'metric':12} {'cycles':>6} {'sequential':>14} {'duet':>14} {'halves %':>9} "
          f"{'duet/solo %':>11}")
    for r in noise.rows:
        print(f"{r.model:24} {r.metric:12} {r.cycles:6d} "
              f"{r.sequential_sd_pct:6.2f} / {r.sequential_robust_sd_pct:5.2f} {r.duet_sd_pct:6.2f} / "
              f"{r.duet_robust_sd_pct:5.2f} {r.halves_difference_pct:9.2f} {r.duet_over_solo_pct:11.2f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=12)
    parser.add_argument("--minutes", type=float, default=30.0, help="stop measuring after this long")
    parser.add_argument("--raw-dir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "duet_runs")
    parser.add_argument("--analyse-only", action="store_true")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    if not args.analyse_only:
        args.raw_dir.mkdir(parents=True, exist_ok=True)
        measure(args.raw_dir, args.cycles, args.minutes)
    noise = analyse(args.raw_dir, "python -m bench.duet_noise " + " ".join(argv if argv is not None else sys.argv[1:]))
    print_table(noise)
    args.output.write_text(noise.model_dump_json(indent=1) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
