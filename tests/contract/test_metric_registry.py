"""The metric registry and the status rules: every entry names a real field, and the rules say what the dashboard
shows (torch-free, no database)."""

from __future__ import annotations

import dataclasses

import pytest

from perfdash import metric_registry as reg
from perfdash.contract import (
    KNOWN_STATUSES,
    PASSING_STATUSES,
    ModelResult,
    ModelSamples,
    PerformanceRow,
    accuracy_gate,
    display_status,
    gated_speedup,
)
from perfdash.metrics import SuiteSummary, model_warnings, summarize_results


def test_every_metric_reads_a_field_that_its_source_has() -> None:
    fields = {reg.Source.PERFORMANCE_CSV: {f.name for f in dataclasses.fields(PerformanceRow)},
              reg.Source.SAMPLES: {f.name for f in dataclasses.fields(ModelSamples)}}
    names = [m.name for m in reg.RESULT_METRICS]
    assert len(set(names)) == len(names)
    for metric in reg.RESULT_METRICS:
        assert metric.name in fields[metric.source], f"{metric.name} is no field of {metric.source}"
        assert 0 < metric.min_effect < 1
    assert reg.RESULT_METRICS[0] is reg.SPEEDUP  # the pages put the speedup (gated, with its interval) first


def test_summary_metrics_name_attributes_of_the_suite_summary() -> None:
    summary = SuiteSummary(passed=3, total=4, geomean_speedup=1.2, geomean_speedup_unclipped=0.9,
                           mean_compile_time_s=12.5, mean_compression_ratio=1.1)
    texts = [summary.text_of(m) for m in reg.SUMMARY_METRICS]
    assert texts == ["75%, 3/4", "1.20x", "0.90x", "12.50", "1.10x"]
    assert [summary.value_of(m) for m in reg.SUMMARY_METRICS] == [0.75, 1.2, 0.9, 12.5, 1.1]
    assert summary.value_of(reg.PASSRATE) is not None
    empty = dataclasses.replace(summary, passed=0, total=0)
    assert empty.value_of(reg.PASSRATE) is None  # no models: no passrate to colour
    assert [m.key for m in reg.DASHBOARD_METRICS] == ["passrate", "geomean", "compile_time", "memory"]


def test_directions_and_minimum_effects_are_looked_up_by_any_finding_metric() -> None:
    assert reg.better_of("speedup") is reg.Better.HIGHER and reg.better_of("abs_latency") is reg.Better.LOWER
    assert reg.better_of("geomean") is reg.Better.HIGHER and reg.better_of("accuracy") is reg.Better.HIGHER
    assert reg.min_effect_of("compilation_latency") == 0.10 and reg.min_effect_of("accuracy") == 0.0
    assert reg.Better.LOWER.is_regression(+0.1) and not reg.Better.HIGHER.is_regression(+0.1)
    with pytest.raises(KeyError, match="no result metric"):
        reg.better_of("throughput_typo")
    assert set(reg.BISECT_METRICS) == {m.name for m in reg.DETECTED_METRICS} | {"accuracy"}


def test_optional_metrics_show_only_where_measured() -> None:
    inference = {"speedup": [1.2, None], "eager_throughput": [None, None]}
    assert reg.EAGER_THROUGHPUT not in reg.shown_metrics(inference)
    assert reg.COMPRESSION_RATIO in reg.shown_metrics(inference)  # not optional: shown even without values
    training = {"speedup": [1.2], "eager_throughput": [None, 310.0]}
    assert reg.EAGER_THROUGHPUT in reg.shown_metrics(training)
    assert reg.COMPILED_THROUGHPUT not in reg.shown_metrics(training)


def test_texts_follow_the_display_of_each_metric() -> None:
    assert reg.SPEEDUP.text(1.234) == "1.23x" and reg.ABS_LATENCY.text(1.23456) == "1.235"
    assert reg.COMPILATION_LATENCY.text(None) == "-" and reg.COMPRESSION_RATIO.plain_text(1.2) == "1.20"
    assert reg.ABS_LATENCY.csv_heading == "abs_latency (ms)"
    assert reg.COMPRESSION_RATIO.csv_heading == "compression_ratio"


@pytest.mark.parametrize(("accuracy", "passed", "shown"), [
    ("pass", True, "pass"), ("fail_accuracy", False, "fail_accuracy"), ("pass_due_to_skip", True, "pass_due_to_skip"),
    (None, True, "pass"), (None, False, "fail_to_run"), ("timeout", False, "timeout")])
def test_display_status(accuracy: str | None, passed: bool, shown: str) -> None:
    assert display_status(accuracy, passed) == shown


def test_the_gate_is_the_contracts_passing_set() -> None:
    for status in KNOWN_STATUSES:
        assert accuracy_gate(status) == (status in PASSING_STATUSES)
    assert accuracy_gate(None)  # no accuracy file: the speedup counts as measured
    assert gated_speedup(1.5, True) == 1.5 and gated_speedup(1.5, False) == 0.0 and gated_speedup(None, True) == 0.0
    row = PerformanceRow(dev="cpu", name="m", batch_size=8, speedup=1.5, abs_latency=2.0, compilation_latency=10.0,
                         compression_ratio=1.1)
    assert ModelResult("m", 8, "pass_due_to_skip", row).gated_speedup == 1.5
    assert ModelResult("m", 8, "fail_accuracy", row).gated_speedup == 0.0
    assert ModelResult("m", 8, None, None).gated_speedup == 0.0


def test_summary_and_warnings_use_the_registry_limits(monkeypatch) -> None:
    rows = [PerformanceRow(dev="cpu", name=n, batch_size=8, speedup=s, abs_latency=2.0, compilation_latency=c,
                           compression_ratio=1.1) for n, s, c in (("slow", 0.9, 10.0), ("ok", 1.3, 130.0))]
    results = [ModelResult(r.name, 8, "pass", r) for r in rows]
    assert [w.reason for w in model_warnings(results)] == ["speedup 0.90x < 0.95x", "compile 130 s > 120 s"]
    monkeypatch.setattr("perfdash.metrics.SPEEDUP", dataclasses.replace(reg.SPEEDUP, warn_below=0.8))
    monkeypatch.setattr("perfdash.metrics.COMPILATION_LATENCY",
                        dataclasses.replace(reg.COMPILATION_LATENCY, warn_above=200.0))
    assert model_warnings(results) == []
    assert summarize_results(results).passed == 2
