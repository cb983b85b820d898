"""The Model page's generated code (headless Chromium): a "code changed" mark per point, the kernel tables of two
runs side by side, and the code diff only when asked for. Two nights of one model whose first kernel's vector width
changed on night 2 (real Inductor output, tests/contract/data/inductor_output_cpu.txt)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from perfdash.contract import AccuracyRow, ModelSamples, PerformanceRow, append_row, append_samples
from perfdash.generated_code import KernelTime, fingerprint, normalise, pack_source
from perfdash.manifest import MachineInfo, Manifest, RunConfig

OUTPUT = normalise((Path(__file__).parents[1] / "contract" / "data" / "inductor_output_cpu.txt").read_text())
NARROW = OUTPUT.replace("x1+=static_cast<int64_t>(16L)", "x1+=static_cast<int64_t>(8L)", 1)
NIGHTS = ("2026-09-01", "2026-09-02", "2026-09-03")


def _write(root: Path) -> list[Path]:
    config = RunConfig(suite="timm_models", backend="inductor", threads=4)
    key = config.key()
    folders = []
    for index, (night, code, first_us) in enumerate(zip(NIGHTS, (OUTPUT, OUTPUT, NARROW), (6.0, 6.1, 12.0),
                                                        strict=True)):
        folder = root / night
        folder.mkdir(parents=True)
        start = datetime.fromisoformat(night + "T01:00:00+00:00")
        Manifest(config=config, machine=MachineInfo(host="code-01", device="cpu", cpu_model="Code Xeon", cpu_count=4),
                 torch_git_commit=str(index + 1) * 40, start_time=start,
                 end_time=start + timedelta(hours=1)).write(folder / key.filename("manifest"))
        append_row(folder / key.filename("performance"), PerformanceRow("cpu", "resnet10t", 2, 1.5, 1.0, 10.0))
        append_row(folder / key.filename("accuracy"), AccuracyRow("cpu", "resnet10t", 2, "pass"))
        append_samples(folder / key.filename("samples"), ModelSamples(
            "resnet10t", 2, (1.5, 1.5), (1.0, 1.0), code=fingerprint([code]), code_source=pack_source([code]),
            kernel_times=(KernelTime("mkl::_mkl_linear", 60.0, 0.3, 2.0),
                          KernelTime("cpp_fused_addmm_relu_0", first_us, first_us / 200, 1.0))))
        folders.append(folder)
    return folders


@pytest.fixture(scope="module")
def code_server(postgres_url: str, tmp_path_factory, web_harness) -> Iterator:
    url = web_harness.fresh_database(postgres_url)
    for folder in _write(tmp_path_factory.mktemp("code")):
        web_harness.ingest_dir(url, folder)
    server = web_harness.start_server(url)
    yield server
    server.stop()


def test_model_page_marks_code_changes_and_compares_kernels(code_server, page: Page) -> None:
    series = httpx.get(f"{code_server.url}/api/v1/runs").json()
    run_ids = sorted(r["id"] for r in series)
    detail = httpx.get(f"{code_server.url}/api/v1/runs/{run_ids[-1]}").json()
    series_id = detail["results"][0]["series_id"]
    page.goto(f"{code_server.url}/model/{series_id}")
    marks = page.evaluate("JSON.parse(document.getElementById('chart-data').textContent).codeChanged")
    assert marks == [None, False, True]
    verdict = page.locator("#code-verdict")
    expect(verdict).to_contain_text(f"run {run_ids[1]} → run {run_ids[2]}: generated code changed")
    rows = page.locator("#kernel-table tbody tr")
    expect(rows).to_have_count(3)  # the library call, the changed kernel, the second kernel (no profile entry)
    changed = rows.filter(has_text="cpp_fused_addmm_relu_0")
    expect(changed).to_contain_text("changed")
    expect(changed).to_contain_text("+96.7%")
    expect(page.locator("#code-diff")).to_have_count(0)  # the diff only on request
    page.get_by_role("button", name="show the code diff").click()
    expect(page.locator("#code-diff")).to_contain_text("x1+=static_cast<int64_t>(8L)")
    # the two unchanged nights: the same code
    page.goto(f"{code_server.url}/model/{series_id}?code_a={run_ids[0]}&code_b={run_ids[1]}")
    expect(page.locator("#code-verdict")).to_contain_text("generated code unchanged")
    page.locator("details.points summary").click()
    expect(page.locator("#points tbody tr td.code-mark")).to_have_text(["changed", "same", "-"])
