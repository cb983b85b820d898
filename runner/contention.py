"""What competed with a timed loop for the CPU, read from Linux before and after it (perfdash.contract.LoopContention).

Issue 39 found run-level noise that no estimator removes: all the workers of one run move together, so a run cannot
tell its own outlying measurement from its pairs. It needs a figure from outside the model. Three are cheap to read
around the loop and cost nothing inside it:

- the hypervisor's steal time (/proc/stat, the aggregate ``cpu`` line's 8th field, in USER_HZ ticks): on a VM the
  host's other guests take CPU time from this one, which the guest only sees here;
- CPU pressure (/proc/pressure/cpu, ``some`` ``total=`` in microseconds): wall time in which a runnable task on this
  machine waited for a CPU, i.e. other work beside the worker (or more threads than cores);
- the worker's involuntary context switches (getrusage, all its threads).

And who the pressure came from, so a run's outlying loop can be told from a noisy neighbour or from the worker
competing with itself: the CPU time anything but the worker used (/proc/stat's busy ticks less the worker's own,
/proc/self/stat), the few processes that used most of it (/proc/PID/stat of every process, read twice), and how many
of the worker's own threads were busy (/proc/self/task/TID/stat). Reading every process's stat file costs a few
milliseconds, outside the loop.

Each is None where the kernel does not offer it (no PSI, not Linux): the loop is measured as before.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from perfdash.contract import MAX_BUSIEST_OTHERS, LoopContention

PROC = Path("/proc")
PROC_STAT = PROC / "stat"
PROC_PRESSURE_CPU = PROC / "pressure" / "cpu"
# A thread of the worker is busy when it ran this share of the loop's wall time or more.
BUSY_THREAD_SHARE = 0.1


@dataclass(frozen=True, slots=True)
class CpuTicks:
    """The aggregate ``cpu`` line of /proc/stat: all ticks, the stolen ones, and the busy ones (user, nice, system,
    irq, softirq: what ran on a CPU of this machine)."""

    total: int
    steal: int
    busy: int = 0


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
            return CpuTicks(total=sum(ticks), steal=ticks[7], busy=sum(ticks[i] for i in (0, 1, 2, 5, 6)))
    return None


def parse_task_stat(text: str) -> tuple[str, int] | None:
    """A /proc/PID/stat (or .../task/TID/stat) line's command name and its CPU ticks (utime + stime, fields 14 and 15
    of proc(5)). The name sits in parentheses and may hold spaces or parentheses itself, so the fields are counted
    from the last ")". None for a line that does not parse."""
    head, paren, tail = text.rpartition(")")
    name = head.partition("(")[2]
    fields = tail.split()
    if not paren or len(fields) < 13:
        return None
    try:
        return name, int(fields[11]) + int(fields[12])
    except ValueError:
        return None


def task_ticks(directory: Path) -> dict[int, tuple[str, int]]:
    """Each numbered entry of ``directory`` (/proc: every process; /proc/self/task: this process's threads): its name
    and CPU ticks. Entries that exit while being read are left out."""
    out: dict[int, tuple[str, int]] = {}
    try:
        entries = [e for e in directory.iterdir() if e.name.isdigit()]
    except OSError:
        return out
    for entry in entries:
        if parsed := parse_task_stat(_read(entry / "stat")):
            out[int(entry.name)] = parsed
    return out


def busiest(before: dict[int, tuple[str, int]], after: dict[int, tuple[str, int]], exclude: int, tick_s: float,
            limit: int = MAX_BUSIEST_OTHERS) -> tuple[str, ...]:
    """The ``limit`` processes, but ``exclude``, that used most CPU between two readings, as "name (pid) seconds"; a
    process that used none is not named."""
    used = sorted(((ticks - before[pid][1], pid, name) for pid, (name, ticks) in after.items()
                   if pid != exclude and pid in before and ticks > before[pid][1]), reverse=True)
    return tuple(f"{name} ({pid}) {delta * tick_s:.2f} s" for delta, pid, name in used[:limit])


def busy_threads(before: dict[int, tuple[str, int]], after: dict[int, tuple[str, int]], wall_s: float,
                 tick_s: float) -> int:
    """How many threads used BUSY_THREAD_SHARE of ``wall_s`` or more between two readings of a process's tasks."""
    return sum(1 for tid, (_, ticks) in after.items()
               if (ticks - before.get(tid, ("", 0))[1]) * tick_s >= BUSY_THREAD_SHARE * wall_s)


def others_share(before: CpuTicks | None, after: CpuTicks | None, own_ticks: int) -> float | None:
    """The share of all CPUs' time between two readings used by anything but the worker (``own_ticks`` of it). The
    aggregate line counts every CPU's ticks, so a share of its total is a share of all CPUs' time."""
    if before is None or after is None or after.total <= before.total:
        return None
    return min(max(after.busy - before.busy - own_ticks, 0) / (after.total - before.total), 1.0)


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
    _others: dict[int, tuple[str, int]] = field(default_factory=dict)
    _threads: dict[int, tuple[str, int]] = field(default_factory=dict)

    def __enter__(self) -> ContentionMeter:
        self._others = task_ticks(PROC)
        self._threads = task_ticks(PROC / "self" / "task")
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
        threads = task_ticks(PROC / "self" / "task")
        others = task_ticks(PROC)
        pressure = None
        if pressure_us is not None and self._pressure_us is not None and wall > 0:
            # PSI keeps its own clock: a fully stalled loop can read a hair over its wall time
            pressure = min(max(pressure_us - self._pressure_us, 0) / 1e6 / wall, 1.0)
        tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
        own = os.getpid()
        own_ticks = others[own][1] - self._others[own][1] if own in others and own in self._others else None
        self.result = LoopContention(
            process=self.process, wall_s=wall, steal_share=steal_share(self._ticks, ticks),
            pressure_share=pressure, involuntary_switches=max(switches, 0),
            others_cpu_share=None if own_ticks is None else others_share(self._ticks, ticks, own_ticks),
            busiest_others=busiest(self._others, others, own, tick_s),
            own_busy_threads=busy_threads(self._threads, threads, wall, tick_s) if threads else None)
