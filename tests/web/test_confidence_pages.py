"""Confidence intervals of speedups on the pages (headless Chromium) and in the API, on two nights written with raw
samples (tests/web/conftest.py write_noise_nights): both models 10 % slower on night 2; ``steady``'s intervals are
apart (a regression, red), ``noisy``'s overlap (within noise, not red)."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Page, expect

from perfdash.confidence import speedup_interval

NIGHT1, NIGHT2 = "2026-10-01", "2026-10-02"


def _runs(server) -> dict[str, int]:
    runs = httpx.get(f"{server.url}/api/v1/runs", params={"suite": "timm_models"}).json()
    return {r["night"]: r["id"] for r in runs}


def test_api_carries_each_speedups_interval_and_the_noise_verdict(noise_server) -> None:
    runs = _runs(noise_server)
    detail = httpx.get(f"{noise_server.url}/api/v1/runs/{runs[NIGHT2]}", params={"samples": "true"}).json()
    for result in detail["results"]:
        samples = result["samples"]
        expected = speedup_interval(samples["eager_ms"], samples["compiled_ms"])
        assert (result["speedup_ci_low"], result["speedup_ci_high"]) == (expected.low, expected.high)
        assert result["speedup_ci_low"] < result["speedup"] < result["speedup_ci_high"]
    comparison = httpx.get(f"{noise_server.url}/api/v1/compare/runs",
                           params={"base": runs[NIGHT1], "new": runs[NIGHT2]}).json()
    verdicts = {m["name"]: m["verdict"] for m in comparison["models"]}
    assert verdicts == {"steady": "regression", "noisy": "within_noise"}
    assert comparison["regressions"] == ["steady"] and comparison["within_noise"] == ["noisy"]


def test_suite_page_shows_intervals_and_marks_overlap_within_noise(noise_server, page: Page) -> None:
    runs = _runs(noise_server)
    page.goto(f"{noise_server.url}/suite/{runs[NIGHT2]}")
    noisy = page.locator("#models tr[data-name='noisy']")
    steady = page.locator("#models tr[data-name='steady']")
    expect(noisy.locator("small.ci")).to_have_text(re.compile(r"^\d+\.\d\d–\d+\.\d\dx$"))
    expect(steady.locator("small.ci")).to_have_text(re.compile(r"^\d+\.\d\d–\d+\.\d\dx$"))
    expect(noisy.locator(".tag.noise")).to_have_text("within noise")
    expect(noisy.locator("td.worse")).to_have_count(0)
    expect(steady.locator("td.worse")).to_have_count(1)
    expect(steady.locator(".tag.noise")).to_have_count(0)


def test_compare_page_lists_within_noise_apart_from_regressions(noise_server, page: Page) -> None:
    runs = _runs(noise_server)
    page.goto(f"{noise_server.url}/compare?base={runs[NIGHT1]}&new={runs[NIGHT2]}")
    counts = page.locator("#compare-counts")
    expect(counts).to_contain_text("1 regressions")
    expect(counts).to_contain_text("1 within noise")
    expect(page.locator("#section-regressions tbody tr")).to_have_attribute("data-name", "steady")
    expect(page.locator("#section-within-noise tbody tr")).to_have_attribute("data-name", "noisy")


def test_model_page_shows_the_latest_interval_and_each_nights(noise_server, page: Page) -> None:
    runs = _runs(noise_server)
    detail = httpx.get(f"{noise_server.url}/api/v1/runs/{runs[NIGHT2]}").json()
    steady = next(r for r in detail["results"] if r["name"] == "steady")
    page.goto(f"{noise_server.url}/model/{steady['series_id']}")
    expected = f"{steady['speedup_ci_low']:.2f}–{steady['speedup_ci_high']:.2f}x"
    expect(page.locator("#latest-speedup-ci")).to_contain_text(expected)
    expect(page.locator("#points td.ci").first).to_have_text(expected)


def _chart_series(page: Page, metric: str) -> list[str]:
    selector = f".chart[data-metric='{metric}']"
    return page.evaluate("s => echarts.getInstanceByDom(document.querySelector(s)).getOption().series.map(x => x.name)",
                         selector)


def test_model_chart_draws_the_interval_as_a_band(noise_server, page: Page) -> None:
    runs = _runs(noise_server)
    detail = httpx.get(f"{noise_server.url}/api/v1/runs/{runs[NIGHT2]}").json()
    noisy = next(r for r in detail["results"] if r["name"] == "noisy")
    page.goto(f"{noise_server.url}/model/{noisy['series_id']}")
    expect(page.locator(".chart canvas")).to_have_count(4)
    band = page.evaluate("JSON.parse(document.getElementById('chart-data').textContent).intervals.speedup")
    assert band["low"][-1] == round(noisy["speedup_ci_low"], 4)
    assert band["high"][-1] == round(noisy["speedup_ci_high"], 4)
    assert _chart_series(page, "speedup") == ["speedup (x)", "95 % CI low", "95 % CI"]
    assert _chart_series(page, "abs_latency") == ["latency (ms)"]
