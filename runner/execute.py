"""What a worker does with one job: build the model, check accuracy, measure performance (imports torch).

Order: load -> accuracy's eager runs (fp64 reference, 1st, 2nd) -> performance (eager warm-up, compiled warm-up =
compilation, activation peak of one eager and one compiled step, interleaved timing) -> the result so far, sent to
the parent -> for Inductor the diagnostics (a few compiled steps under torch.profiler for the kernel table, the
output code's fingerprint), each capped by the parent (runner.protocol.DIAGNOSTIC_PHASES) -> accuracy's compiled run.
Inductor's output code is captured while the compiled warm-up compiles (runner.generated_code). The diagnostics
cannot move after the accuracy check's compiled run: it resets Dynamo, and the timed model's compiled step with it.
A diagnostic that raises only leaves its part empty (``WorkerResult.diagnostics_cut``); one the parent kills over its
budget leaves the partial result, whose timings are kept.
Performance comes before any compilation so its compiled warm-up measures a real compile. The accuracy check is
PyTorch's check_accuracy: each of its runs is a fresh copy of the pristine model run ACCURACY_ITERATIONS times, the
compiled one compiled from scratch, all under PyTorch's accuracy settings (runner.check_settings), which the timed
phases run without, as PyTorch's performance runs do; at the suite's accuracy batch size (Job.accuracy_batch_size),
on a second build of the same weights when that differs from the timed batch size.

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
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch

from perfdash.contract import GraphStats
from perfdash.generated_code import KernelTime
from runner import accuracy as acc
from runner.backends import BACKEND_SPECS
from runner.backends.worker import LazyBackendModel
from runner.check_settings import accuracy_settings
from runner.contention import ContentionMeter
from runner.generated_code import Captured, capture, kernel_profile, profile_steps, profile_warm_call
from runner.measure import TORCH_DTYPES, PeakMemory, autocast, timed, warmup
from runner.optimizer import make_optimizer
from runner.protocol import (
    PHASE_ACCURACY_COMPILED,
    PHASE_COMPILE,
    PHASE_COMPILE_SETUP,
    PHASE_EAGER_1ST,
    PHASE_EAGER_2ND,
    PHASE_EAGER_WARMUP,
    PHASE_FINGERPRINT,
    PHASE_FP64,
    PHASE_KERNEL_PROFILE,
    PHASE_LOAD,
    PHASE_MEASURE,
    PHASE_MEMORY,
    PHASE_VALIDATE,
    Failure,
    Job,
    Performance,
    WorkerResult,
    loop_continues,
)
from runner.suites.builders import BuildContext, BuiltModel, build

SEED = 1337
ACCURACY_ITERATIONS = 2  # iterations per accuracy run: PyTorch's --iterations default, as its run_n_iterations uses


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


def make_step(module: torch.nn.Module, p: Prepared, job: Job, use_autocast: bool = True,
              checking_accuracy: bool = False, compile_options: dict[str, Any] | None = None) -> Callable[[], Any]:
    """One iteration: a no-grad forward (inference) or zero_grad + forward + backward + the optimizer's step, where
    PyTorch's harness has an optimizer (training; see runner.optimizer). With ``compile_options`` the iteration is
    compiled with ``torch.compile`` (``compile_step``); inference turns grad off outside the compiled frame, as
    PyTorch's harness calls its iteration under ``pick_grad``: Inductor freezes weights only in a graph compiled with
    grad off."""
    amp = job.dtype if use_autocast else "float32"
    if job.mode == "inference":
        def forward() -> Any:
            with autocast(job.device, amp):
                return module(*p.args, **p.kwargs)

        body = forward if compile_options is None else torch.compile(forward, **compile_options)

        def infer() -> Any:
            with torch.no_grad():
                return body()

        return infer
    optimizer = make_optimizer(job.spec.name, job.device, job.backend, module.parameters(), checking_accuracy)

    def train() -> Any:
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
        else:
            module.zero_grad(set_to_none=True)
        with autocast(job.device, amp):
            out = module(*p.args, **p.kwargs)
            loss = p.loss(out)
        loss.backward()
        if optimizer is not None:
            optimizer.step()
        return out, loss.detach()

    return train if compile_options is None else torch.compile(train, **compile_options)


def compile_step(module: torch.nn.Module, p: Prepared, job: Job, notes: dict[str, str] | None = None,
                 checking_accuracy: bool = False) -> Callable[[], Any]:
    """The compiled iteration, compiled as PyTorch's harness compiles it: the whole step function is Dynamo's root
    frame (``optimize_ctx(self.model_iter_fn)`` in benchmarks/dynamo/common.py, both in ``check_accuracy`` and in the
    performance run), not the module. It matters to the graph-break count: a break inside the model also breaks the
    step's frame, one more break than compiling the module counts, and PyTorch's expected-accuracy files count it.
    A backend that is not Dynamo's (ONNX Runtime, OpenVINO, TensorRT: runner.backends) compiles the module."""
    if job.backend in BACKEND_SPECS:
        backend_model = LazyBackendModel(module, job, notes if notes is not None else {})
        # only called, never trained: the other backends measure inference (runner.backends refuses training)
        return make_step(backend_model, p, job, checking_accuracy=checking_accuracy)  # type: ignore[arg-type]
    mode = None if job.compile_mode == "default" else job.compile_mode
    if mode == "max-autotune" and job.disable_cudagraphs:
        mode = "max-autotune-no-cudagraphs"  # max-autotune's options turn CUDA graphs on; this one is it without
    options = {"backend": job.backend, "mode": mode, "dynamic": True if job.dynamic_shapes else None}
    return make_step(module, p, job, checking_accuracy=checking_accuracy, compile_options=options)


