"""The parent <-> worker protocol (torch-free), in the manner of pyperf.

The parent has a worker started for each model (forked by the fork server, runner.zygote, or as ``python -m
runner.worker``), hands it one ``Job`` as JSON and reads JSON lines from it: ``{"event": "phase", "phase": P}``
before each phase (so a crash or a hang can be attributed to the phase it happened in), then one ``{"event":
"result", ...}`` line carrying a ``WorkerResult``. Whatever else the model prints goes to its log.

Diagnostics (the kernel profile, the code fingerprint) run after the timed loop and must never cost its results:
before the first of them the worker sends the result so far as ``{"event": "partial", ...}`` (a ``WorkerResult``),
each diagnostic (DIAGNOSTIC_PHASES) may run ``Job.diagnostic_budget_s``: the parent kills a worker still in one
when its budget is spent and keeps the partial result (runner.process).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from perfdash.contract import GraphStats, LoopContention
from perfdash.generated_code import CodeFingerprint, KernelTime
from runner.suites.base import ModelSpec, Tolerance

# 2: peak memory measured by the timing worker (no memory job, no Job.purpose); 3: PyTorch's peak memory from the
# warm-ups, perfdash's activation peak beside it; 4: partial results before the diagnostics, diagnostics' budgets;
# 5: Job.diagnostics (the performance-only workers of --processes K skip them); 6: Job.warm_compile_pool
PROTOCOL_VERSION = 6

# Phases in the order the worker runs them.
PHASE_LOAD = "load"
PHASE_VALIDATE = "eager_validate"  # one eager iteration of the loaded model, as PyTorch's load_model validates it
PHASE_EAGER_1ST = "eager_1st_run"  # accuracy: first eager run
PHASE_EAGER_2ND = "eager_2nd_run"  # accuracy: second eager run (must agree with the first)
PHASE_FP64 = "fp64_reference"  # accuracy: fp64 reference (its failure is tolerated, as in PyTorch)
PHASE_EAGER_WARMUP = "eager_warmup"  # performance
PHASE_COMPILE = "compile"  # performance: the compiled warm-up (compilation happens here)
PHASE_MEMORY = "memory"  # performance: activation peak of one eager and one compiled step (the timed loop's warm-up)
PHASE_MEASURE = "measure"  # performance: interleaved timing
PHASE_ACCURACY_COMPILED = "compiled_run"  # accuracy: the compiled model's output
PHASE_KERNEL_PROFILE = "kernel_profile"  # performance: compiled steps under torch.profiler, after the timed loop
PHASE_FINGERPRINT = "fingerprint"  # performance: the captured output code's fingerprint and packed source
PHASES = (PHASE_LOAD, PHASE_VALIDATE, PHASE_EAGER_1ST, PHASE_EAGER_2ND, PHASE_FP64, PHASE_EAGER_WARMUP, PHASE_COMPILE,
          PHASE_MEMORY, PHASE_MEASURE, PHASE_KERNEL_PROFILE, PHASE_FINGERPRINT, PHASE_ACCURACY_COMPILED)
# Part of the compile phase, timed inside the compiled warm-up (so inside compile latency): what a fresh process's
# first compile pays before compiling (importing Inductor's compiler, starting its compile-worker pool), its own figure.
PHASE_COMPILE_SETUP = "compile_setup"
# What runs after the timed loop only to explain it: capped by Job.diagnostic_budget_s each, and never fatal.
DIAGNOSTIC_PHASES = frozenset({PHASE_KERNEL_PROFILE, PHASE_FINGERPRINT})
# Seconds each diagnostic may take (kernel profile, fingerprint) unless the run says otherwise.
DEFAULT_DIAGNOSTIC_BUDGET_S = 300.0


# The most pairs a worker's loop lengthened by a minimum time takes (a tiny step would otherwise fill the samples
# file): at 2,000 the median ratio's sampling error is already a tenth of 30 pairs'.
MAX_TIMED_PAIRS = 2000


def loop_continues(pairs: int, elapsed_s: float, repeat: int, min_loop_s: float) -> bool:
    """Whether a timed loop that has timed ``pairs`` eager/compiled pairs in ``elapsed_s`` takes another: until
    ``repeat``, then (pyperf's minimum time) while it has lasted less than ``min_loop_s``, up to MAX_TIMED_PAIRS
    (or ``repeat`` when that is more). A fixed count would give a 1 ms model's result 30 pairs' noise where a second
    of timing costs nothing beside its compile."""
    if pairs < repeat:
        return True
    return elapsed_s < min_loop_s and pairs < max(repeat, MAX_TIMED_PAIRS)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """What every model's job takes from its run as the run has it: the run's options (runner.options.RunOptions)
    have each field by the same name, and runner.api.make_job copies them by this declaration. A setting the worker
    needs is a field here and an option there. The configuration's axes among them are written out, not inherited
    from perfdash.axes.RunAxes: its import (pydantic) would cost every fork server and every rank its time."""

    device: str
    dtype: str
    mode: str
    backend: str
    compile_mode: str
    dynamic_shapes: bool
    threads: int | None
    repeat: int
    warmup: int
    # once ``repeat`` pairs are timed, go on until the loop has lasted this long (loop_continues); a
    # worker of ``--processes K`` gets its share, the run's figure / K (runner.api.make_job)
    min_loop_s: float = 0.0
    quantize: str | None = None  # onnxruntime's int8-dynamic (runner.backends)
    # Inductor on CUDA without CUDA graphs (the no_cudagraphs variant); the environment's TORCHINDUCTOR_CUDAGRAPHS
    # says the same to Inductor's configuration, this tells the worker to keep a compile mode from turning them on.
    disable_cudagraphs: bool = False
    diagnostic_budget_s: float = DEFAULT_DIAGNOSTIC_BUDGET_S  # per diagnostic phase (DIAGNOSTIC_PHASES)


def model_settings(source: object) -> dict[str, Any]:
    """The values of ModelSettings' fields of anything that has them as attributes (a run's options), by name."""
    return {setting.name: getattr(source, setting.name) for setting in fields(ModelSettings)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Job(ModelSettings):
    """One model of a run: the run's settings, and which model at which batch size, measured how."""

    suite: str
    spec: ModelSpec
    batch_size: int
    accuracy: bool
    performance: bool
    tolerance: Tolerance
    accuracy_batch_size: int | None = None  # the accuracy check's batch size; None: batch_size
    # the kernel profile and code fingerprint after the timed loop (DIAGNOSTIC_PHASES); off in the later workers of
    # ``perfdash run --processes K``, whose result keeps the first worker's
    diagnostics: bool = True
    # start Inductor's compile-worker pool inside the compiled warm-up, as a fresh process of PyTorch's harness does
    # (runner.execute.start_compile_pool): compile latency pays it. Off in the later workers of ``perfdash run
    # --processes K``, whose compile latency no result reports: Inductor then starts the pool itself where it uses
    # one (CUDA inputs: compile_fx wakes it as it begins), and on CPU it never does (C++ kernels build in threads,
    # their libraries cached on disk by source), so such a worker neither waits for the pool's start nor shares the
    # cores with the pool's processes importing torch.
    warm_compile_pool: bool = True

    def to_json(self) -> str:
        data = asdict(self)
        data["spec"] = self.spec.to_json()
        data["protocol"] = PROTOCOL_VERSION
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> Job:
        data = json.loads(text)
        if data.pop("protocol", None) != PROTOCOL_VERSION:
            raise ValueError(f"worker protocol mismatch: expected version {PROTOCOL_VERSION}")
        data["spec"] = ModelSpec.from_json(data["spec"])
        data["tolerance"] = Tolerance(**data["tolerance"])
        return cls(**data)


