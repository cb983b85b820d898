"""What a worker does with one job: build the model, check accuracy, measure performance (imports torch).

Order: load -> accuracy's eager runs (1st, 2nd, fp64 reference) -> performance (eager warm-up, compiled warm-up =
compilation, activation peak of one eager and one compiled step, interleaved timing) -> accuracy's compiled run.
Performance comes before any compilation so its compiled warm-up measures a real compile; in inference the accuracy
check reuses the timed compiled model, in training it compiles a fresh copy of the same weights.

The performance part follows ``run_performance_test`` in PyTorch's benchmarks/dynamo/common.py: the eager warm-up
runs ``job.warmup`` iterations on a deep copy of the model, the compiled warm-up as many on the model itself, and the
timed loop runs eager and compiled on that one model. Each warm-up gives PyTorch's peak memory
(runner.measure.warmup) and compile latency is the compiled warm-up minus the eager one. perfdash's own activation
peak is measured between the warm-ups and the timed loop: its profiled calls (CPU memory is replayed from
torch.profiler's memory events, see runner.measure.PeakMemory) are the timed loop's last warm-up iterations, and the
profiler is off again before the first timed call.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from runner import accuracy as acc
from runner.measure import TORCH_DTYPES, PeakMemory, autocast, timed, warmup
from runner.protocol import (
    PHASE_ACCURACY_COMPILED,
    PHASE_COMPILE,
    PHASE_EAGER_1ST,
    PHASE_EAGER_2ND,
    PHASE_EAGER_WARMUP,
    PHASE_FP64,
    PHASE_LOAD,
    PHASE_MEASURE,
    PHASE_MEMORY,
    Failure,
    Job,
    Performance,
    WorkerResult,
)
from runner.suites.builders import BuildContext, BuiltModel, build

SEED = 1337


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, (MemoryError, torch.OutOfMemoryError)) or "out of memory" in str(exc).lower()


def configure_threads(threads: int | None) -> None:
    """``--threads 1`` is single-core single-thread: pinned to one core; N > 1 sets the intra-op pool size."""
    if threads is None:
        return
    if threads == 1 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    torch.set_num_threads(threads)


def _to(value: Any, device: str, dtype: torch.dtype | None) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.to(device)
        return value.to(dtype) if dtype is not None and value.is_floating_point() else value
    if isinstance(value, dict):
        return {k: _to(v, device, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device, dtype) for v in value)
    return value


@dataclass(slots=True)
class Prepared:
    """The pristine model (never run) and its inputs, on the job's device and dtype."""

    module: torch.nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    loss: Callable[[Any], torch.Tensor]


def prepare(built: BuiltModel, job: Job, dtype: torch.dtype | None = None) -> Prepared:
    target = dtype if dtype is not None else (None if job.dtype in ("float32", "amp") else TORCH_DTYPES[job.dtype])
    module = built.module.to(job.device)
    if target is not None:
        module = module.to(target)
    module.train(job.mode == "training")
    return Prepared(module=module, args=_to(built.args, job.device, target),
                    kwargs=_to(built.kwargs, job.device, target), loss=built.loss or acc.scalar_loss)


def make_step(module: torch.nn.Module, p: Prepared, job: Job, use_autocast: bool = True) -> Callable[[], Any]:
    """One iteration: a no-grad forward (inference) or forward + backward + optimizer step (training)."""
    amp = job.dtype if use_autocast else "float32"
    if job.mode == "inference":
        def infer() -> Any:
            with torch.no_grad(), autocast(job.device, amp):
                return module(*p.args, **p.kwargs)

        return infer
    params = [q for q in module.parameters() if q.requires_grad]
    optimizer = torch.optim.SGD(params, lr=0.01)

    def train() -> Any:
        optimizer.zero_grad(set_to_none=True)
        with autocast(job.device, amp):
            out = module(*p.args, **p.kwargs)
            loss = p.loss(out)
        loss.backward()
        optimizer.step()
        return out, loss.detach()

    return train