def reset_rng_state() -> None:
    """Every generator a model may draw from, seeded as PyTorch's harness seeds them before each accuracy run."""
    torch.manual_seed(SEED)
    random.seed(SEED)
    np_random = getattr(sys.modules.get("numpy"), "random", None)  # numpy only if something imported it
    if np_random is not None:
        np_random.seed(SEED)


def collect(module: torch.nn.Module, step: Callable[[], Any], job: Job) -> list[Any]:
    """One accuracy run, as PyTorch's check_accuracy does each: seeded, ACCURACY_ITERATIONS iterations of which the
    last one's results are kept (run_n_iterations). Inference keeps the output; training what PyTorch's
    collect_results keeps: the loss, every parameter's gradient (zero where there is none), the parameters after the
    step and the buffers."""
    reset_rng_state()
    for _ in range(ACCURACY_ITERATIONS - 1):
        step()
    out = step()
    if job.mode == "inference":
        return _detach(acc.compared_part(out))
    _, loss = out
    grads = {name: q.grad if q.grad is not None else torch.zeros_like(q) for name, q in module.named_parameters()}
    return _detach([loss, grads, dict(module.named_parameters()), dict(module.named_buffers())])


def _detach(value: Any) -> list[Any]:
    return [leaf.detach().clone() if isinstance(leaf, torch.Tensor) else leaf for leaf in acc.flatten(value)]


def graph_stats() -> dict[str, int]:
    """Dynamo's counters as PyTorch's get_dynamo_stats reads them (the CSVs' STAT_COLUMNS)."""
    from torch._dynamo.utils import counters

    breaks = counters["graph_break"]
    return {"calls_captured": int(counters["stats"]["calls_captured"]),
            "unique_graphs": int(counters["stats"]["unique_graphs"]),
            # frames Dynamo saw but could not convert, which ran eagerly
            "fallbacks_to_eager": int(counters["frames"]["total"] - counters["frames"]["ok"]),
            "graph_breaks": int(sum(breaks.values())), "unique_graph_breaks": len(+breaks),
            "autograd_captures": int(counters["compiled_autograd"]["captures"]),
            "autograd_compiles": int(counters["compiled_autograd"]["compiles"]),
            "cudagraph_skips": int(counters["inductor"]["cudagraph_skips"])}


