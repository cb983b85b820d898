"""Each series' noise where people decide (issue 39 item 3), in headless Chromium: the model page's noise table, the
suite page's noise per model and the summary's flag of a series too noisy to catch a 5 % change.

Fourteen ingested and detected nights of one configuration, each model's speedup ``1.5 * exp(d * k)`` with ``k``
below (median 0, median |k| 1, also of its first ten), so its robust CV is d / Φ⁻¹(3/4) by construction; every night
carries a generated-code fingerprint, the same code every night except for ``recoded``, whose code changed three
nights before the end; ``stepped`` drops 20 % on its eleventh night (a change-point finding)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from statistics import NormalDist

import httpx
import pytest
from playwright.sync_api import Page, expect

from perfdash.contract import AccuracyRow, ModelSamples, PerformanceRow, append_row, append_samples
from perfdash.generated_code import fingerprint
from perfdash.manifest import MachineInfo, Manifest, RunConfig

MAD_FACTOR = 1 / NormalDist().inv_cdf(0.75)
K = (0, 1, -1, 2, -2, 3, -3, 0.5, -0.5, 0, 1, -1, 4, -4)
SPREAD = {"steady": 0.002, "jittery": 0.04, "recoded": 0.002, "stepped": 0.002}
NIGHTS = [f"2026-08-{day:02d}" for day in range(1, len(K) + 1)]
RECODED_FROM = len(K) - 3  # recoded's new code: its last three nights
STEP_AT = 10


def _code(name: str, night: int) -> str:
    changed = name == "recoded" and night >= RECODED_FROM
    return f"def call(args):\n    # {name}\n    return kernel_{'b' if changed else 'a'}(args)\n"


def _write(root: Path) -> list[Path]:
    config = RunConfig(suite="timm_models", backend="inductor", threads=4)
    key = config.key()
    folders = []
    for n, night in enumerate(NIGHTS):
        folder = root / night
        folder.mkdir(parents=True)
        start = datetime.fromisoformat(night + "T01:00:00+00:00")
        Manifest(config=config, machine=MachineInfo(host="noise-02", device="cpu", cpu_model="Noise Xeon", cpu_count=4),
                 torch_git_commit=f"{n:040d}", start_time=start,
                 end_time=start + timedelta(hours=1)).write(folder / key.filename("manifest"))
        for name, d in SPREAD.items():
            speedup = 1.5 * math.exp(d * K[n]) * (0.8 if name == "stepped" and n >= STEP_AT else 1.0)
            append_row(folder / key.filename("performance"), PerformanceRow("cpu", name, 2, speedup, 1.0, 10.0))
            append_row(folder / key.filename("accuracy"), AccuracyRow("cpu", name, 2, "pass"))
            append_samples(folder / key.filename("samples"), ModelSamples(
                name, 2, (1.5, 1.5), (1.0, 1.0), code=fingerprint([_code(name, n)])))
        folders.append(folder)
    return folders


@pytest.fixture(scope="module")
def noise_pages(postgres_url: str, tmp_path_factory, web_harness) -> Iterator:
    url = web_harness.fresh_database(postgres_url)
    for folder in _write(tmp_path_factory.mktemp("noise-pages")):
        web_harness.detect(url, web_harness.ingest_dir(url, folder))
    server = web_harness.start_server(url)
    yield server
    server.stop()


def _latest(server) -> dict:
    latest = max(r["id"] for r in httpx.get(f"{server.url}/api/v1/runs").json())
    return httpx.get(f"{server.url}/api/v1/runs/{latest}").json()


def _percent(value: float) -> str:
    return f"{100 * value:.1f} %"


def test_the_model_page_shows_noise_and_detectable_change(noise_pages, page: Page) -> None:
    from perfdash.noise import minimum_detectable_effect

    series = {r["name"]: r["series_id"] for r in _latest(noise_pages)["results"]}
    page.goto(f"{noise_pages.url}/model/{series['steady']}")
    speedup = page.locator("#noise-table tr[data-metric='speedup']")
    expect(speedup.locator(".noise-cv")).to_have_text(_percent(0.002 * MAD_FACTOR))  # 0.3 %
    expect(speedup.locator(".detects")).to_have_text("≥ 5.0 %")  # the policy's minimum effect
    expect(speedup.locator(".basis")).to_have_text(f"{len(K)} runs of unchanged generated code")

    page.goto(f"{noise_pages.url}/model/{series['jittery']}")
    speedup = page.locator("#noise-table tr[data-metric='speedup']")
    cv = 0.04 * MAD_FACTOR
    mde = minimum_detectable_effect(cv, min_effect=0.05, p_value=1.5e-3, before=len(K))
    expect(speedup.locator(".noise-cv")).to_have_text(_percent(cv))  # 5.9 %
    expect(speedup.locator(".detects")).to_have_text(f"≥ {_percent(mde)} cannot catch 5 %")
    expect(speedup).to_have_class("cannot-catch")

    # the code changed three nights ago: three runs of the new code are too few for an estimate
    page.goto(f"{noise_pages.url}/model/{series['recoded']}")
    speedup = page.locator("#noise-table tr[data-metric='speedup']")
    expect(speedup.locator(".noise-cv")).to_have_text("not enough runs (3 of 5)")
    expect(speedup.locator(".detects")).to_have_text("-")
    expect(speedup.locator(".basis")).to_have_text("3 runs of unchanged generated code")


def test_a_finding_on_the_model_page_says_how_far_beyond_the_noise_it_is(noise_pages, page: Page) -> None:
    series = {r["name"]: r["series_id"] for r in _latest(noise_pages)["results"]}["stepped"]
    found = [f for f in httpx.get(f"{noise_pages.url}/api/v1/findings", params={"series_id": series}).json()
             if f["metric"] == "speedup"]
    assert found, "the 20 % step was not found"
    # against the noise of the ten runs before the step
    sigmas = abs(math.log1p(found[0]["change_pct"] / 100)) / (0.002 * MAD_FACTOR)
    page.goto(f"{noise_pages.url}/model/{series}")
    expect(page.locator("tr.finding .sigmas").first).to_have_text(f"{sigmas:.1f}σ beyond this series' noise")


def test_the_suite_page_shows_each_models_noise(noise_pages, page: Page) -> None:
    page.goto(f"{noise_pages.url}/suite/{_latest(noise_pages)['id']}")
    steady = page.locator("#models tr[data-name='steady']")
    expect(steady.locator(".noise-cv")).to_have_text(_percent(0.002 * MAD_FACTOR))
    expect(steady.locator(".detects")).to_have_text("≥ 5.0 %")
    expect(page.locator("#models tr[data-name='jittery'] .detects")).to_contain_text("cannot catch 5 %")
    expect(page.locator("#models tr[data-name='recoded'] .noise-cv")).to_have_text("not enough runs (3 of 5)")
    # an older run's page: the noise as of that run (its first ten nights, recoded's old code)
    tenth = sorted(r["id"] for r in httpx.get(f"{noise_pages.url}/api/v1/runs").json())[9]
    page.goto(f"{noise_pages.url}/suite/{tenth}")
    recoded = page.locator("#models tr[data-name='recoded'] .noise-cv")
    expect(recoded).to_have_text(_percent(0.002 * MAD_FACTOR))
    expect(recoded).to_have_attribute("title", "10 runs of unchanged generated code")


def test_the_summary_flags_the_series_that_cannot_catch_five_percent(noise_pages, page: Page) -> None:
    from perfdash.noise import minimum_detectable_effect

    page.goto(f"{noise_pages.url}/")
    expect(page.locator("#too-noisy-note")).to_contain_text("1 series too noisy to catch a 5 % change")
    rows = page.locator("#too-noisy-table tbody tr")
    expect(rows).to_have_count(1)  # the one configuration
    # jittery's speedup; steady and stepped catch 5 %, recoded has no estimate yet
    expect(rows.first.locator(".count")).to_have_text(f"1 of {len(SPREAD)}")
    expect(rows.first.locator(".models a")).to_have_count(1)
    expect(rows.first.locator(".models a")).to_have_attribute("data-name", "jittery")
    mde = minimum_detectable_effect(0.04 * MAD_FACTOR, min_effect=0.05, p_value=1.5e-3, before=len(K))
    expect(rows.first.locator(".models")).to_have_text(f"jittery (speedup ≥ {_percent(mde)})")