def compiled(module: torch.nn.Module, job: Job) -> Callable[..., Any]:
    mode = None if job.compile_mode == "default" else job.compile_mode
    return torch.compile(module, backend=job.backend, mode=mode, dynamic=True if job.dynamic_shapes else None)


def collect(module: torch.nn.Module, step: Callable[[], Any], job: Job) -> list[Any]:
    """One seeded iteration's results: outputs, and in training the loss and every parameter's gradient."""
    torch.manual_seed(SEED)
    out = step()
    if job.mode == "inference":
        return [_detach(out)]
    grads = [q.grad.detach().clone() for q in module.parameters() if q.grad is not None]
    return [_detach(out), grads]


def _detach(value: Any) -> Any:
    return [leaf.detach().clone() if isinstance(leaf, torch.Tensor) else leaf for leaf in acc.flatten(value)]


def graph_stats() -> dict[str, int]:
    from torch._dynamo.utils import counters

    breaks = counters["graph_break"]
    return {"calls_captured": int(counters["stats"]["calls_captured"]),
            "unique_graphs": int(counters["stats"]["unique_graphs"]),
            "graph_breaks": int(sum(breaks.values())), "unique_graph_breaks": len(breaks)}


class Phases:
    """Announces each phase to the parent and remembers the current one for error reports."""

    def __init__(self, emit: Callable[[str], None], timings: dict[str, float]) -> None:
        self.current = PHASE_LOAD
        self._emit = emit
        self._timings = timings

    @contextmanager
    def enter(self, phase: str) -> Iterator[None]:
        self.current = phase
        self._emit(phase)
        start = time.perf_counter()
        try:
            yield
        finally:
            self.record(phase, time.perf_counter() - start)

    def record(self, name: str, seconds: float) -> None:
        self._timings[name] = self._timings.get(name, 0.0) + seconds


def run_job(job: Job, emit: Callable[[str], None]) -> WorkerResult:
    timings: dict[str, float] = {}
    phases = Phases(emit, timings)
    performance: Performance | None = None
    accuracy: str | None = None
    try:
        with phases.enter(PHASE_LOAD):
            ctx = BuildContext(device=job.device, batch_size=job.batch_size, training=job.mode == "training")
            torch.manual_seed(SEED)
            built = build(job.spec, ctx)
            base = prepare(built, job)
        eager_result = fp64_result = None
        if job.accuracy:
            with phases.enter(PHASE_EAGER_1ST):
                m = copy.deepcopy(base.module)
                eager_result = collect(m, make_step(m, base, job), job)
            with phases.enter(PHASE_EAGER_2ND):
                m = copy.deepcopy(base.module)
                rerun = collect(m, make_step(m, base, job), job)
            if not acc.exactly_same(eager_result, rerun):
                accuracy = "eager_two_runs_differ"
            else:
                with phases.enter(PHASE_FP64):
                    fp64_result = _fp64_reference(built, base, job)
        reusable: Callable[[], Any] | None = None
        if job.performance:
            performance, reusable = _measure(base, job, phases)
        if job.accuracy and accuracy is None:
            with phases.enter(PHASE_ACCURACY_COMPILED):
                if reusable is not None:
                    # Inference leaves the weights as they were: the timed compiled model is checked as it ran.
                    compiled_result = collect(base.module, reusable, job)
                else:
                    torch._dynamo.reset()
                    m = copy.deepcopy(base.module)
                    # Inductor's RNG differs from eager's; fall back to eager's for the comparison, as PyTorch does.
                    with torch._inductor.config.patch(fallback_random=True):
                        compiled_result = collect(m, make_step(compiled(m, job), base, job), job)
                tol = job.tolerance
                accuracy = ("pass" if acc.same(eager_result, compiled_result, fp64_result, tol.tol, tol.cosine)
                            else "fail_accuracy")
    except Exception as exc:  # noqa: BLE001 - any failure of the model becomes its status row
        failure = Failure(phase=phases.current, kind="oom" if is_oom(exc) else "error",
                          message=f"{type(exc).__name__}: {exc}"[:2000])
        return WorkerResult(name=job.spec.name, batch_size=job.batch_size, performance=performance,
                            accuracy=accuracy, failure=failure, timings=timings)
    return WorkerResult(name=job.spec.name, batch_size=job.batch_size, performance=performance, accuracy=accuracy,
                        timings=timings)


