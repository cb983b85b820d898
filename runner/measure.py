"""Measurement primitives for the worker: synchronised timers, the warm-up with PyTorch's peak memory, and
perfdash's own per-call activation peak."""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch

GB = 10**9  # decimal gigabytes, as get_peak_memory in PyTorch's benchmarks/dynamo/common.py divides


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn: Callable[[], Any], device: str) -> tuple[float, Any]:
    """Seconds one call takes, device work included."""
    synchronize(device)
    start = time.perf_counter()
    out = fn()
    synchronize(device)
    return time.perf_counter() - start, out


@dataclass(frozen=True, slots=True)
class Warmup:
    """``iterations`` calls timed as one block, and the peak memory as PyTorch's harness reads it after them (GB).
    ``setup_seconds``: the part of ``seconds`` its set-up took (see ``warmup``)."""

    seconds: float
    peak_mem: float
    setup_seconds: float = 0.0


# Set by runner.worker.run_forked: the pid of the fork server this worker was forked from.
FORKED_FROM_ENV = "PERFDASH_FORKED_FROM"


def _file_rss(pid: int | str) -> dict[tuple[str, str], int]:
    """Resident bytes of each file-backed mapping of a process, keyed by (address range, path), from its smaps."""
    resident: dict[tuple[str, str], int] = {}
    key: tuple[str, str] | None = None
    with open(f"/proc/{pid}/smaps", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            fields = line.split()
            if not fields:
                continue
            if "-" in fields[0] and not fields[0].endswith(":"):  # a header: range perms offset dev inode path
                key = (fields[0], fields[5]) if len(fields) > 5 and fields[5].startswith("/") else None
            elif fields[0] == "Rss:" and key is not None:
                resident[key] = int(fields[1]) * 1024
    return resident


def untouched_parent_pages(parent_pid: int | str) -> int:
    """Bytes of file-backed pages (the libraries' code and data) resident in the fork server that this forked worker
    has not touched yet. A fork copies the page tables of anonymous memory but not of file mappings, so the worker's
    resident set starts without the shared libraries' pages its parent faulted in while importing them (0.31 GB of
    0.78 GB after importing torch, Dynamo, Inductor and timm: bench/README.md, "Issue 32"); a process that imported
    them itself, as PyTorch's harness does, counts them. Per mapping: the parent's resident bytes less the worker's,
    never below zero. 0 when the parent cannot be read."""
    try:
        parent, own = _file_rss(parent_pid), _file_rss("self")
    except OSError:
        return 0
    return sum(max(0, nbytes - own.get(key, 0)) for key, nbytes in parent.items())


def process_rss_bytes() -> int:
    """The process's resident memory now (psutil reads /proc/self/statm, as PyTorch's harness does via psutil). In a
    worker forked by the fork server, plus the libraries' pages resident in the server that the worker has not touched
    (untouched_parent_pages), so that the figure is that of a process which imported everything itself, as PyTorch's
    one-model process does."""
    import psutil

    rss = int(psutil.Process().memory_info().rss)
    parent = os.environ.get(FORKED_FROM_ENV)
    # Only the forked worker itself: a process it starts inherits the variable but not the server's address space.
    return rss + untouched_parent_pages(parent) if parent and parent == str(os.getppid()) else rss


def warmup(fn: Callable[[], Any], iterations: int, device: str, setup: Callable[[], Any] | None = None) -> Warmup:
    """The warm-up of PyTorch's benchmarks/dynamo/common.py (``warmup`` in ``run_performance_test``), measured the
    same way: collect garbage; on CUDA reset the allocator's peak and empty its cache; time ``iterations`` calls as
    one block; then read the peak memory. CUDA: ``max_memory_allocated()`` over the block, i.e. everything allocated
    in the process (weights, inputs, compilation's buffers included). CPU: the process's resident set after the block
    (a current value, not a peak; it holds the interpreter, the libraries, weights, inputs and whatever the allocator
    kept). Both in GB of 10^9 bytes. (PyTorch's CPU column is psutil's ``memory_percent()`` times the total memory
    over 10^9, i.e. this figure times 100: the percentage is not divided by 100. Its ratios are the same.)
    ``setup``, if given, runs first inside the timed block: what the first call pays in a fresh process before it
    runs (the compiled warm-up's imports and compile-worker pool, runner.execute).
    """
    gc.collect()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.empty_cache()
    synchronize(device)
    start = time.perf_counter()
    if setup is not None:
        setup()
    set_up = time.perf_counter() - start
    for _ in range(iterations):
        fn()
    synchronize(device)
    seconds = time.perf_counter() - start
    if device == "cuda":
        return Warmup(seconds, torch.cuda.max_memory_allocated() / GB, set_up)
    return Warmup(seconds, process_rss_bytes() / GB, set_up)


# The profiler range that marks the measured call inside the profiled pair (see cpu_peak_bytes).
_WINDOW = "perfdash::peak_memory"


def peak_above_start(deltas: Iterable[int]) -> int:
    """The highest running total of allocation deltas (bytes, frees negative), counted from 0 at the start.

    A free of memory that was in use before the start lowers the total below 0 as it lowers the process's
    footprint, so the result is the peak above the baseline at the start, never below 0.
    """
    current = peak = 0
    for nbytes in deltas:
        current += nbytes
        peak = max(peak, current)
    return peak


def cpu_peak_bytes(fn: Callable[[], Any], primed: bool = True) -> int:
    """Peak CPU memory of one call above what was in use before it, replayed from torch.profiler's memory events.

    The events are every allocation and free of c10's CPU allocator (eager tensors, Inductor's buffers, oneDNN
    scratch space) in the calling thread, in order. The profiler only learns a block's size when it sees the block
    allocated, so a free of older memory would go unrecorded; ``fn`` therefore runs twice in one profiling session
    and only the second call is replayed: what one step leaves behind for the next (training's gradients, freed by
    ``zero_grad``) was allocated under the profiler and its free is counted. Unlike RSS, this needs no
    MALLOC_MMAP_THRESHOLD_ and does not depend on the malloc in use (glibc, jemalloc).

    ``primed=False`` profiles one call only: right when a step frees nothing it did not allocate itself (a warm
    inference step: activations come and go, weights stay), else too high by what it frees of older memory.
    """
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        if primed:
            fn()  # primes the profiler's block sizes; not measured
        with record_function(_WINDOW):
            fn()
    events = list(prof.profiler.kineto_results.events())
    window = next(e for e in events if e.name() == _WINDOW)
    memory = sorted(((e.start_ns(), e.nbytes()) for e in events
                     if e.name() == "[memory]" and e.device_type() == DeviceType.CPU
                     and window.start_ns() <= e.start_ns() <= window.end_ns()), key=lambda event: event[0])
    return peak_above_start(nbytes for _, nbytes in memory)


@dataclass(frozen=True, slots=True)
class PeakMemory:
    """perfdash's activation peak: the peak memory of one warm call in GB above what was in use before it (weights and
    inputs excluded), measured in the timing worker itself. Not PyTorch's peak memory (see ``warmup``): it is written
    to perfdash's own samples file, never to PyTorch's columns.

    CUDA: ``max_memory_allocated`` after resetting the peak. CPU: the replay of torch.profiler's memory events (see
    cpu_peak_bytes). Both count the bytes of memory the allocator handed out, not resident pages, so the two
    devices' figures mean the same thing.
    """

    device: str
    primed: bool = True  # see cpu_peak_bytes; the worker primes in training, where a step frees the last one's grads

    @property
    def calls(self) -> int:
        """How many times ``measure`` calls ``fn`` (the worker counts them as warm-up iterations)."""
        return 2 if self.device == "cpu" and self.primed else 1

    def measure(self, fn: Callable[[], Any]) -> float:
        if self.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            fn()
            torch.cuda.synchronize()
            return max(torch.cuda.max_memory_allocated() - base, 0) / GB
        return cpu_peak_bytes(fn, self.primed) / GB


def autocast(device: str, dtype: str) -> AbstractContextManager[Any]:
    """Autocast for ``--dtype amp`` (bfloat16 on CPU, float16 on CUDA, as PyTorch's harness), else a no-op."""
    if dtype != "amp":
        return torch.autocast(device_type=device, enabled=False)
    return torch.autocast(device_type=device, dtype=torch.bfloat16 if device == "cpu" else torch.float16)


TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "amp": torch.float32}
