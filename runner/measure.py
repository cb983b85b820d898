"""Measurement primitives for the worker: synchronised timers and peak-memory probes."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

GB = 1024**3


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


def _status_kb(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+)\s+kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    if match is None:
        raise OSError(f"/proc/self/status has no {field}")
    return int(match.group(1))


@dataclass(frozen=True, slots=True)
class PeakMemory:
    """Peak memory of one call in GB above what was in use before it.

    CUDA: ``max_memory_allocated`` after resetting the peak. CPU: the process's high-water mark (VmHWM) after
    resetting it by writing "5" to /proc/self/clear_refs, minus the resident size at the reset. The worker runs
    with MALLOC_MMAP_THRESHOLD_ set so freed buffers go back to the OS and RSS follows the allocator.
    """

    device: str

    def available(self) -> bool:
        if self.device == "cuda":
            return True
        try:
            Path("/proc/self/clear_refs").write_text("5")
            _status_kb("VmHWM")
        except OSError:
            return False
        return True

    def measure(self, fn: Callable[[], Any]) -> float:
        if self.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            fn()
            torch.cuda.synchronize()
            return max(torch.cuda.max_memory_allocated() - base, 0) / GB
        Path("/proc/self/clear_refs").write_text("5")
        base_kb = _status_kb("VmRSS")
        fn()
        return max(_status_kb("VmHWM") - base_kb, 0) * 1024 / GB


def autocast(device: str, dtype: str) -> AbstractContextManager[Any]:
    """Autocast for ``--dtype amp`` (bfloat16 on CPU, float16 on CUDA, as PyTorch's harness), else a no-op."""
    if dtype != "amp":
        return torch.autocast(device_type=device, enabled=False)
    return torch.autocast(device_type=device, dtype=torch.bfloat16 if device == "cpu" else torch.float16)


TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "amp": torch.float32}
