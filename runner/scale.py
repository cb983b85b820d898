"""``perfdash scale``'s work: one model's DistributedDataParallel training at world sizes 1..N, each world size a
normal perfdash run in a directory of its own, and the scaling factor over them.

Per world size W the ranks run as runner.distributed launches them (gloo on CPU, nccl on CUDA), each with the same
per-rank batch and the same number of cores (CPU: the machine's cores divided by N, so a rank is the same slice at
every W, as a GPU is the same device). ``world_size_W/`` holds the run's PyTorch-format performance CSV (per-rank batch,
the slowest rank's step), its samples file (global throughput: W x batch over the median step) and its manifest
(world_size, distributed_backend); a world that failed adds its status row in an accuracy CSV (timeout,
fail_to_run ...) and the error in the manifest's model_errors. A world size whose results are already there is
read back, not run again (resume, as ``perfdash run``). ``scaling.jsonl`` beside them holds one line per model and
world size: the throughputs, the scaling factor throughput(W) / (W x throughput(1)) of eager and compiled, and the
launch's own costs; JSON Lines, so that ``perfdash ingest`` of the whole directory (which reads ``*.json``) takes
the runs and nothing else.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

from perfdash.axes import AXIS
from perfdash.contract import (
    ModelSamples,
    PerformanceRow,
    append_row,
    append_samples,
    completed_models,
    read_accuracy_csv,
    read_performance_csv,
    read_samples,
)
from perfdash.manifest import RunConfig
from runner.allocator import DEFAULT_ALLOCATOR
from runner.api import RunPaths, make_job
from runner.backends import BACKEND_SPECS
from runner.distributed import WorldOutcome, cpu_slices, launch, process_group_backend
from runner.manifest import load_or_create
from runner.options import (
    DEFAULT_REPEAT,
    DEFAULT_TIMEOUT_S,
    DEFAULT_WARMUP,
    OptionsError,
    RunOptions,
    validate,
)
from runner.outcome import interpret
from runner.process import WorkerOutcome
from runner.protocol import PHASE_MEASURE, WorkerResult

SUMMARY_FILE = "scaling.jsonl"


@dataclass(frozen=True, slots=True)
class ScaleOptions:
    suite: str
    model: str
    nproc: int
    output_dir: Path = Path("results/scale")
    backend: str = AXIS["backend"].default
    compile_mode: str = AXIS["compile_mode"].default
    device: str = AXIS["device"].default
    dtype: str = AXIS["dtype"].default
    batch_size: int | None = None  # per rank; None: the suite's training batch size
    cores_per_rank: int | None = None  # CPU; None: the cores this process may use divided by nproc
    repeat: int = DEFAULT_REPEAT
    warmup: int = DEFAULT_WARMUP
    timeout_s: float = DEFAULT_TIMEOUT_S  # per world size, all ranks together
    models_file: Path | None = None
    model_list: str = "default"
    allocator: str = DEFAULT_ALLOCATOR
    extra_env: dict[str, str] = field(default_factory=dict)

    def run_options(self, output_dir: Path) -> RunOptions:
        """The single-process options each rank's job is made from (training, performance only)."""
        return RunOptions(suite=self.suite, output_dir=output_dir, only=self.model, backend=self.backend,
                          compile_mode=self.compile_mode, device=self.device, dtype=self.dtype, mode="training",
                          threads=self.cores_per_rank if self.device == "cpu" else None,
                          batch_size=self.batch_size, repeat=self.repeat, warmup=self.warmup,
                          timeout_s=self.timeout_s, performance=True, models_file=self.models_file,
                          model_list=self.model_list, allocator=self.allocator, extra_env=dict(self.extra_env))


@dataclass(frozen=True, slots=True)
class ScalingPoint:
    """One world size of one model: its status, global throughputs (samples/s), scaling factors and costs."""

    model: str
    world_size: int
    status: str
    directory: str
    batch_size: int  # per rank
    eager_throughput: float | None = None
    compiled_throughput: float | None = None
    eager_scaling: float | None = None
    compiled_scaling: float | None = None
    speedup: float | None = None
    error: str | None = None
    # the launch's own costs, s (the slowest rank): interpreter start and imports until the rank's first phase,
    # init_process_group, DDP's first eager step; None when the world size was resumed from its files
    launch_s: float | None = None
    init_process_group_s: float | None = None
    first_step_s: float | None = None
    wall_s: float | None = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))


