"""What Inductor generated for the timed model, and where the compiled step spends its time (imports torch).

- ``capture``: a context manager around the compiled warm-up that keeps the output code of every graph Inductor
  produces. It sets ``GraphLowering.save_output_code``, the hook PyTorch's own ``run_and_get_code`` uses
  (torch/_inductor/utils.py); Inductor calls it with the module's source both when it generates the code
  (torch/_inductor/graph.py, ``GraphLowering.codegen_with_cpp_wrapper``/``compile_to_module`` path) and when it loads a
  graph from its FX graph cache (torch/_inductor/codecache.py, ``FxGraphCache._lookup_graph``), so a warm cache is
  fingerprinted like a cold one (pytorch/pytorch at 5c4886908584029761b579af026dcfb627c84070, torch 2.14.1). It
  changes nothing Inductor compiles: the timed model is the code a user's ``torch.compile`` gets.
- ``kernel_profile``: a few compiled steps under torch.profiler after the timed loop (never during it); the top
  kernels by self time (perfdash.generated_code.top_kernels): on CPU every CPU event (Inductor's C++ kernels by name,
  oneDNN/MKL calls as their aten ops), on CUDA the device kernels (Triton and library kernels). Inductor's C++
  kernels are named for those steps only (``named_cpp_kernels``). They are not compiled with
  ``cpp.enable_kernel_profile`` (a RECORD_FUNCTION compiled into each kernel), as the worker did until 2026-11-29:
  that made the C++ compiler's CPU time 1.17-1.26x on dcgan and 1.49x on phlippe_densenet and put a hook into every
  kernel call of the timed loop, so the compile latency and the timed model were not what PyTorch's harness or a
  user gets (bench/README.md).
"""

from __future__ import annotations

import os
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from perfdash.generated_code import CodeFingerprint, KernelTime, fingerprint, normalise, pack_source, top_kernels

PROFILE_STEPS = 3  # compiled steps under the profiler, at most
# Seconds of profiled steps enough for the kernel table: a step this long holds every kernel many times over, and
# more steps of it only add to the model's wall time (pytorch_unet: 4 steps of 5.5 s made perfdash's wall longer than
# PyTorch's harness's, which profiles nothing; issue 42's harness-cost target).
PROFILE_BUDGET_S = 1.0


def profile_steps(step_s: float, budget_s: float = PROFILE_BUDGET_S, most: int = PROFILE_STEPS) -> int:
    """How many compiled steps of ``step_s`` seconds (the timed loop's median) to profile: as many as fit in
    ``budget_s``, at least one, at most ``most``."""
    if not step_s > 0:
        return most
    return max(1, min(most, int(budget_s / step_s)))


def profile_warm_call(step_s: float, budget_s: float = PROFILE_BUDGET_S) -> bool:
    """Whether the profile starts with its warm-up call: not for a step of ``budget_s`` or more, against which the
    profiler's first-event costs (milliseconds) are nothing, and which would double the profile's cost."""
    return not step_s >= budget_s


def _roots() -> list[str]:
    """Directories whose paths may appear in output code: Inductor's and Triton's caches, the temporary dir, home,
    the working directory."""
    candidates = [os.environ.get("TORCHINDUCTOR_CACHE_DIR"), os.environ.get("TRITON_CACHE_DIR"),
                  tempfile.gettempdir(), os.environ.get("TMPDIR"), str(Path.home()), os.getcwd()]
    with suppress(ImportError):  # a torch without this helper: the environment's paths above still cover it
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        candidates.append(cache_dir())
    return [c for c in candidates if c]


@dataclass(slots=True)
class Captured:
    """The output code of the graphs compiled inside ``capture``, normalised."""

    graphs: list[str] = field(default_factory=list)

    @property
    def fingerprint(self) -> CodeFingerprint | None:
        return fingerprint(self.graphs) if self.graphs else None

    @property
    def packed_source(self) -> str | None:
        return pack_source(self.graphs) if self.graphs else None


@contextmanager
def capture() -> Iterator[Captured]:
    from torch._inductor.graph import GraphLowering

    captured = Captured()
    roots = _roots()
    previous = GraphLowering.save_output_code

    def save(code: str) -> None:
        captured.graphs.append(normalise(code, roots))
        if previous is not None:
            previous(code)

    GraphLowering.save_output_code = save
    try:
        yield captured
    finally:
        GraphLowering.save_output_code = previous


def _named(name: str, kernel: Callable[..., Any]) -> Callable[..., Any]:
    from torch.autograd.profiler import record_function

    def call(*args: Any) -> Any:
        with record_function(name):
            return kernel(*args)

    return call


@contextmanager
def named_cpp_kernels() -> Iterator[None]:
    """While inside, every C++ kernel of the output code Inductor loaded in this process runs under a profiler event
    named after it (its name in the output code, as the fingerprint names it). The output code
    calls its kernels through module globals (``cpp_fused_relu_0 = async_compile.cpp_pybinding(...)``, loaded as a
    built-in named ``kernel``), so wrapping those globals names them without compiling anything again; the wrapper's
    own cost lands in the profiled steps only, never in the timed loop."""
    from torch._inductor.codecache import PyCodeCache

    wrapped: list[tuple[dict[str, Any], str, Any]] = []
    for module in list(PyCodeCache.modules):
        namespace = vars(module)
        for name, value in list(namespace.items()):
            if isinstance(value, types.BuiltinFunctionType) and value.__name__ == "kernel":
                namespace[name] = _named(name, value)
                wrapped.append((namespace, name, value))
    try:
        yield
    finally:
        for namespace, name, value in wrapped:
            namespace[name] = value


def kernel_profile(step: Callable[[], Any], device: str, steps: int = PROFILE_STEPS,
                   warm_call: bool = True) -> tuple[KernelTime, ...]:
    """The top kernels of ``steps`` profiled calls of ``step`` (already warm).

    With ``warm_call`` one more call runs first under the profiler's warm-up (recorded by nothing): the profiler's own
    first-event costs land there instead of in a kernel's time. Without it, a library kernel's first profiled call
    read up to 100x its later ones (mkl::_mkl_linear of a tiny MLP: 2,180 us per step in one process, 18 us in the
    next). Those costs are milliseconds: a step of a second or more (``profile_warm_call``) goes without."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with (
        named_cpp_kernels() if device == "cpu" else nullcontext(),
        profile(activities=activities,
                schedule=schedule(wait=0, warmup=1 if warm_call else 0, active=steps, repeat=1)) as prof,
    ):
        if warm_call:
            step()  # the profiler's warm-up call
            prof.step()
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(steps):
            step()
            prof.step()
        if device == "cuda":
            torch.cuda.synchronize()
        step_us = (time.perf_counter() - start) * 1e6 / steps
    totals: dict[str, tuple[float, int]] = {}
    for event in prof.key_averages():
        if device == "cuda":
            if event.device_type != DeviceType.CUDA:
                continue
            self_us = float(event.self_device_time_total)
        else:
            self_us = float(event.self_cpu_time_total)
        if self_us > 0:
            totals[event.key] = (self_us, int(event.count))
    return top_kernels(totals, steps, step_us)
