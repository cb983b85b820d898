"""The suite summary counts models as PyTorch's benchmarks/dynamo/runner.py does, on hand-made files.

runner.py (``ParsePerformanceLogs.extract_df``) walks the performance CSV and gates each row by the model's
accuracy row: ``model_fail_to_load`` / ``eager_fail_to_run`` drop the model, a missing accuracy row or a failing
status makes the speedup 0, a model only in the accuracy CSV is not seen. The expected figures below are worked out
by hand from those rules, not produced by perfdash.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from perfdash.contract import AccuracyRow, PerformanceRow, join_results, read_accuracy_csv, read_performance_csv
from perfdash.metrics import counted_results, summarize_results

DATA = Path(__file__).parent / "data" / "runner_py_statuses"
STEM = "inductor_timm_models_float32_inference_cpu"


def test_the_seven_model_example_gives_runner_py_figures() -> None:
    results = join_results(read_performance_csv(DATA / f"{STEM}_performance.csv"),
                           read_accuracy_csv(DATA / f"{STEM}_accuracy.csv"))
    summary = summarize_results(results)
    # 7 models: model_fail_to_load and eager_fail_to_run leave the total; fail_accuracy and timeout count as 0.
    assert summary.passrate_text == "60%, 3/5"
    assert {r.name for r in counted_results(results)} == {
        "passes_fast", "passes_slow", "skipped_check", "wrong_numbers", "timed_out"}
    assert math.isclose(summary.geomean_speedup, (2.0 * 1.0 * 1.25) ** (1 / 3))  # 0.5 clipped up to 1
    assert math.isclose(summary.geomean_speedup_unclipped, (2.0 * 0.5 * 1.25) ** (1 / 3))
    assert math.isclose(summary.mean_compile_time_s, (20 + 40 + 30) / 3)  # fail_accuracy's 50 s is gated out
    assert math.isclose(summary.mean_compression_ratio, (1.5 + 0.8 + 1.2) / 3)


def _perf(name: str, speedup: float = 1.5) -> PerformanceRow:
    return PerformanceRow("cpu", name, 4, speedup, 1.0, 10.0, 1.1, 1.0, 0.9)


def _acc(name: str, status: str) -> AccuracyRow:
    return AccuracyRow("cpu", name, 4, status)


@pytest.mark.parametrize(("status", "passed", "total"), [
    ("pass", 2, 2),
    ("pass_due_to_skip", 2, 2),
    ("fail_accuracy", 1, 2),
    ("fail_to_run", 1, 2),
    ("OOM", 1, 2),
    ("eager_1st_run_fail", 1, 2),
    ("eager_1st_run_OOM", 1, 2),
    ("eager_2nd_run_fail", 1, 2),
    ("eager_2nd_run_OOM", 1, 2),
    ("eager_two_runs_differ", 1, 2),
    ("timeout", 1, 2),
    ("infra_error", 1, 2),
    ("some_future_status", 1, 2),  # unknown strings count as failures
    ("model_fail_to_load", 1, 1),  # never ran: out of the total
    ("eager_fail_to_run", 1, 1),
])
def test_each_status_beside_one_passing_model(status: str, passed: int, total: int) -> None:
    results = join_results([_perf("ok"), _perf("x")], [_acc("ok", "pass"), _acc("x", status)])
    summary = summarize_results(results)
    assert (summary.passed, summary.total) == (passed, total)


def test_performance_row_without_accuracy_row_counts_as_zero() -> None:
    results = join_results([_perf("ok"), _perf("no_accuracy", 3.0)], [_acc("ok", "pass")])
    summary = summarize_results(results)
    assert (summary.passed, summary.total) == (1, 2)
    assert math.isclose(summary.geomean_speedup, 1.5)  # the 3.0x without an accuracy row is not in the geomean


def test_accuracy_row_without_performance_row_is_not_in_the_total() -> None:
    results = join_results([_perf("ok")], [_acc("ok", "pass"), _acc("only_accuracy", "pass"),
                                           _acc("only_accuracy_failed", "fail_accuracy")])
    summary = summarize_results(results)
    assert (summary.passed, summary.total) == (1, 1)
