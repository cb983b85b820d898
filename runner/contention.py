"""What competed with a timed loop for the CPU, read from Linux before and after it (perfdash.contract.LoopContention).

Issue 39 found run-level noise that no estimator removes: all the workers of one run move together, so a run cannot
tell its own outlying measurement from its pairs. It needs a figure from outside the model. Three are cheap to read
around the loop and cost nothing inside it:

- the hypervisor's steal time (/proc/stat, the aggregate ``cpu`` line's 8th field, in USER_HZ ticks): on a VM the
  host's other guests take CPU time from this one, which the guest only sees here;
- CPU pressure (/proc/pressure/cpu, ``some`` ``total=`` in microseconds): wall time in which a runnable task on this
  machine waited for a CPU, i.e. other work beside the worker (or more threads than cores);
- the worker's involuntary context switches (getrusage, all its threads).

Each is None where the kernel does not offer it (no PSI, not Linux): the loop is measured as before.
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from perfdash.contract import LoopContention

PROC_STAT = Path("/proc/stat")
PROC_PRESSURE_CPU = Path("/proc/pressure/cpu")


@dataclass(frozen=True, slots=True)
class CpuTicks:
    """The aggregate ``cpu`` line of /proc/stat: all ticks, and the stolen ones."""

    total: int
    steal: int


def parse_cpu_ticks(text: str) -> CpuTicks | None:
    """The first ``cpu`` line of /proc/stat's text. Its fields: user nice system idle iowait irq softirq steal guest
    guest_nice; guest time is already inside user and nice (proc(5)), so the total is the first eight. None when the
    line is missing or has no steal field (kernels before 2.6.11)."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            if len(fields) < 9:
                return None
            ticks = [int(v) for v in fields[1:9]]
            return CpuTicks(total=sum(ticks), steal=ticks[7])
    return None


def parse_pressure_some_us(text: str) -> int | None:
    """``total=`` of the ``some`` line of a PSI file (microseconds of stall since boot); None without one."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "some":
            for field in fields[1:]:
                key, _, value = field.partition("=")
                if key == "total":
                    return int(value)
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def steal_share(before: CpuTicks | None, after: CpuTicks | None) -> float | None:
    """The share of all CPUs' ticks between two readings that the hypervisor stole; None without both readings or
    with no tick between them (a loop shorter than one tick says nothing)."""
    if before is None or after is None or after.total <= before.total:
        return None
    return max(after.steal - before.steal, 0) / (after.total - before.total)


@dataclass(slots=True)
class ContentionMeter:
    """``with ContentionMeter(process) as meter: <timed loop>``, then ``meter.result``."""

    process: int = 0
    result: LoopContention | None = None
    _ticks: CpuTicks | None = None
    _pressure_us: int | None = None
    _switches: int = 0
    _start: float = 0.0

    def __enter__(self) -> ContentionMeter:
        self._ticks = parse_cpu_ticks(_read(PROC_STAT))
        self._pressure_us = parse_pressure_some_us(_read(PROC_PRESSURE_CPU))
        self._switches = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw
        self._start = time.perf_counter()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        wall = time.perf_counter() - self._start
        switches = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw - self._switches
        pressure_us = parse_pressure_some_us(_read(PROC_PRESSURE_CPU))
        ticks = parse_cpu_ticks(_read(PROC_STAT))
        pressure = None
        if pressure_us is not None and self._pressure_us is not None and wall > 0:
            # PSI keeps its own clock: a fully stalled loop can read a hair over its wall time
            pressure = min(max(pressure_us - self._pressure_us, 0) / 1e6 / wall, 1.0)
        self.result = LoopContention(process=self.process, wall_s=wall, steal_share=steal_share(self._ticks, ticks),
                                     pressure_share=pressure, involuntary_switches=max(switches, 0))