@dataclass(frozen=True, slots=True)
class ScalingReport:
    options: ScaleOptions
    points: tuple[ScalingPoint, ...]
    summary_path: Path


def gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def _cores() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def check(options: ScaleOptions) -> ScaleOptions:
    """Raise OptionsError for what cannot run; returns the options with the CPU slice size settled."""
    if options.nproc < 1:
        raise OptionsError(f"--nproc must be >= 1, got {options.nproc}")
    if options.backend in BACKEND_SPECS:
        raise OptionsError(f"--backend {options.backend} cannot train; scaling needs a torch.compile backend")
    if options.device == "cuda":
        if options.cores_per_rank is not None:
            raise OptionsError("--cores-per-rank is for CPU ranks; on CUDA each rank has one GPU")
        if gpu_count() and options.nproc > gpu_count():
            raise OptionsError(f"--nproc {options.nproc}: this machine has {gpu_count()} GPU(s)")
        return options
    cores = len(_cores())
    per_rank = options.cores_per_rank or cores // options.nproc
    if per_rank < 1 or per_rank * options.nproc > cores:
        raise OptionsError(f"--nproc {options.nproc} ranks of {options.cores_per_rank or 1} core(s) need "
                           f"{options.nproc * (options.cores_per_rank or 1)} cores; this process may use {cores}")
    return dataclasses.replace(options, cores_per_rank=per_rank)


def run_scaling(options: ScaleOptions, on_world: Callable[[ScalingPoint], None] = lambda point: None
                ) -> ScalingReport:
    """Every world size 1..nproc in turn (a failed one is recorded and the next runs), then the summary."""
    options = check(options)
    points: list[ScalingPoint] = []
    for world_size in range(1, options.nproc + 1):
        point = run_world(options, world_size)
        points.append(point)
        on_world(point)
    points = with_scaling(points)
    options.output_dir.mkdir(parents=True, exist_ok=True)
    summary = options.output_dir / SUMMARY_FILE
    write_summary(summary, points)
    return ScalingReport(options=options, points=tuple(points), summary_path=summary)


def world_config(options: ScaleOptions, world_size: int) -> RunConfig:
    base = options.run_options(options.output_dir).run_config()
    return base.model_copy(update={"world_size": world_size,
                                   "distributed_backend": process_group_backend(options.device)})