def compile_wall_time() -> float:
    """Seconds Dynamo has spent compiling in this process (PyTorch's accuracy row reports this for its check)."""
    from torch._dynamo.utils import calculate_time_spent

    return float(calculate_time_spent()["total_wall_time"])


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


def run_job(job: Job, emit: Callable[[str], None],
            partial: Callable[[WorkerResult], None] | None = None) -> WorkerResult:
    """``partial``: where the result so far goes before the diagnostics (the worker sends it to the parent)."""
    timings: dict[str, float] = {}
    phases = Phases(emit, timings)
    performance: Performance | None = None
    check = AccuracyCheck()
    notes: dict[str, str] = {}  # what a non-Dynamo backend reports (the exporter), for the manifest
    cut: dict[str, str] = {}  # diagnostics that raised
    if job.accuracy and job.tolerance.skip and not job.performance:
        # PyTorch records pass_due_to_skip for such a model (huggingface.yaml's large models) without comparing
        # anything; its load_model builds and validates the model first, which PyTorch's CI machines can hold and a
        # 24 GiB one cannot (BlenderbotForCausalLM: 2.5B parameters, twice in float32). An accuracy-only job
        # has nothing else to do with the model, so it is not built.
        return WorkerResult(name=job.spec.name, batch_size=job.batch_size, accuracy="pass_due_to_skip",
                            timings=timings, accuracy_stats=dict.fromkeys(graph_stats(), 0), accuracy_compile_s=0.0)
    try:
        with phases.enter(PHASE_LOAD):
            ctx = BuildContext(device=job.device, batch_size=job.batch_size, training=job.mode == "training")
            torch.manual_seed(SEED)
            built = build(job.spec, ctx)
            base = prepare(built, job)
            check_built, check_base = built, base
            if job.accuracy and job.accuracy_batch_size not in (None, job.batch_size):
                torch.manual_seed(SEED)  # the same weights, inputs of the check's batch size
                check_built = build(job.spec, replace(ctx, batch_size=job.accuracy_batch_size))
                check_base = prepare(check_built, job)
        with phases.enter(PHASE_VALIDATE):
            _validate(base, check_base, job)
        if job.accuracy and job.tolerance.skip:
            check.status, check.stats, check.compile_s = "pass_due_to_skip", dict.fromkeys(graph_stats(), 0), 0.0
        elif job.accuracy:
            with accuracy_settings(job.spec.name):
                _check_eager(check_built, check_base, job, phases, check)
        if job.performance:
            timed = _measure(base, job, phases, notes)
            performance = timed.performance
            if partial is not None:  # what a later step cannot take away (runner.process keeps it)
                partial(WorkerResult(name=job.spec.name, batch_size=job.batch_size, performance=performance,
                                     accuracy=check.status, timings=dict(timings), accuracy_stats=check.stats,
                                     accuracy_compile_s=check.compile_s, backend_notes=dict(notes)))
            performance = _diagnose(timed, job, phases, cut)
        if job.accuracy and check.status is None:
            with phases.enter(PHASE_ACCURACY_COMPILED), accuracy_settings(job.spec.name):
                _check_compiled(check_base, job, check, notes)
    except Exception as exc:  # noqa: BLE001 - any failure of the model becomes its status row
        failure = Failure(phase=phases.current, kind="oom" if is_oom(exc) else "error",
                          message=f"{type(exc).__name__}: {exc}"[:2000])
        return WorkerResult(name=job.spec.name, batch_size=job.batch_size, performance=performance,
                            accuracy=check.status, failure=failure, timings=timings, accuracy_stats=check.stats,
                            accuracy_compile_s=check.compile_s, backend_notes=notes, diagnostics_cut=cut)
    return WorkerResult(name=job.spec.name, batch_size=job.batch_size, performance=performance,
                        accuracy=check.status, timings=timings, accuracy_stats=check.stats,
                        accuracy_compile_s=check.compile_s, backend_notes=notes, diagnostics_cut=cut)


