"""From what a worker did to the rows of the result contract: statuses by phase, PyTorch's failure rows."""

from __future__ import annotations

import signal
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from perfdash.contract import STAT_COLUMNS, AccuracyRow, GraphStats, ModelSamples, PerformanceRow, throughput
from runner.process import WorkerOutcome
from runner.protocol import (
    PHASE_ACCURACY_COMPILED,
    PHASE_COMPILE,
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
    Performance,
)

# Below this, a peak is a few small tensors of a toy model (or the CUDA allocator's 512-byte rounding): its ratio says
# nothing about a real model's memory, so compression_ratio stays empty.
MIN_PEAK_FOR_RATIO_GB = 1 / 1024

# phase -> (status on an error, status on running out of memory)
_STATUS_BY_PHASE: dict[str, tuple[str, str]] = {
    PHASE_LOAD: ("model_fail_to_load", "model_fail_to_load"),
    # PyTorch's load_model validates the model with one eager run; its failure, out of memory too, is this status.
    PHASE_VALIDATE: ("eager_fail_to_run", "eager_fail_to_run"),
    PHASE_EAGER_1ST: ("eager_1st_run_fail", "eager_1st_run_OOM"),
    PHASE_EAGER_2ND: ("eager_2nd_run_fail", "eager_2nd_run_OOM"),
    # Only a crash gets here (an exception only drops the fp64 reference); the fp64 run is the model's first.
    PHASE_FP64: ("eager_1st_run_fail", "eager_1st_run_OOM"),
    PHASE_EAGER_WARMUP: ("eager_fail_to_run", "OOM"),
    PHASE_COMPILE: ("fail_to_run", "OOM"),
    PHASE_MEASURE: ("fail_to_run", "OOM"),
    PHASE_MEMORY: ("fail_to_run", "OOM"),
    # Only a crash before the timed results reached the parent: after them, a diagnostic's end never sets the status.
    PHASE_KERNEL_PROFILE: ("fail_to_run", "OOM"),
    PHASE_FINGERPRINT: ("fail_to_run", "OOM"),
    PHASE_ACCURACY_COMPILED: ("fail_to_run", "OOM"),
}


def status_for(phase: str, oom: bool) -> str:
    error, out_of_memory = _STATUS_BY_PHASE.get(phase, ("fail_to_run", "OOM"))
    return out_of_memory if oom else error


@dataclass(frozen=True, slots=True)
class ModelOutcome:
    """One model's rows and, when it failed, why (for the manifest's model_errors)."""

    name: str
    status: str  # the accuracy status, or for a performance-only run "pass" / the failure status
    performance: PerformanceRow | None
    accuracy: AccuracyRow | None
    samples: ModelSamples | None
    error: str | None
    # Seconds per part of the work: the worker's phases and "worker_wall" as the parent saw it (bench/harness.py
    # reads these).
    timings: dict[str, float] = field(default_factory=dict)
    backend_notes: dict[str, str] = field(default_factory=dict)  # what a non-Dynamo backend reported (exporter)
    # A diagnostic (kernel profile, fingerprint) that did not finish: its phase -> why. The timed results stand.
    diagnostics_cut: dict[str, str] = field(default_factory=dict)