def _fp64_reference(built: BuiltModel, base: Prepared, job: Job) -> list[Any] | None:
    """The fp64 result of the same weights; None when the model cannot run in fp64 (PyTorch then skips it)."""
    try:
        ref = Prepared(module=copy.deepcopy(base.module).to(torch.float64),
                       args=_to(base.args, job.device, torch.float64),
                       kwargs=_to(base.kwargs, job.device, torch.float64), loss=base.loss)
        return collect(ref.module, make_step(ref.module, ref, job, use_autocast=False), job)
    except Exception as exc:  # noqa: BLE001 - an fp64 failure only weakens the check
        print(f"fp64 reference failed, comparing without it: {type(exc).__name__}: {exc}", flush=True)
        return None


def _measure(base: Prepared, job: Job, phases: Phases) -> tuple[Performance, Callable[[], Any] | None]:
    """Timings, peak memory and graph stats; also the compiled step when the accuracy check may reuse it (inference).

    What is alive matches PyTorch's performance process, so that peak memory counts the same weights: the model plus
    the eager warm-up's deep copy during the eager warm-up, the model alone during the compiled one. Training keeps
    ``base`` untouched for the accuracy check and measures a copy; with accuracy on, that is one more copy of the
    weights than PyTorch's performance-only process holds.
    """
    from torch._dynamo.utils import counters

    model = copy.deepcopy(base.module) if job.mode == "training" and job.accuracy else base.module
    with phases.enter(PHASE_EAGER_WARMUP):
        eager_warm = warmup(make_step(copy.deepcopy(model), base, job), job.warmup, job.device)
    with phases.enter(PHASE_COMPILE):
        torch._dynamo.reset()
        counters.clear()
        compiled_step = make_step(compiled(model, job), base, job)
        compiled_warm = warmup(compiled_step, job.warmup, job.device)
        stats = graph_stats()
    eager_step = make_step(model, base, job)
    with phases.enter(PHASE_MEMORY):  # both steps are warm: neither compilation nor first-call caches count
        # Inference frees nothing a step did not allocate, so one profiled call each is exact (and is cheaper).
        memory = PeakMemory(job.device, primed=job.mode == "training")
        eager_activation = memory.measure(eager_step)
        dynamo_activation = memory.measure(compiled_step)
    with phases.enter(PHASE_MEASURE):
        eager_ms: list[float] = []
        compiled_ms: list[float] = []
        start = time.perf_counter()
        for _ in range(job.repeat):
            seconds, _ = timed(eager_step, job.device)
            eager_ms.append(seconds * 1000)
            seconds, _ = timed(compiled_step, job.device)
            compiled_ms.append(seconds * 1000)
        phases.record("timed_loop_wall", time.perf_counter() - start)
        phases.record("timed", (sum(eager_ms) + sum(compiled_ms)) / 1000)
    performance = Performance(eager_ms=tuple(eager_ms), compiled_ms=tuple(compiled_ms),
                              compilation_latency=max(compiled_warm.seconds - eager_warm.seconds, 0.0),
                              eager_peak_mem=eager_warm.peak_mem, dynamo_peak_mem=compiled_warm.peak_mem,
                              eager_activation_peak_mem=eager_activation,
                              dynamo_activation_peak_mem=dynamo_activation, **stats)
    return performance, (compiled_step if job.mode == "inference" else None)