def _validate(base: Prepared, check_base: Prepared, job: Job) -> None:
    """One eager iteration of a fresh copy of each model the job runs, as PyTorch's load_model validates a model
    before any measurement (in an accuracy run under the check's settings): a model that cannot run eagerly is
    eager_fail_to_run, whatever the phase would have been. A model checked and timed at the same batch size is
    validated once, under the check's settings."""
    if job.accuracy:
        with accuracy_settings(job.spec.name):
            m = _accuracy_copy(check_base, job)
            make_step(m, check_base, job, checking_accuracy=True)()
    if job.performance and (not job.accuracy or check_base is not base):
        m = copy.deepcopy(base.module)
        make_step(m, base, job)()


@dataclass(slots=True)
class AccuracyCheck:
    """What the accuracy check has found so far: the eager results it compares against, and once decided, the status
    and the Dynamo counters and compile seconds of its compiled run (zero when it stopped before compiling)."""

    eager: list[Any] | None = None
    fp64: list[Any] | None = None
    status: str | None = None
    stats: dict[str, int] | None = None
    compile_s: float | None = None


def _accuracy_copy(base: Prepared, job: Job) -> torch.nn.Module:
    """A fresh copy of the pristine model for one run of the check. PyTorch checks torchbench models in eval mode
    even in training (its --accuracy sets use_eval_mode for every suite but timm_models and huggingface)."""
    module = copy.deepcopy(base.module)
    if job.suite == "torchbench":
        module.eval()
    return module


def _check_eager(built: BuiltModel, base: Prepared, job: Job, phases: Phases, check: AccuracyCheck) -> None:
    """The check's eager half, as PyTorch's check_accuracy: the fp64 reference, then eager twice, which must agree
    bit for bit."""
    with phases.enter(PHASE_FP64):
        check.fp64 = _fp64_reference(built, base, job)
    with phases.enter(PHASE_EAGER_1ST):
        m = _accuracy_copy(base, job)
        check.eager = collect(m, make_step(m, base, job, checking_accuracy=True), job)
    with phases.enter(PHASE_EAGER_2ND):
        m = _accuracy_copy(base, job)
        rerun = collect(m, make_step(m, base, job, checking_accuracy=True), job)
    if not acc.exactly_same(check.eager, rerun, equal_nan=_equal_nan(job)):
        check.status = "eager_two_runs_differ"
        check.stats, check.compile_s = dict.fromkeys(graph_stats(), 0), 0.0


def _check_compiled(base: Prepared, job: Job, check: AccuracyCheck, notes: dict[str, str]) -> None:
    """The compiled half: a fresh copy compiled from scratch (Dynamo reset, counters cleared), compared with eager.
    Without an fp64 reference the comparison is by cosine similarity, as PyTorch falls back to."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    compile_start = compile_wall_time()
    try:
        m = _accuracy_copy(base, job)
        compiled_result = collect(m, compile_step(m, base, job, notes, checking_accuracy=True), job)
    finally:
        check.stats, check.compile_s = graph_stats(), compile_wall_time() - compile_start
        if not _dynamo_graph(job):
            check.stats = check.compile_s = None  # no Dynamo graph: its counters and compile time say nothing
    tol = job.tolerance
    # Quantization changes the numbers by design: judged on cosine similarity, the comparison PyTorch's same()
    # offers (its --cosine) for results that cannot meet an elementwise tolerance.
    cosine = tol.cosine or check.fp64 is None or job.quantize is not None
    agree = acc.same(check.eager, compiled_result, check.fp64, tol.tol, cosine,
                     equal_nan=_equal_nan(job), larger_multiplier=tol.larger_multiplier)
    check.status = "pass" if agree else "fail_accuracy"


def _equal_nan(job: Job) -> bool:
    """PyTorch's equal_nan: NaNs compare equal except in float32 runs."""
    return job.dtype != "float32"