@dataclass(frozen=True, slots=True)
class Performance:
    """Timings in ms, compile latency in s, memory in GB of 10^9 bytes.

    ``eager_peak_mem``/``dynamo_peak_mem``: PyTorch's peak memory over each warm-up (runner.measure.warmup);
    ``*_activation_peak_mem``: perfdash's peak of one warm call above what was in use before it.
    """

    eager_ms: tuple[float, ...]
    compiled_ms: tuple[float, ...]
    compilation_latency: float
    eager_peak_mem: float | None
    dynamo_peak_mem: float | None
    eager_activation_peak_mem: float | None = None
    dynamo_activation_peak_mem: float | None = None
    stats: GraphStats = field(default_factory=GraphStats)  # Dynamo's counters (perfdash.contract.STAT_COLUMNS)
    # what Inductor generated and the profile after the timed loop (perfdash.generated_code; runner.generated_code)
    code: CodeFingerprint | None = None
    kernel_times: tuple[KernelTime, ...] = ()
    code_source: str | None = None
    # the worker process of each pair when the parent pooled several (runner.outcome.pool_processes); a worker
    # never sets it
    process: tuple[int, ...] = ()
    # what competed with the timed loop for the CPU (runner.contention): one entry from a worker, one per worker
    # that timed once pooled
    contention: tuple[LoopContention, ...] = ()

    def __post_init__(self) -> None:
        if not self.eager_ms or len(self.eager_ms) != len(self.compiled_ms):
            raise ValueError("eager and compiled samples must be non-empty and of equal length")
        if any(not math.isfinite(v) or v <= 0 for v in (*self.eager_ms, *self.compiled_ms)):
            raise ValueError("timings must be finite and positive")
        if not math.isfinite(self.compilation_latency):
            raise ValueError("compilation_latency must be finite")
        if any(v is not None and (not math.isfinite(v) or v < 0)
               for v in (self.eager_peak_mem, self.dynamo_peak_mem, self.eager_activation_peak_mem,
                         self.dynamo_activation_peak_mem)):
            raise ValueError("peak memory must be finite and non-negative")


