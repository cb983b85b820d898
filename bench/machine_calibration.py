"""How fast the machine itself was around each side of a parity cell, and how far it moved between the two sides.

bench/pt_parity.py times a fixed calibration workload right before and after each side's timed run (one measurement
between the two sides serves as the first side's "after" and the second's "before"), in a fresh process under the
same niceness, launcher and environment as the sides. The workload is small and the same every time (fixed shapes,
seeded inputs): a single-thread 256x256 matmul loop (the speed of one core: frequency, a VM's steal) and a conv2d loop
at the sides' thread count (what the models get: all cores, with whatever else runs beside them). Each part is the
median of a few timed blocks after a warm call; a calibration costs a few seconds, most of it importing torch.

The account of a cell (``account``): the machine's figure of each side run is the mean of its before and after
calibrations; the machine ratio is perfdash's median figure over PyTorch's (above 1: the machine was slower while
perfdash ran); the corrected abs_latency ratio divides each run's latency by its machine figure before the medians,
i.e. compares the two sides in units of the machine's own speed at the time. ``machine_moved`` is the one rule of
when the machine moved enough to decide a cell on its own (more than ``MOVE_TOLERANCE``).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# The machine moved when its figure differs by more than this between the two sides of a cell: abs_latency's own
# target (±5 %), since a move that large can by itself put a cell outside it.
MOVE_TOLERANCE = 0.05

CALIBRATION_PROBE = """
import json, time, torch
torch.manual_seed(0)
threads = torch.get_num_threads()
def block_ms(fn, calls, blocks=5):
    fn()
    times = []
    for _ in range(blocks):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t) * 1e3)
    return sorted(times)[len(times) // 2]
a, b = torch.randn(256, 256), torch.randn(256, 256)
x, w = torch.randn(2, 32, 28, 28), torch.randn(64, 32, 3, 3)
with torch.no_grad():
    torch.set_num_threads(1)
    single = block_ms(lambda: torch.mm(a, b), 40)
    torch.set_num_threads(threads)
    sides = block_ms(lambda: torch.nn.functional.conv2d(x, w, padding=1), 10)
print(json.dumps({"single_thread_ms": single, "side_threads_ms": sides, "threads": threads}))
"""


class CalibrationError(RuntimeError):
    """The calibration workload did not give its figures; the message says why."""


@dataclass(frozen=True)
class Calibration:
    """One timing of the calibration workload: each part's median block, in ms."""

    single_thread_ms: float  # 40 matmuls of 256x256 on one thread
    side_threads_ms: float  # 10 conv2d (2x32x28x28, 64 3x3 filters) at the sides' thread count
    threads: int
    wall_s: float  # what the calibration cost, its process start included
    at: float  # time.time() when it ended

    @property
    def figure_ms(self) -> float:
        """The figure the account compares: the part run as the models run, at the sides' thread count."""
        return self.side_threads_ms


def calibrate(prefix: Sequence[str], env: Mapping[str, str], timeout: float = 120.0) -> Calibration:
    """Time the calibration workload in a fresh interpreter run under ``prefix`` (nice, a launcher) with ``env``."""
    start = time.perf_counter()
    try:
        proc = subprocess.run([*prefix, sys.executable, "-c", CALIBRATION_PROBE], env=dict(env), capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise CalibrationError(f"calibration timed out after {timeout:.0f} s") from exc
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        return Calibration(float(out["single_thread_ms"]), float(out["side_threads_ms"]), int(out["threads"]),
                           time.perf_counter() - start, time.time())
    except (IndexError, KeyError, TypeError, ValueError) as exc:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise CalibrationError(f"calibration exit {proc.returncode}: {tail[0]}") from exc


def machine_figure(before: Calibration | None, after: Calibration | None) -> float | None:
    """The machine's figure for one side run: the mean of the calibrations around it (either alone if one is
    missing)."""
    figures = [c.figure_ms for c in (before, after) if c is not None]
    return statistics.fmean(figures) if figures else None


def drift(before: Calibration | None, after: Calibration | None) -> float | None:
    """How far the machine moved during one side run: after / before − 1."""
    if before is None or after is None or before.figure_ms <= 0:
        return None
    return after.figure_ms / before.figure_ms - 1


def machine_moved(ratio: float | None) -> bool | None:
    """The rule: the machine moved between the two sides when their figures differ by more than MOVE_TOLERANCE."""
    return None if ratio is None else abs(ratio - 1) > MOVE_TOLERANCE + 1e-12


@dataclass(frozen=True)
class SideRun:
    """What the account needs of one side's timed run: its abs_latency and the calibrations around it."""

    latency: float | None
    before: Calibration | None
    after: Calibration | None


@dataclass(frozen=True)
class CellAccount:
    """One cell's abs_latency ratio (perfdash / PyTorch, medians over the rounds) beside the machine's."""

    latency_ratio: float | None
    machine_ratio: float | None  # perfdash side's machine figure / PyTorch side's (medians over the rounds)
    corrected_ratio: float | None  # the latency ratio in units of the machine's speed at the time
    largest_drift: float | None  # the largest move within one side run (after / before − 1), either side

    @property
    def moved(self) -> bool | None:
        return machine_moved(self.machine_ratio)


def _ratio(num: list[float], den: list[float]) -> float | None:
    if not num or not den or statistics.median(den) == 0:
        return None
    return statistics.median(num) / statistics.median(den)


def account(pytorch: Sequence[SideRun], perfdash: Sequence[SideRun]) -> CellAccount:
    """The account of one cell from both sides' runs (one per round)."""
    def latencies(runs: Sequence[SideRun]) -> list[float]:
        return [r.latency for r in runs if r.latency is not None]

    def figures(runs: Sequence[SideRun]) -> list[float]:
        return [f for r in runs if (f := machine_figure(r.before, r.after)) is not None]

    def normalised(runs: Sequence[SideRun]) -> list[float]:
        return [r.latency / f for r in runs
                if r.latency is not None and (f := machine_figure(r.before, r.after))]

    drifts = [abs(d) for r in (*pytorch, *perfdash) if (d := drift(r.before, r.after)) is not None]
    return CellAccount(_ratio(latencies(perfdash), latencies(pytorch)), _ratio(figures(perfdash), figures(pytorch)),
                       _ratio(normalised(perfdash), normalised(pytorch)), max(drifts) if drifts else None)