def _fp64_reference(built: BuiltModel, base: Prepared, job: Job) -> list[Any] | None:
    """The fp64 result of the same weights; None when the model cannot run in fp64 (PyTorch then compares by cosine
    similarity)."""
    try:
        ref = Prepared(module=_accuracy_copy(base, job).to(torch.float64),
                       args=_to(base.args, job.device, torch.float64),
                       kwargs=_to(base.kwargs, job.device, torch.float64), loss=base.loss)
        return collect(ref.module, make_step(ref.module, ref, job, use_autocast=False, checking_accuracy=True), job)
    except Exception as exc:  # noqa: BLE001 - an fp64 failure only weakens the check
        print(f"fp64 reference failed, comparing without it: {type(exc).__name__}: {exc}", flush=True)
        return None


def _dynamo_graph(job: Job) -> bool:
    spec = BACKEND_SPECS.get(job.backend)
    return spec is None or spec.dynamo_graph


@dataclass(frozen=True, slots=True)
class Timed:
    """The timed results, and what the diagnostics after them need: the timed model's compiled step (warm) and the
    output code captured while it compiled (Inductor only; None for other backends, which have no diagnostics)."""

    performance: Performance
    compiled_step: Callable[[], Any]
    code: Captured | None


def _diagnose(timed: Timed, job: Job, phases: Phases, cut: dict[str, str]) -> Performance:
    """The kernel profile and the code fingerprint of Inductor's timed model, each in its phase (whose budget the
    parent enforces); one that raises leaves its part empty and says why in ``cut``."""
    if timed.code is None or not job.diagnostics:
        return timed.performance
    kernels: tuple[KernelTime, ...] = ()
    with phases.enter(PHASE_KERNEL_PROFILE):
        try:
            step_s = statistics.median(timed.performance.compiled_ms) / 1000
            kernels = kernel_profile(timed.compiled_step, job.device, steps=profile_steps(step_s),
                                     warm_call=profile_warm_call(step_s))
        except Exception as exc:  # noqa: BLE001 - a profile that fails only leaves the kernel table empty
            cut[PHASE_KERNEL_PROFILE] = f"raised {type(exc).__name__}: {exc}"[:2000]
            print(f"kernel profile failed: {type(exc).__name__}: {exc}", flush=True)
    fingerprinted = packed = None
    with phases.enter(PHASE_FINGERPRINT):  # bench/code_change.py reports its cost
        try:
            fingerprinted, packed = timed.code.fingerprint, timed.code.packed_source
        except Exception as exc:  # noqa: BLE001 - a fingerprint that fails only leaves the code empty
            cut[PHASE_FINGERPRINT] = f"raised {type(exc).__name__}: {exc}"[:2000]
    return replace(timed.performance, code=fingerprinted, kernel_times=kernels, code_source=packed)


def print_cache_lookups() -> None:
    """Into the model's log: how the compiled warm-up's graphs fared in Inductor's caches (FX graph, AOTAutograd:
    hits, misses, bypasses). A later worker of ``perfdash run --processes K`` recompiles in full where they bypass:
    on CPU inference, whose freezing AOTAutograd's cache refuses and whose prepacked (mkldnn) weights the FX graph
    cache cannot key (torch 2.14)."""
    from torch._dynamo.utils import counters

    lookups = {**{k: v for k, v in counters["inductor"].items() if k.startswith("fxgraph_cache_")},
               **{k: v for k, v in counters["aot_autograd"].items() if k.startswith("autograd_cache_")}}
    print("compile caches: " + (" ".join(f"{k}={v}" for k, v in sorted(lookups.items())) or "no lookups"),
          flush=True)


def start_compile_pool() -> None:
    """Start Inductor's compile-worker pool where Inductor would use one, as torch._dynamo's ``inductor`` backend
    does on its first call (``maybe_warm_pool``; PyTorch's harness compiles through that backend; ``torch.compile``
    does not call it). Called inside the compiled warm-up, so compile latency pays the pool's start as a fresh
    process of PyTorch's harness does (issue 42). A torch without the function has no such start to pay."""
    try:
        from torch._inductor.async_compile import maybe_warm_pool
    except ImportError:
        return
    maybe_warm_pool()


