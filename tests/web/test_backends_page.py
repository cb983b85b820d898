"""End to end: real onnxruntime, openvino and eager runs of tiny models on this CPU -> ingest into Postgres -> the
Backends page (and the home page's summary) in headless Chromium. Expected numbers come from the runs' own files
through the contract's readers and perfdash.metrics, never from the page's code."""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from perfdash.contract import PerformanceRow, join_results, read_accuracy_csv, read_performance_csv
from perfdash.metrics import summarize_results
from runner.api import RunReport, run_suite
from runner.options import RunOptions

MODELS = Path(__file__).parents[1] / "runner" / "data" / "backends.toml"


def _load_web_harness():  # type: ignore[no-untyped-def]
    """tests/web/conftest.py's helpers (fresh database, ingest, live server), as tests/hf_vision loads them."""
    path = Path(__file__).parent / "conftest.py"
    spec = importlib.util.spec_from_file_location("perfdash_tests_web_harness_backends", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


web = _load_web_harness()


@dataclass(frozen=True)
class BackendRuns:
    reports: dict[str, RunReport]  # "onnxruntime", "openvino", "eager" (bs 2) and "onnxruntime_bs4"
    server: object


def _run(out: Path, backend: str, filters: tuple[str, ...], batch_size: int | None = None) -> RunReport:
    return run_suite(RunOptions(suite="torchbench", models_file=MODELS, backend=backend, repeat=3, warmup=1,
                                timeout_s=180.0, output_dir=out, filters=filters, batch_size=batch_size))


@pytest.fixture(scope="module")
def runs(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackendRuns]:
    root = tmp_path_factory.mktemp("backend_runs")
    reports = {
        "onnxruntime": _run(root / "ort", "onnxruntime", ("tiny_conv", "two_inputs", "unexportable")),
        "openvino": _run(root / "ov", "openvino", ("tiny_conv", "two_inputs")),
        "eager": _run(root / "eager", "eager", ("tiny_conv", "two_inputs")),
        "onnxruntime_bs4": _run(root / "ort4", "onnxruntime", ("tiny_conv",), batch_size=4),
    }
    url = web.fresh_database(postgres_url)
    for report in reports.values():
        web.ingest_dir(url, report.paths.performance.parent)
    server = web.start_server(url)
    yield BackendRuns(reports=reports, server=server)
    server.stop()


def _perf(report: RunReport) -> dict[str, PerformanceRow]:
    return {r.name: r for r in read_performance_csv(report.paths.performance)}


def test_backends_page_table_summary_and_chart(runs: BackendRuns, page: Page) -> None:
    # Each model at its suite's batch size: the runs without --batch-size (a failure row carries the batch size of
    # the accuracy check, PyTorch's accuracy batch size, so it is found here and not under a number).
    page.goto(runs.server.url + "/backends")  # type: ignore[attr-defined]
    expect(page.locator("nav a.active")).to_have_text("Backends")
    table = page.locator("#backends-table")
    expect(table).to_have_attribute("data-batch-size", "default")
    expect(table.locator("thead tr").first.locator("th[data-backend]")).to_have_count(3)
    assert table.locator("thead th[data-backend]").evaluate_all(
        "nodes => nodes.map(n => n.dataset.backend)") == ["eager", "onnxruntime", "openvino"]
    perf = {name: _perf(runs.reports[name]) for name in ("eager", "onnxruntime", "openvino")}
    for model in ("tiny_conv", "two_inputs"):
        row = table.locator(f"tbody tr[data-name='{model}']")
        eagers = [perf[b][model].abs_latency * perf[b][model].speedup for b in perf]
        expect(row.locator("td.eager")).to_have_text(f"{statistics.median(eagers):.2f}")
        for backend in perf:
            expected = perf[backend][model]
            expect(row.locator(f"td.latency[data-backend='{backend}']")).to_have_text(f"{expected.abs_latency:.2f}")
            expect(row.locator(f"td.speedup[data-backend='{backend}']")).to_have_text(f"{expected.speedup:.2f}x")
        # Exactly one fastest cell: the smallest latency of the row, eager's median included.
        latencies = {b: perf[b][model].abs_latency for b in perf}
        fastest = min(latencies, key=latencies.__getitem__)
        if statistics.median(eagers) < latencies[fastest]:
            expect(row.locator("td.fastest")).to_have_count(1)
            expect(row.locator("td.eager")).to_have_class("num eager fastest")
        else:
            expect(row.locator(f"td.fastest[data-backend='{fastest}']")).to_have_count(1)
            expect(row.locator("td.fastest")).to_have_count(1)
    # The model no exporter takes is named as its failure under onnxruntime, and openvino never ran it.
    failed = table.locator("tbody tr[data-name='unexportable']")
    expect(failed.locator("td.status[data-backend='onnxruntime']")).to_have_text("fail_to_run")
    expect(failed.locator("td.missing[data-backend='openvino']")).to_have_text("not run")
    # Per-backend summary: PyTorch's metrics over the run's own files.
    ort = runs.reports["onnxruntime"]
    summary = summarize_results(join_results(read_performance_csv(ort.paths.performance),
                                             read_accuracy_csv(ort.paths.accuracy)))
    expect(table.locator("tr[data-row='passrate'] td[data-backend='onnxruntime']")).to_have_text(
        summary.passrate_text)
    assert summary.passrate_text == "67%, 2/3"
    expect(table.locator("tr[data-row='geomean'] td[data-backend='onnxruntime']")).to_have_text(
        f"{summary.geomean_text} ({summary.geomean_unclipped_text})")
    expect(table.locator("tr[data-row='compile'] td[data-backend='onnxruntime']")).to_have_text(
        summary.compile_time_text)
    # The publication's chart: tiny_conv's latency per backend at batch sizes 2 and 4.
    page.locator("#filter-model").select_option("tiny_conv")  # backends.js submits the form on change
    page.wait_for_url("**model=tiny_conv**")
    chart = page.locator("#backends-chart")
    expect(chart).to_have_attribute("data-drawn", "true")
    expect(chart.locator("canvas").first).to_be_visible()
    data = json.loads(page.locator("#backends-data").text_content() or "{}")
    assert data["model"] == "tiny_conv" and data["batch_sizes"] == [2, 4]
    lines = {line["label"]: line["values"] for line in data["lines"]}
    bs4 = _perf(runs.reports["onnxruntime_bs4"])["tiny_conv"]
    assert lines["onnxruntime"] == [round(perf["onnxruntime"]["tiny_conv"].abs_latency, 4),
                                    round(bs4.abs_latency, 4)]
    assert lines["openvino"] == [round(perf["openvino"]["tiny_conv"].abs_latency, 4), None]


def test_batch_size_filter_is_a_permalink(runs: BackendRuns, page: Page) -> None:
    url = runs.server.url  # type: ignore[attr-defined]
    page.goto(url + "/backends")
    # First the suite's own batch sizes (the runs without --batch-size: a nightly's models differ in batch size).
    expect(page.locator("#filter-batch-size option")).to_have_text(["suite default", "2", "4"])
    expect(page.locator("#backends-table")).to_have_attribute("data-batch-size", "default")
    default_row = page.locator("#backends-table tbody tr[data-name='tiny_conv']")
    expect(default_row.locator("td.bs")).to_have_text("2")
    ort = _perf(runs.reports["onnxruntime"])["tiny_conv"]
    expect(default_row.locator("td.latency[data-backend='onnxruntime']")).to_have_text(f"{ort.abs_latency:.2f}")
    page.locator("#filter-batch-size").select_option("4")
    page.wait_for_url("**batch_size=4**")
    expect(page.locator("#backends-table")).to_have_attribute("data-batch-size", "4")
    bs4 = _perf(runs.reports["onnxruntime_bs4"])["tiny_conv"]
    row = page.locator("#backends-table tbody tr[data-name='tiny_conv']")
    expect(row.locator("td.latency[data-backend='onnxruntime']")).to_have_text(f"{bs4.abs_latency:.2f}")
    expect(row.locator("td.missing[data-backend='openvino']")).to_have_text("not run")
    permalink = page.locator("#permalink").get_attribute("href")
    assert permalink is not None and "batch_size=4" in permalink and "suite=torchbench" in permalink
    page.goto(url + permalink)
    expect(page.locator("#backends-table")).to_have_attribute("data-batch-size", "4")
    expect(page.locator("#filter-batch-size")).to_have_value("4")


def test_home_summary_groups_the_new_backends(runs: BackendRuns, page: Page) -> None:
    page.goto(runs.server.url + "/")  # type: ignore[attr-defined]
    body = page.locator("main")
    for label in ("onnxruntime", "openvino", "eager"):
        expect(body).to_contain_text(label)


def test_backends_page_without_runs_says_how_to_make_them(empty, page: Page) -> None:  # type: ignore[no-untyped-def]
    page.goto(empty.url + "/backends")
    expect(page.locator("#no-backends")).to_contain_text("perfdash run --suite timm_models --backend onnxruntime")