@dataclass(frozen=True, slots=True)
class Failure:
    phase: str
    kind: str  # "error" | "oom"
    message: str


@dataclass(frozen=True, slots=True)
class WorkerResult:
    name: str
    batch_size: int
    performance: Performance | None = None
    accuracy: str | None = None  # pass | pass_due_to_skip | fail_accuracy | eager_two_runs_differ (else ``failure``)
    failure: Failure | None = None
    # Seconds spent per part of the worker (process start excluded), for bench/harness.py.
    timings: dict[str, float] = field(default_factory=dict)
    # The accuracy check's own Dynamo counters (graph_stats) and compile seconds, once it decided or compiled.
    accuracy_stats: dict[str, int] | None = None
    accuracy_compile_s: float | None = None
    # What a non-Dynamo backend did for this model (e.g. which ONNX exporter worked), for the manifest.
    backend_notes: dict[str, str] = field(default_factory=dict)
    # A diagnostic that did not finish (DIAGNOSTIC_PHASES): its phase -> why (raised, over its budget, killed).
    diagnostics_cut: dict[str, str] = field(default_factory=dict)

    def to_json(self, event: str = "result") -> str:
        """The result line; ``event="partial"``: the result so far, sent before the diagnostics."""
        return json.dumps({"event": event, **asdict(self)})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkerResult:
        perf = data.get("performance")
        failure = data.get("failure")
        return cls(
            name=data["name"],
            batch_size=int(data["batch_size"]),
            performance=Performance(**{
                **perf, "eager_ms": tuple(perf["eager_ms"]), "compiled_ms": tuple(perf["compiled_ms"]),
                "code": CodeFingerprint.from_json(perf["code"]) if perf.get("code") else None,
                "kernel_times": tuple(KernelTime(**k) for k in perf.get("kernel_times") or ()),
                "process": tuple(perf.get("process") or ()),
                "contention": tuple(LoopContention.from_json(c) for c in perf.get("contention") or ()),
                "stats": GraphStats(**(perf.get("stats") or {}))}) if perf else None,
            accuracy=data.get("accuracy"),
            failure=Failure(**failure) if failure else None,
            timings={k: float(v) for k, v in (data.get("timings") or {}).items()},
            accuracy_stats=data.get("accuracy_stats"),
            accuracy_compile_s=data.get("accuracy_compile_s"),
            backend_notes={str(k): str(v) for k, v in (data.get("backend_notes") or {}).items()},
            diagnostics_cut={str(k): str(v) for k, v in (data.get("diagnostics_cut") or {}).items()},
        )


def phase_event(phase: str) -> str:
    return json.dumps({"event": "phase", "phase": phase})
