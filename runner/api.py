"""The runner's Python API: ``run_suite(RunOptions) -> RunReport``; ``perfdash run`` and the nightly job call it.

One worker process per model, forked by one fork server per run that has imported torch and the suite's libraries
(see runner.process.ForkServer); rows are appended as each model finishes, so running the same command again resumes
after the models already in the CSVs. The same worker measures peak memory, PyTorch's over the warm-ups (see
runner.measure.warmup) and perfdash's activation peak (runner.measure.PeakMemory): one process, and one compilation in
inference, per model.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from perfdash.contract import (
    ModelResult,
    ModelSamples,
    append_row,
    append_samples,
    completed_models,
    join_results,
    read_accuracy_csv,
    read_performance_csv,
    read_samples,
)
from perfdash.manifest import Manifest, ModelPhases, RunConfig
from perfdash.metrics import SuiteSummary, summarize_results
from runner.backends import BACKEND_SPECS
from runner.manifest import load_or_create
from runner.options import RunOptions, validate
from runner.outcome import ModelOutcome, interpret, pool_processes, timed_results, with_timed_results
from runner.process import ForkServer
from runner.protocol import PHASE_COMPILE_SETUP, PHASES, Job, Performance, model_settings
from runner.suites import ModelSpec, Suite
from runner.suites.base import ToleranceQuery


@dataclass(frozen=True, slots=True)
class RunPaths:
    performance: Path
    accuracy: Path
    manifest: Path
    samples: Path
    logs: Path

    @classmethod
    def for_config(cls, output_dir: Path, config: RunConfig) -> RunPaths:
        key = config.key()
        return cls(performance=output_dir / key.filename("performance"),
                   accuracy=output_dir / key.filename("accuracy"), manifest=output_dir / key.filename("manifest"),
                   samples=output_dir / key.filename("samples"), logs=output_dir / "logs" / key.stem)


@dataclass(frozen=True, slots=True)
class RunReport:
    config: RunConfig
    paths: RunPaths
    selected: tuple[str, ...]  # this partition's models
    ran: tuple[str, ...]  # the models this call ran (the others were resumed from the CSVs)
    outcomes: tuple[ModelOutcome, ...]
    results: tuple[ModelResult, ...]  # this partition's results as the CSVs now hold them
    summary: SuiteSummary
    manifest: Manifest
    server_start_s: float = 0.0  # the fork server's start (its imports), shared by every model it ran
    samples: tuple[ModelSamples, ...] = ()  # this partition's raw samples as the samples file now holds them


class Progress(Protocol):
    """What the run reports as it moves on (the CLI draws a progress bar from it)."""

    def start(self, total: int, resumed: int) -> None: ...

    def phase(self, name: str, phase: str) -> None: ...

    def finished(self, name: str, status: str) -> None: ...


def _log_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".log"


def _done(path: Path, wanted: bool) -> set[str] | None:
    return completed_models(path) if wanted else None


def run_suite(options: RunOptions, progress: Progress | None = None) -> RunReport:
    """Run (or resume) one suite configuration; raises OptionsError before any work if the options are wrong."""
    suite, models = validate(options)
    config = options.run_config()
    options.output_dir.mkdir(parents=True, exist_ok=True)
    paths = RunPaths.for_config(options.output_dir, config)
    manifest = load_or_create(paths.manifest, config, suite, options.quantize, options.torch_spec, options.night)
    manifest.write(paths.manifest)

    done_perf = _done(paths.performance, options.run_performance)
    done_acc = _done(paths.accuracy, options.run_accuracy)
    todo = [m for m in models
            if (done_perf is not None and m.name not in done_perf) or (done_acc is not None and m.name not in done_acc)]
    if progress is not None:
        progress.start(len(todo), len(models) - len(todo))
    outcomes: list[ModelOutcome] = []
    errors = dict(manifest.model_errors)
    preload = suite.preload(todo) + list(BACKEND_SPECS[options.backend].preload if options.backend in BACKEND_SPECS
                                         else ())
    with ForkServer(env=options.worker_env(), preload=preload,
                    log_path=paths.logs / "fork-server.log") as server:
        for spec in todo:
            outcome = run_model(options, suite, spec, server, progress)
            if outcome.performance is not None and (done_perf is None or spec.name not in done_perf):
                append_row(paths.performance, outcome.performance)
                if outcome.samples is not None:
                    append_samples(paths.samples, outcome.samples)
            if outcome.accuracy is not None and (done_acc is None or spec.name not in done_acc):
                append_row(paths.accuracy, outcome.accuracy)
            if outcome.error:
                errors[spec.name] = outcome.error
            else:
                errors.pop(spec.name, None)
            update: dict[str, object] = {"model_errors": dict(errors), "model_phases": {
                **manifest.model_phases, spec.name: model_phases(outcome, options.diagnostic_budget_s)}}
            if manifest.backend is not None and outcome.backend_notes:
                update["backend"] = manifest.backend.model_copy(
                    update={"models": {**manifest.backend.models, spec.name: dict(outcome.backend_notes)}})
            manifest = manifest.model_copy(update=update)
            manifest.write(paths.manifest)
            outcomes.append(outcome)
            if progress is not None:
                progress.finished(spec.name, outcome.status)
    manifest = manifest.model_copy(update={"end_time": datetime.now(UTC)})
    manifest.write(paths.manifest)

    selected = {m.name for m in models}
    results = tuple(r for r in read_results(paths) if r.name in selected)
    return RunReport(config=config, paths=paths, selected=tuple(m.name for m in models),
                     ran=tuple(m.name for m in todo), outcomes=tuple(outcomes), results=results,
                     summary=summarize_results(results), manifest=manifest, server_start_s=server.start_seconds,
                     samples=tuple(s for s in read_samples(paths.samples) if s.name in selected))


# A later worker's phases, in the model's timings and the manifest's model_phases: "later_" and the phase's name.
LATER_PREFIX = "later_"


def worker_seconds(timings: dict[str, float]) -> dict[str, float]:
    """One worker's account of its wall time: its imports, each phase, and what its clock did not see (its fork or
    start and its exit: the parent's wall time, ``worker_wall``, less the worker's total)."""
    seconds = {name: timings[name] for name in ("import", *PHASES, PHASE_COMPILE_SETUP) if name in timings}
    if "worker_wall" in timings and "worker_total" in timings:
        seconds["fork_and_exit"] = max(timings["worker_wall"] - timings["worker_total"], 0.0)
    return seconds


def model_phases(outcome: ModelOutcome, budget_s: float) -> ModelPhases:
    """The manifest's account of one model's wall time: its (first) worker's (``worker_seconds``), and the other
    workers' it took: the accuracy check's own, the later ones of ``--processes K`` (together, and per phase)."""
    timings = outcome.timings
    seconds = worker_seconds(timings)
    if "accuracy_recheck_wall" in timings:  # the accuracy check's own worker, after a diagnostic killed the first
        seconds["accuracy_recheck"] = timings["accuracy_recheck_wall"]
    if "later_processes_wall" in timings:  # --processes K: the workers after the first, together
        seconds["later_processes"] = timings["later_processes_wall"]
        seconds.update({name: value for name, value in timings.items()
                        if name.startswith(LATER_PREFIX) and name != "later_processes_wall"})
    return ModelPhases(seconds=seconds, wall_s=timings.get("worker_wall"), diagnostic_budget_s=budget_s,
                       diagnostics_cut=dict(outcome.diagnostics_cut))


def read_results(paths: RunPaths) -> list[ModelResult]:
    performance = read_performance_csv(paths.performance) if _has_rows(paths.performance) else []
    accuracy = read_accuracy_csv(paths.accuracy) if _has_rows(paths.accuracy) else []
    return join_results(performance, accuracy)


def _has_rows(path: Path) -> bool:
    return bool(completed_models(path))


def make_job(options: RunOptions, suite: Suite, spec: ModelSpec) -> Job:
    env = options.worker_env()
    tolerance = suite.tolerance_for(ToleranceQuery(
        name=spec.name, mode=options.mode, device=options.device, dtype=options.dtype,
        freezing=env.get("TORCHINDUCTOR_FREEZING") == "1", max_autotune=options.compile_mode == "max-autotune"))
    wanted = options.batch_size or suite.accuracy_batch_size
    accuracy_batch_size = spec.accuracy_batch_size(wanted) if wanted is not None else None
    # An accuracy-only run builds the model once, at the check's batch size, as PyTorch's --accuracy does (its
    # common.py sets args.batch_size): never also at the timed size (tts_angular 1024) only to be dropped.
    timed_batch_size = options.batch_size or spec.default_batch_size(options.mode)
    only_checked = options.run_accuracy and not options.run_performance
    batch_size = accuracy_batch_size if only_checked and accuracy_batch_size is not None else timed_batch_size
    settings = {**model_settings(options), "min_loop_s": options.min_loop_s / options.processes}
    return Job(**settings, suite=suite.name, spec=spec, batch_size=batch_size,
               accuracy=options.run_accuracy, performance=options.run_performance, tolerance=tolerance,
               accuracy_batch_size=accuracy_batch_size)


def cold_cache_env(cache_dir: str) -> dict[str, str]:
    """The caches a model compiles into, empty: Inductor's (FX graph, AOTAutograd, its kernels) and Triton's, as
    torch._inductor.utils.fresh_cache makes them for PyTorch's --cold-start-latency. Triton's must be named too: an
    inherited TRITON_CACHE_DIR (the CUDA image's, on the node volume) would otherwise keep every kernel warm. Both are
    read at each lookup, not at import, so a worker forked from the fork server gets them."""
    return {"TORCHINDUCTOR_CACHE_DIR": cache_dir, "TRITON_CACHE_DIR": os.path.join(cache_dir, "triton")}


def run_model(options: RunOptions, suite: Suite, spec: ModelSpec, server: ForkServer,
              progress: Progress | None = None) -> ModelOutcome:
    """One model in its own worker (forked by ``server``), turned into its result rows."""
    job = make_job(options, suite, spec)
    env: dict[str, str] = {}  # the run's environment is the server's; only per-model settings go here
    cache_dir = tempfile.mkdtemp(prefix="perfdash-inductor-") if options.cold_start else None
    if cache_dir is not None:
        env.update(cold_cache_env(cache_dir))
    log = options.output_dir / "logs" / options.run_config().key().stem / _log_name(spec.name)

    def on_phase(phase: str) -> None:
        if progress is not None:
            progress.phase(spec.name, phase)

    repeats = options.process_repeats()
    try:
        outcome = server.run(dataclasses.replace(job, repeat=repeats[0]), env, options.timeout_s, log, on_phase)
        salvaged = outcome.salvaged()
        # A diagnostic killed the worker before the accuracy check's compiled run: the check gets a worker of its own
        # in the time left, so no measurement is lost to a diagnostic.
        recheck = job.accuracy and salvaged is not None and salvaged.accuracy is None
        checked = server.run(dataclasses.replace(job, performance=False), env,
                             max(options.timeout_s - outcome.wall_s, 1.0), log, on_phase) if recheck else None
        spent = outcome.wall_s + (checked.wall_s if checked is not None else 0.0)
        later = _later_processes(options, job, repeats, server, env, log, on_phase, spent) \
            if len(repeats) > 1 and job.performance and timed_results(outcome) is not None else None
    finally:
        if cache_dir is not None:
            shutil.rmtree(cache_dir, ignore_errors=True)
    if later is not None:
        first = timed_results(outcome)
        assert first is not None
        outcome = with_timed_results(outcome, pool_processes(first, later.measured))
        salvaged = outcome.salvaged()
    kept = outcome.result or salvaged or outcome.partial
    interpreted = interpret(outcome, name=spec.name, batch_size=job.batch_size,
                            accuracy_batch_size=job.accuracy_batch_size, dev=options.device,
                            want_accuracy=options.run_accuracy and checked is None,
                            want_performance=options.run_performance,
                            timings={**(kept.timings if kept is not None else {}), "worker_wall": outcome.wall_s})
    if checked is not None:
        check = interpret(checked, name=spec.name, batch_size=job.batch_size,
                          accuracy_batch_size=job.accuracy_batch_size, dev=options.device, want_accuracy=True,
                          want_performance=False)
        interpreted = dataclasses.replace(interpreted, status=check.status, accuracy=check.accuracy,
                                          error=check.error, timings={**interpreted.timings,
                                                                      "accuracy_recheck_wall": checked.wall_s})
    if later is not None:
        errors = [e for e in (interpreted.error, *later.errors) if e]
        interpreted = dataclasses.replace(interpreted, error="\n".join(errors) if errors else None,
                                          timings={**interpreted.timings, "later_processes_wall": later.wall_s,
                                                   **{LATER_PREFIX + name: value
                                                      for name, value in later.seconds.items()}})
    if kept is None or not kept.backend_notes:
        return interpreted
    return dataclasses.replace(interpreted, backend_notes=dict(kept.backend_notes))


@dataclass(frozen=True, slots=True)
class LaterProcesses:
    """What the workers after the first of ``--processes K`` measured: each one's index and timings, why any
    other measured nothing, and their wall time together, and per phase (``worker_seconds``, summed)."""

    measured: tuple[tuple[int, Performance], ...]
    errors: tuple[str, ...]
    wall_s: float
    seconds: dict[str, float]


def _later_processes(options: RunOptions, job: Job, repeats: tuple[int, ...], server: ForkServer,
                     env: dict[str, str], log: Path, on_phase: Callable[[str], None], spent_s: float
                     ) -> LaterProcesses:
    """Workers 1..K-1 of a model: performance only (the first checked accuracy), without the diagnostics (the
    result keeps the first's) and without starting Inductor's compile-worker pool ahead (their compile latency is
    not reported: Job.warm_compile_pool), in the model's time left. Each forks from the run's server like the first
    and compiles again: it finds the Inductor cache the first filled (with ``--cold-start`` the model's own, ``env``),
    but where the cache bypasses the graphs (CPU inference: freezing) only the kernels' built libraries are reused,
    and Dynamo, AOTAutograd, freezing and Inductor's lowering run as in the first (its log's "compile caches" line).
    One that measures nothing is left out of the pool and named in the model's error: the pool holds the pairs of
    the workers that measured."""
    measured: list[tuple[int, Performance]] = []
    errors: list[str] = []
    wall = 0.0
    seconds: dict[str, float] = {}
    for index, repeat in enumerate(repeats[1:], start=1):
        left = options.timeout_s - spent_s - wall
        if left <= 0:
            errors.append(f"process {index} of {len(repeats)}: not started, the model's timeout was spent")
            continue
        outcome = server.run(dataclasses.replace(job, accuracy=False, repeat=repeat, diagnostics=False,
                                                 warm_compile_pool=False), env, left, log, on_phase)
        wall += outcome.wall_s
        kept = outcome.result if outcome.result is not None else outcome.partial
        phases = worker_seconds({**(kept.timings if kept is not None else {}), "worker_wall": outcome.wall_s})
        for name, value in phases.items():
            seconds[name] = seconds.get(name, 0.0) + value
        timings = timed_results(outcome)
        if timings is not None:
            measured.append((index, timings))
        else:
            why = interpret(outcome, name=job.spec.name, batch_size=job.batch_size, dev=options.device,
                            want_accuracy=False, want_performance=True).error
            errors.append(f"process {index} of {len(repeats)}: {why or 'no timings'}")
    return LaterProcesses(measured=tuple(measured), errors=tuple(errors), wall_s=wall, seconds=seconds)