def interpret(outcome: WorkerOutcome, *, name: str, batch_size: int, dev: str, want_accuracy: bool,
              want_performance: bool, timings: dict[str, float] | None = None,
              accuracy_batch_size: int | None = None, world_size: int = 1) -> ModelOutcome:
    """``world_size``: processes of a DistributedDataParallel run, each stepping ``batch_size`` samples (the
    throughput is the global one); 1 for every other run.

    A worker that ended in a diagnostic after sending its timed results (``WorkerOutcome.salvaged``) counts as one that
    finished without that diagnostic, unless the accuracy check still had to run (runner.api.run_model runs it in a
    worker of its own). A worker that died elsewhere after sending them keeps its performance row beside its status."""
    result = outcome.result
    salvaged = outcome.salvaged()
    if result is None and salvaged is not None and (not want_accuracy or salvaged.accuracy is not None):
        result = salvaged
    error: str | None = None
    if result is not None and result is salvaged:
        status = result.accuracy or "pass"
    elif outcome.timed_out:
        status = "timeout"
        error = f"timed out in phase {outcome.last_phase} after {outcome.wall_s:.0f} s"
    elif result is None:
        if outcome.returncode is not None and outcome.returncode < 0:
            # SIGKILL that we did not send is the kernel's OOM killer.
            oom = outcome.returncode == -signal.SIGKILL
            status = status_for(outcome.last_phase, oom)
            error = f"worker killed by {outcome.signal_name} in phase {outcome.last_phase}"
        elif outcome.protocol_error or outcome.returncode == 0:
            status = "infra_error"
            error = outcome.protocol_error or "worker exited without a result"
        else:
            status = status_for(outcome.last_phase, oom="MemoryError" in outcome.log_tail)
            error = f"worker exited with status {outcome.returncode} in phase {outcome.last_phase}"
        error += f"\n{outcome.log_tail.strip()[-800:]}" if outcome.log_tail.strip() else ""
    elif result.failure is not None:
        # A verdict reached before the failure (eager_two_runs_differ) stands, as PyTorch stops at it.
        decided = result.accuracy if result.accuracy not in (None, "pass") else None
        status = decided or status_for(result.failure.phase, result.failure.kind == "oom")
        error = f"{result.failure.phase}: {result.failure.message}"
    else:
        status = result.accuracy or "pass"

    perf_row: PerformanceRow | None = None
    samples: ModelSamples | None = None
    if want_performance:
        kept = result if result is not None else outcome.partial
        perf = kept.performance if kept is not None else None
        if perf is None:
            perf_row = PerformanceRow.failure(dev, name)
        else:
            eager = statistics.median(perf.eager_ms)
            compiled = statistics.median(perf.compiled_ms)
            eager_mem, compiled_mem = perf.eager_peak_mem, perf.dynamo_peak_mem
            measurable = (eager_mem or 0.0) >= MIN_PEAK_FOR_RATIO_GB and (compiled_mem or 0.0) >= MIN_PEAK_FOR_RATIO_GB
            ratio = eager_mem / compiled_mem if measurable and eager_mem and compiled_mem else None
            perf_row = PerformanceRow(
                dev=dev, name=name, batch_size=batch_size, speedup=eager / compiled, abs_latency=compiled,
                compilation_latency=perf.compilation_latency, compression_ratio=ratio, eager_peak_mem=eager_mem,
                dynamo_peak_mem=compiled_mem, stats=perf.stats)
            samples = ModelSamples(name=name, batch_size=batch_size, eager_ms=perf.eager_ms,
                                   compiled_ms=perf.compiled_ms,
                                   eager_activation_peak_mem=perf.eager_activation_peak_mem,
                                   dynamo_activation_peak_mem=perf.dynamo_activation_peak_mem,
                                   eager_throughput=throughput(batch_size, perf.eager_ms, world_size),
                                   compiled_throughput=throughput(batch_size, perf.compiled_ms, world_size),
                                   code=perf.code, kernel_times=perf.kernel_times, code_source=perf.code_source,
                                   process=perf.process, contention=perf.contention)
    # The accuracy row carries the check's own counters and compile time, as PyTorch's accuracy CSV does.
    check_stats, check_compile_s = GraphStats(), None
    if result is not None and result.accuracy_stats is not None:
        check_stats = GraphStats(**{c: result.accuracy_stats.get(c) for c in STAT_COLUMNS})
        check_compile_s = result.accuracy_compile_s
    checked_batch = accuracy_batch_size or batch_size
    acc_row = AccuracyRow(dev=dev, name=name, batch_size=checked_batch if status != "model_fail_to_load" else 0,
                          accuracy=status, stats=check_stats, compilation_latency=check_compile_s
                          ) if want_accuracy else None
    return ModelOutcome(name=name, status=status, performance=perf_row, accuracy=acc_row, samples=samples,
                        error=error, timings=dict(timings or {}),
                        diagnostics_cut=dict(result.diagnostics_cut) if result is not None else {})


def timed_results(outcome: WorkerOutcome) -> Performance | None:
    """The timings a worker sent, as ``interpret`` reads them: its result's, else those sent before its diagnostics."""
    kept = outcome.result if outcome.result is not None else outcome.partial
    return kept.performance if kept is not None else None


def pool_processes(first: Performance, later: Sequence[tuple[int, Performance]]) -> Performance:
    """One result from the workers of ``perfdash run --processes K``: every worker's pairs in one pool, each marked
    with its worker's index (``later``: index and timings of each worker after the first that measured), and the rest
    (compile latency, peak memory, graph counters, generated code) from the first worker, the cold one: the headline
    compile latency stays what a fresh process pays, the later ones compile from its warm cache."""
    parts = [(0, first), *later]
    return replace(first, eager_ms=tuple(v for _, p in parts for v in p.eager_ms),
                   compiled_ms=tuple(v for _, p in parts for v in p.compiled_ms),
                   process=tuple(index for index, p in parts for _ in p.eager_ms),
                   contention=tuple(replace(c, process=index) for index, p in parts for c in p.contention))


def with_timed_results(outcome: WorkerOutcome, performance: Performance) -> WorkerOutcome:
    """``outcome`` with its timings (where ``timed_results`` reads them) replaced by ``performance``."""
    if outcome.result is not None and outcome.result.performance is not None:
        return replace(outcome, result=replace(outcome.result, performance=performance))
    if outcome.partial is None:
        return outcome
    return replace(outcome, partial=replace(outcome.partial, performance=performance))
