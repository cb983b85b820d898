"""End to end: `perfdash run --suite hf_vision` on this CPU (two tiny models, batch size 1) -> `perfdash ingest` into
Postgres -> the Vision page in headless Chromium. Expected numbers come from the run's own files (contract readers
and the statistics module), never from the page's code."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from perfdash.contract import KNOWN_STATUSES, read_accuracy_csv, read_performance_csv, read_samples
from perfdash.manifest import Manifest

STEM = "inductor_hf_vision_float32_inference_cpu"
ROWS = ["ResNet_bs1", "Segformer_bs1"]  # the publication's order: classification before segmentation


def _files(run: Path) -> tuple[dict, dict, dict, Manifest]:  # type: ignore[type-arg]
    perf = {r.name: r for r in read_performance_csv(run / f"{STEM}_performance.csv")}
    acc = {r.name: r for r in read_accuracy_csv(run / f"{STEM}_accuracy.csv")}
    samples = {s.name: s for s in read_samples(run / f"{STEM}_samples.jsonl")}
    return perf, acc, samples, Manifest.read(run / f"{STEM}_manifest.json")


def test_the_run_writes_the_result_contract_one_row_per_model_and_batch_size(vision_run: Path) -> None:
    perf, acc, samples, manifest = _files(vision_run)
    assert sorted(perf) == sorted(acc) == sorted(samples) == sorted(ROWS)
    for name in ROWS:
        assert perf[name].batch_size == 1 and perf[name].speedup > 0 and perf[name].abs_latency > 0
        assert perf[name].compilation_latency is not None and perf[name].compilation_latency >= 0
        assert acc[name].accuracy in KNOWN_STATUSES
        assert len(samples[name].eager_ms) == len(samples[name].compiled_ms) == 5
        assert perf[name].abs_latency == pytest.approx(statistics.median(samples[name].compiled_ms), abs=1e-5)
    assert manifest.config.suite == "hf_vision" and manifest.config.batch_size == 1
    assert {"transformers", "timm"} <= set(manifest.suite_versions)
    assert manifest.config.env.get("TORCHINDUCTOR_FREEZING") == "1"


def test_ingest_command_takes_the_run(vision_run: Path, vision_server) -> None:  # type: ignore[no-untyped-def]
    """The real `perfdash ingest` on the real files: the same run again is recognised, not stored twice."""
    env = {**os.environ, "DATABASE_URL": vision_server.database_url}
    done = subprocess.run([sys.executable, "-m", "perfdash.cli", "ingest", str(vision_run)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    import sqlalchemy as sa

    engine = sa.create_engine(vision_server.database_url)
    try:
        with engine.connect() as connection:
            runs = connection.execute(sa.text(
                "SELECT count(*) FROM runs r JOIN configurations c ON c.id = r.configuration_id "
                "WHERE c.suite = 'hf_vision'")).scalar_one()
            names = connection.execute(sa.text("SELECT DISTINCT name FROM results ORDER BY name")).scalars().all()
    finally:
        engine.dispose()
    assert runs == 3  # the real night, the derived earlier night, the derived reduce-overhead run
    assert names == sorted([*ROWS, "ResNet_bs16"])


def _row(page: Page, name: str):  # type: ignore[no-untyped-def]
    return page.locator(f"table.vision[data-batch-size='1'] tr[data-name='{name}']")


def test_vision_page_shows_the_publication_table_with_its_charts(vision_run: Path, vision_server,  # type: ignore[no-untyped-def]
                                                                  page: Page) -> None:
    perf, acc, samples, _ = _files(vision_run)
    page.goto(vision_server.url + "/vision")
    expect(page.locator("nav a.active")).to_have_text("Vision")
    expect(page.locator("#compile-mode")).to_have_value("default")
    groups = page.locator("section.vision-group")
    expect(groups).to_have_count(1)
    table = page.locator("table.vision[data-batch-size='1']")
    expect(table.locator("thead th")).to_have_text(
        ["Task", "Model", "no compile (ms)", "compile (ms)", "improvement %", "compile s", "accuracy"])
    expect(table.locator("tbody tr")).to_have_count(2)
    expect(table.locator("tbody tr").nth(0)).to_have_attribute("data-name", "ResNet_bs1")
    expect(table.locator("tbody tr").nth(1)).to_have_attribute("data-name", "Segformer_bs1")
    for name, task, label in (("ResNet_bs1", "Image Classification", "ResNet"),
                              ("Segformer_bs1", "Image Segmentation", "Segformer")):
        eager = statistics.fmean(samples[name].eager_ms)  # the publication's statistic: the mean
        compiled = statistics.fmean(samples[name].compiled_ms)
        cells = _row(page, name).locator("td")
        expect(cells.nth(0)).to_have_text(task)
        expect(cells.nth(1)).to_have_text(label)
        expect(cells.nth(2)).to_have_text(f"{eager:.2f}")
        expect(cells.nth(3)).to_have_text(f"{compiled:.2f}")
        expect(cells.nth(4)).to_have_text(f"{(eager - compiled) / eager * 100:.1f}")
        expect(cells.nth(5)).to_have_text(f"{perf[name].compilation_latency:.1f}")
        expect(cells.nth(6)).to_have_text(acc[name].accuracy)
    # The duration and improvement bar charts beside the table and the trend below it are drawn (ECharts canvases).
    for kind in ("duration", "improvement", "trend"):
        chart = page.locator(f".chart[data-kind='{kind}'][data-chart$='-bs1']")
        expect(chart).to_have_attribute("data-drawn", "true")
        expect(chart.locator("canvas").first).to_be_visible()
    data = json.loads(page.locator("#vision-data").text_content() or "{}")
    (trend,) = data["trends"]
    assert len(trend["nights"]) == 2  # the earlier night and the real one
    assert [line["label"] for line in trend["lines"]] == ["ResNet", "Segformer"]
    for line, name in zip(trend["lines"], ROWS, strict=True):
        assert line["values"] == [round(perf[name].abs_latency, 4)] * 2


def test_compile_mode_selector_switches_the_tables(vision_server, page: Page) -> None:  # type: ignore[no-untyped-def]
    page.goto(vision_server.url + "/vision")
    expect(page.locator("#compile-mode option")).to_have_text(["default", "reduce-overhead"])
    page.locator("#compile-mode").select_option("reduce-overhead")  # vision.js submits the form on change
    page.wait_for_url("**compile_mode=reduce-overhead**")
    expect(page.locator("section.vision-group h2")).to_contain_text("compile mode reduce-overhead")
    expect(page.locator("section.vision-group h2")).to_contain_text("inductor_reduce_overhead")
    expect(page.locator("table.vision[data-batch-size='1'] tbody tr")).to_have_count(2)
    # An OOM at batch size 16 is that size's row; batch size 1 still has its numbers.
    oom = page.locator("table.vision[data-batch-size='16'] tr[data-name='ResNet_bs16'] td")
    expect(oom.nth(2)).to_have_text("OOM")
    expect(oom.nth(3)).to_have_text("OOM")
    expect(oom.nth(6)).to_have_text("OOM")
    expect(page.locator("h3")).to_have_text(["batch size 1", "batch size 16"])
    data = json.loads(page.locator("#vision-data").text_content() or "{}")
    assert [len(t["nights"]) for t in data["trends"]] == [1, 1]
    assert data["bars"][1]["compiled"] == [None]


def test_median_statistic_matches_the_csv(vision_run: Path, vision_server, page: Page) -> None:  # type: ignore[no-untyped-def]
    perf, _, _, _ = _files(vision_run)
    page.goto(vision_server.url + "/vision?stat=median")
    expect(page.locator("#stat")).to_have_value("median")
    for name in ROWS:
        row = perf[name]
        cells = _row(page, name).locator("td")
        expect(cells.nth(2)).to_have_text(f"{row.abs_latency * row.speedup:.2f}")  # median eager, per the contract
        expect(cells.nth(3)).to_have_text(f"{row.abs_latency:.2f}")


def test_vision_page_without_hf_vision_runs_says_how_to_make_them(empty_server, page: Page) -> None:  # type: ignore[no-untyped-def]
    page.goto(empty_server.url + "/vision")
    expect(page.locator("#no-vision")).to_contain_text("perfdash run --suite hf_vision")
    expect(page.locator("nav a.active")).to_have_text("Vision")