def _measure(base: Prepared, job: Job, phases: Phases, notes: dict[str, str]) -> Timed:
    """Timings, peak memory and graph stats.

    What is alive matches PyTorch's performance process, so that its resident-set peak memory counts the same
    weights. There, ``run()`` keeps the loaded model while ``run_performance_test`` times a deep copy of it
    (``deepcopy_and_maybe_parallelize``) and warms eager up on a further copy (benchmarks/dynamo/common.py,
    pytorch/pytorch at 00391a7e): three copies of the weights in the eager reading, two in the compiled one. Here
    ``base`` is the loaded model, which stays alive (and pristine, for the accuracy check's compiled run), the timed
    model is its copy and the eager warm-up runs on a copy of that.
    """
    from torch._dynamo.utils import counters

    model = copy.deepcopy(base.module)
    with phases.enter(PHASE_EAGER_WARMUP):
        eager_warm = warmup(make_step(copy.deepcopy(model), base, job), job.warmup, job.device)
    inductor = job.backend == "inductor"
    with phases.enter(PHASE_COMPILE), ExitStack() as compiling:
        torch._dynamo.reset()
        counters.clear()
        compiled_step = compile_step(model, base, job, notes)
        captured: list[Captured] = []

        def first_compile_setup() -> None:
            captured.append(compiling.enter_context(capture()) if inductor else Captured())
            if inductor and job.warm_compile_pool:
                start_compile_pool()

        compiled_warm = warmup(compiled_step, job.warmup, job.device, setup=first_compile_setup)
        phases.record(PHASE_COMPILE_SETUP, compiled_warm.setup_seconds)
        stats = graph_stats() if _dynamo_graph(job) else {}
    if inductor:
        print_cache_lookups()
    code = captured[0]
    eager_step = make_step(model, base, job)
    with phases.enter(PHASE_MEMORY):  # both steps are warm: neither compilation nor first-call caches count
        # Inference frees nothing a step did not allocate, so one profiled call each is exact (and is cheaper).
        memory = PeakMemory(job.device, primed=job.mode == "training")
        eager_activation = memory.measure(eager_step)
        # A backend with its own allocator (ONNX Runtime, OpenVINO, TensorRT) is invisible to torch's: its activation
        # peak, and on CUDA its max_memory_allocated(), stay empty (CPU's resident set sees every allocator).
        spec = BACKEND_SPECS.get(job.backend)
        torch_allocator = spec is None or spec.torch_allocator
        dynamo_activation = memory.measure(compiled_step) if torch_allocator else None
    with phases.enter(PHASE_MEASURE):
        eager_ms: list[float] = []
        compiled_ms: list[float] = []
        start = time.perf_counter()
        with ContentionMeter() as contention:  # read around the loop, nothing inside it
            while loop_continues(len(eager_ms), time.perf_counter() - start, job.repeat, job.min_loop_s):
                seconds, _ = timed(eager_step, job.device)
                eager_ms.append(seconds * 1000)
                seconds, _ = timed(compiled_step, job.device)
                compiled_ms.append(seconds * 1000)
        phases.record("timed_loop_wall", time.perf_counter() - start)
        phases.record("timed", (sum(eager_ms) + sum(compiled_ms)) / 1000)
    performance = Performance(eager_ms=tuple(eager_ms), compiled_ms=tuple(compiled_ms),
                              compilation_latency=max(compiled_warm.seconds - eager_warm.seconds, 0.0),
                              eager_peak_mem=eager_warm.peak_mem,
                              dynamo_peak_mem=compiled_warm.peak_mem if torch_allocator or job.device == "cpu"
                              else None,
                              eager_activation_peak_mem=eager_activation,
                              dynamo_activation_peak_mem=dynamo_activation, stats=GraphStats(**stats),
                              contention=(contention.result,) if contention.result is not None else ())
    return Timed(performance=performance, compiled_step=compiled_step, code=code if inductor else None)

