"""The summary `perfdash run` prints, on hand-made rows: PyTorch's formulas and formatting."""

from __future__ import annotations

import math
from pathlib import Path

from rich.console import Console

from perfdash.contract import AccuracyRow, ModelSamples, PerformanceRow, append_row, throughput
from perfdash.manifest import RunConfig
from perfdash.metrics import summarize_results
from runner.api import RunPaths, read_results
from runner.summary import render


def _write(tmp_path: Path) -> RunPaths:
    config = RunConfig(suite="timm_models", backend="inductor")
    paths = RunPaths.for_config(tmp_path, config)
    rows = [  # name, speedup, compile s, memory ratio, accuracy
        ("a", 2.0, 10.0, 1.5, "pass"),
        ("b", 0.5, 20.0, 0.8, "pass"),
        ("c", 3.0, 30.0, 2.0, "fail_accuracy"),  # gated: speedup counts as 0
        ("d", 1.2, 60.0, 1.0, "pass_due_to_skip"),
    ]
    for name, speedup, compile_s, ratio, status in rows:
        append_row(paths.performance, PerformanceRow("cpu", name, 8, speedup, 1.0, compile_s, ratio, 1.0, 1.0))
        append_row(paths.accuracy, AccuracyRow("cpu", name, 8, status))
    append_row(paths.performance, PerformanceRow.failure("cpu", "e"))
    append_row(paths.accuracy, AccuracyRow("cpu", "e", 8, "eager_1st_run_fail"))
    return paths


def test_summary_formulas(tmp_path: Path) -> None:
    results = read_results(_write(tmp_path))
    summary = summarize_results(results)
    assert (summary.passed, summary.total) == (3, 5)
    assert summary.passrate_text == "60%, 3/5"
    # clipped: max(s, 1) before the geometric mean; unclipped shows that b got slower
    assert math.isclose(summary.geomean_speedup, (2.0 * 1.0 * 1.2) ** (1 / 3))
    assert math.isclose(summary.geomean_speedup_unclipped, (2.0 * 0.5 * 1.2) ** (1 / 3))
    assert math.isclose(summary.mean_compile_time_s, (10 + 20 + 60) / 3)
    assert math.isclose(summary.mean_compression_ratio, (1.5 + 0.8 + 1.0) / 3)


def test_printed_summary(tmp_path: Path) -> None:
    results = read_results(_write(tmp_path))
    console = Console(width=200, record=True)
    console.print(render(RunConfig(suite="timm_models", backend="inductor"), summarize_results(results), results))
    text = console.export_text()
    assert "inductor_timm_models_float32_inference_cpu" in text
    for expected in ("60%, 3/5", "1.34x", "1.06x", "30.00", "1.10x", "fail_accuracy", "b: speedup 0.50x"):
        assert expected in text, expected
    # headings as the dashboard's: the registry's
    for heading in ("passrate", "geomean speedup", "geomean unclipped", "compile s", "memory ratio", "latency ms"):
        assert heading in text, heading


def test_printed_throughput_beside_the_speedup(tmp_path: Path) -> None:
    results = read_results(_write(tmp_path))
    samples = [ModelSamples(name="a", batch_size=8, eager_ms=(4.0, 5.0, 6.0), compiled_ms=(2.0, 2.5, 3.0),
                            eager_throughput=throughput(8, (4.0, 5.0, 6.0)),
                            compiled_throughput=throughput(8, (2.0, 2.5, 3.0)))]
    console = Console(width=240, record=True)
    console.print(render(RunConfig(suite="timm_models", backend="inductor"), summarize_results(results), results,
                         samples))
    text = console.export_text()
    assert "eager samples/s" in text and "compiled samples/s" in text
    row = next(line for line in text.splitlines() if line.lstrip("│ ").startswith("a "))
    assert "1600.0" in row and "3200.0" in row  # 8 samples over the 5 ms and 2.5 ms medians, as the dashboard writes
    # without samples (plain PyTorch CSVs) the table has no throughput columns
    console = Console(width=240, record=True)
    console.print(render(RunConfig(suite="timm_models", backend="inductor"), summarize_results(results), results))
    assert "samples/s" not in console.export_text()


def test_an_accuracy_only_run_counts_accuracy_passes_and_warns_only_of_failures(tmp_path: Path) -> None:
    config = RunConfig(suite="torchbench", backend="inductor")
    paths = RunPaths.for_config(tmp_path, config)
    for name, status in (("a", "pass"), ("b", "pass"), ("c", "fail_accuracy"), ("d", "model_fail_to_load")):
        append_row(paths.accuracy, AccuracyRow("cpu", name, 4, status))
    results = read_results(paths)
    summary = summarize_results(results)
    # d never ran (left out of the total, as runner.py does); a and b passed of a, b and c
    assert summary.passrate_text == "67%, 2/3"
    assert summary.geomean_speedup is None and summary.mean_compile_time_s is None
    console = Console(width=200, record=True)
    console.print(render(config, summary, results))
    text = console.export_text()
    assert "67%, 2/3" in text
    assert "failed to run" not in text and "c: accuracy fail_accuracy" in text
