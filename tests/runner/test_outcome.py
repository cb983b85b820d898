"""How a worker's fate becomes a status and rows (without starting workers)."""

from __future__ import annotations

import signal

import pytest

from perfdash.contract import GraphStats
from runner.outcome import interpret
from runner.process import WorkerOutcome
from runner.protocol import Failure, Performance, WorkerResult


def _outcome(result: WorkerResult | None = None, phase: str = "load", returncode: int | None = 0,
             timed_out: bool = False) -> WorkerOutcome:
    return WorkerOutcome(result=result, last_phase=phase, returncode=returncode, timed_out=timed_out, wall_s=1.0,
                         log_tail="")


def _status(outcome: WorkerOutcome) -> str:
    return interpret(outcome, name="m", batch_size=8, dev="cpu", want_accuracy=True, want_performance=True).status


@pytest.mark.parametrize("phase, returncode, status", [
    ("load", -signal.SIGSEGV, "model_fail_to_load"),
    ("eager_validate", -signal.SIGABRT, "eager_fail_to_run"),
    ("eager_validate", -signal.SIGKILL, "eager_fail_to_run"),
    ("eager_1st_run", -signal.SIGABRT, "eager_1st_run_fail"),
    ("eager_1st_run", -signal.SIGKILL, "eager_1st_run_OOM"),  # the kernel's OOM killer
    ("eager_2nd_run", -signal.SIGKILL, "eager_2nd_run_OOM"),
    ("eager_warmup", -signal.SIGSEGV, "eager_fail_to_run"),
    ("compile", -signal.SIGSEGV, "fail_to_run"),
    ("measure", -signal.SIGKILL, "OOM"),
    ("memory", -signal.SIGKILL, "OOM"),
    ("compiled_run", 1, "fail_to_run"),
])
def test_crash_status_depends_on_the_phase(phase: str, returncode: int, status: str) -> None:
    assert _status(_outcome(phase=phase, returncode=returncode)) == status


def test_timeout_and_protocol_failures() -> None:
    assert _status(_outcome(phase="compile", returncode=-signal.SIGKILL, timed_out=True)) == "timeout"
    assert _status(_outcome(returncode=0)) == "infra_error"


def test_reported_errors_and_oom() -> None:
    oom = WorkerResult("m", 8, failure=Failure("compile", "oom", "OutOfMemoryError: CUDA out of memory"))
    assert _status(_outcome(oom)) == "OOM"
    raised = WorkerResult("m", 8, failure=Failure("eager_2nd_run", "error", "RuntimeError: x"))
    assert _status(_outcome(raised)) == "eager_2nd_run_fail"
    differ = WorkerResult("m", 8, accuracy="eager_two_runs_differ", failure=Failure("compile", "error", "boom"))
    assert _status(_outcome(differ)) == "eager_two_runs_differ"


def _performance(eager_gb: float | None, compiled_gb: float | None) -> Performance:
    return Performance(eager_ms=(4.0, 2.0, 3.0), compiled_ms=(1.0, 1.5, 2.0), compilation_latency=12.5,
                       eager_peak_mem=eager_gb, dynamo_peak_mem=compiled_gb,
                       stats=GraphStats(calls_captured=5, unique_graphs=1, graph_breaks=0, unique_graph_breaks=0))


def test_rows_from_a_successful_worker() -> None:
    check_stats = {"calls_captured": 7, "unique_graphs": 1, "fallbacks_to_eager": 0, "graph_breaks": 0,
                   "unique_graph_breaks": 0, "autograd_captures": 0, "autograd_compiles": 0, "cudagraph_skips": 0}
    result = WorkerResult("m", 8, performance=_performance(0.5, 0.25), accuracy="pass", accuracy_stats=check_stats,
                          accuracy_compile_s=1.5)
    out = interpret(_outcome(result, phase="compiled_run"), name="m", batch_size=8, dev="cpu", want_accuracy=True,
                    want_performance=True)
    assert out.status == "pass" and out.error is None
    row = out.performance
    assert row is not None
    assert row.speedup == pytest.approx(3.0 / 1.5) and row.abs_latency == 1.5  # medians
    assert row.compilation_latency == 12.5 and row.compression_ratio == pytest.approx(2.0)
    assert (row.eager_peak_mem, row.dynamo_peak_mem) == (0.5, 0.25)
    assert row.stats.calls_captured == 5
    # The accuracy row has the check's own counters and compile time (PyTorch's accuracy CSV), not the timed run's.
    assert out.accuracy is not None and out.accuracy.stats.calls_captured == 7
    assert out.accuracy.stats.cudagraph_skips == 0 and out.accuracy.compilation_latency == 1.5
    assert out.samples is not None and out.samples.eager_ms == (4.0, 2.0, 3.0)
    tiny = WorkerResult("m", 8, performance=_performance(1e-3, 1e-6), accuracy="pass")
    small = interpret(_outcome(tiny), name="m", batch_size=8, dev="cpu", want_accuracy=False, want_performance=True)
    assert small.performance is not None and small.performance.compression_ratio is None  # a toy model's bytes
    assert small.performance.dynamo_peak_mem == 1e-6  # the peaks themselves are kept
    assert small.accuracy is None


def test_peak_memory_is_never_negative() -> None:
    with pytest.raises(ValueError, match="peak memory"):
        _performance(-1e-3, 0.25)


def test_failed_performance_is_pytorchs_failure_row() -> None:
    out = interpret(_outcome(phase="eager_1st_run", returncode=-signal.SIGABRT), name="m", batch_size=8, dev="cuda",
                    want_accuracy=False, want_performance=True)
    assert out.performance is not None
    assert out.performance.to_csv_fields(with_stats=True) == ["cuda", "m", "0", "0.0", "0.0"]
    assert "SIGABRT" in (out.error or "")