def run_world(options: ScaleOptions, world_size: int) -> ScalingPoint:
    directory = options.output_dir / f"world_size_{world_size}"
    run_options = options.run_options(directory)
    suite, [spec] = validate(run_options)
    config = world_config(options, world_size)
    directory.mkdir(parents=True, exist_ok=True)
    paths = RunPaths.for_config(directory, config)
    manifest = load_or_create(paths.manifest, config, suite)
    manifest.write(paths.manifest)
    if spec.name in completed_models(paths.performance):
        return _read_point(paths, spec.name, world_size, directory, manifest.model_errors.get(spec.name))
    job = dataclasses.replace(make_job(run_options, suite, spec), threads=None, accuracy=False, performance=True)
    cpus = cpu_slices(_cores(), world_size, options.cores_per_rank) if options.cores_per_rank else None
    world = launch(job, world_size, run_options.worker_env(), options.timeout_s, paths.logs / _safe(spec.name), cpus)
    outcome = interpret(world_outcome(world), name=spec.name, batch_size=job.batch_size, dev=options.device,
                        want_accuracy=not world.ok, want_performance=True, world_size=world_size)
    assert outcome.performance is not None
    append_row(paths.performance, outcome.performance)
    if outcome.samples is not None:
        append_samples(paths.samples, outcome.samples)
    if outcome.accuracy is not None:  # the failure's status; a world that ran has no accuracy check to report
        append_row(paths.accuracy, outcome.accuracy)
    errors = dict(manifest.model_errors)
    if outcome.error:
        errors[spec.name] = f"world size {world_size}: {outcome.error}"
    else:
        errors.pop(spec.name, None)
    manifest.model_copy(update={"model_errors": errors, "end_time": datetime.now(UTC)}).write(paths.manifest)
    point = _read_point(paths, spec.name, world_size, directory, errors.get(spec.name), status=outcome.status)
    return dataclasses.replace(point, batch_size=job.batch_size, **_costs(world))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def world_outcome(world: WorldOutcome) -> WorkerOutcome:
    """The world as one worker: the failing rank's outcome (rank 0's on a timeout), or the ranks' results joined."""
    if not world.ok:
        rank = world.culprit if world.culprit is not None else 0
        return world.ranks[rank]
    results = [r.result for r in world.ranks]
    assert all(r is not None and r.performance is not None for r in results)
    perfs = [r.performance for r in results if r is not None and r.performance is not None]
    first = perfs[0]

    def slowest(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return max(known) if known else None

    joined = dataclasses.replace(
        first,
        # each step ends in an all-reduce: the world's step is its slowest rank's
        eager_ms=tuple(max(step) for step in zip(*(p.eager_ms for p in perfs), strict=True)),
        compiled_ms=tuple(max(step) for step in zip(*(p.compiled_ms for p in perfs), strict=True)),
        compilation_latency=max(p.compilation_latency for p in perfs),
        eager_peak_mem=slowest([p.eager_peak_mem for p in perfs]),
        dynamo_peak_mem=slowest([p.dynamo_peak_mem for p in perfs]))
    head = results[0]
    assert head is not None
    return WorkerOutcome(result=WorkerResult(name=head.name, batch_size=head.batch_size, performance=joined,
                                             timings=dict(head.timings)),
                         last_phase=PHASE_MEASURE, returncode=0, timed_out=False, wall_s=world.wall_s, log_tail="")


class _Costs(TypedDict):
    """What a world cost beside its measurement (ScalingPoint's fields of the same names)."""

    launch_s: float | None
    init_process_group_s: float | None
    first_step_s: float | None
    wall_s: float | None


def _costs(world: WorldOutcome) -> _Costs:
    def slowest(key: str) -> float | None:
        values = [r.result.timings[key] for r in world.ranks if r.result is not None and key in r.result.timings]
        return max(values) if values else None

    started = [s for s in world.started_s if s is not None]
    return {"launch_s": max(started) if started else None, "init_process_group_s": slowest("init_process_group"),
            "first_step_s": slowest("first_step"), "wall_s": world.wall_s}


def _read_point(paths: RunPaths, name: str, world_size: int, directory: Path, error: str | None,
                status: str | None = None) -> ScalingPoint:
    rows: list[PerformanceRow] = [r for r in read_performance_csv(paths.performance) if r.name == name]
    samples: list[ModelSamples] = [s for s in read_samples(paths.samples) if s.name == name]
    row = rows[-1]
    sample = samples[-1] if samples and not row.is_failure else None
    if status is None:
        status = "pass" if not row.is_failure else _failure_status(paths, name)
    return ScalingPoint(model=name, world_size=world_size, status=status, directory=str(directory),
                        batch_size=sample.batch_size if sample else row.batch_size,
                        eager_throughput=sample.eager_throughput if sample else None,
                        compiled_throughput=sample.compiled_throughput if sample else None,
                        speedup=row.speedup if not row.is_failure else None, error=error)


def _failure_status(paths: RunPaths, name: str) -> str:
    if paths.accuracy.exists():
        statuses = [r.accuracy for r in read_accuracy_csv(paths.accuracy) if r.name == name]
        if statuses:
            return statuses[-1]
    return "fail_to_run"


def scaling_factor(throughput: float | None, world_size: int, base: float | None) -> float | None:
    """throughput(N) / (N x throughput(1)): 1.0 is perfect scaling; None without both throughputs."""
    if throughput is None or base is None or base <= 0:
        return None
    return throughput / (world_size * base)


def with_scaling(points: list[ScalingPoint]) -> list[ScalingPoint]:
    base = next((p for p in points if p.world_size == 1), None)
    return [dataclasses.replace(
        p, eager_scaling=scaling_factor(p.eager_throughput, p.world_size, base.eager_throughput if base else None),
        compiled_scaling=scaling_factor(p.compiled_throughput, p.world_size,
                                        base.compiled_throughput if base else None)) for p in points]


def write_summary(path: Path, points: list[ScalingPoint]) -> None:
    """This model's lines replace its earlier ones; other models' lines stay."""
    models = {p.model for p in points}
    kept: list[str] = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                if line.strip() and json.loads(line).get("model") not in models:
                    kept.append(line)
            except ValueError:
                continue  # a damaged line of an earlier run: the runs' own files still hold its results
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(f"{line}\n" for line in [*kept, *(p.to_json() for p in points)]), encoding="utf-8")
    shutil.move(tmp, path)
