"""Every link the nav bar and the pages' tables give to their data answers 200: the API's JSON behind each table,
PyTorch's CSV files of a run (parsed back with the contract's own reader, under the harness' file name), and the API
docs the nav links."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from perfdash.contract import parse_accuracy_csv, parse_performance_csv, read_performance_csv

DATA = Path(__file__).parent / "data"
STEM = "inductor_timm_models_float32_inference_cpu"


class Links(HTMLParser):
    """The nav's links, the data links (a.json, a.csv) and how many tables the page has."""

    def __init__(self) -> None:
        super().__init__()
        self.nav: list[str] = []
        self.data: list[str] = []
        self.tables = 0
        self._in_nav = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "nav":
            self._in_nav += 1
        elif tag == "table":
            self.tables += 1
        elif tag == "a" and a.get("href"):
            if self._in_nav:
                self.nav.append(a["href"] or "")
            if set((a.get("class") or "").split()) & {"json", "csv"}:
                self.data.append(a["href"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav":
            self._in_nav -= 1


def links_of(url: str) -> Links:
    page = httpx.get(url, follow_redirects=True)
    assert page.status_code == 200, url
    found = Links()
    found.feed(page.text)
    return found


@pytest.fixture(scope="module")
def pages(populated, lookup) -> list[str]:
    night2 = lookup.run_id("timm_models", "inductor", "2026-11-21")
    night1 = lookup.run_id("timm_models", "inductor", "2026-11-20")
    series = lookup.series_id("timm_models", "inductor", "resnet18")
    return ["/", f"/suite/{night2}", f"/model/{series}", "/trends", f"/compare?base={night1}&new={night2}",
            "/runs", "/training", "/releases"]


def test_nav_links_the_api_docs_and_every_nav_link_resolves(populated) -> None:
    nav = links_of(populated.url + "/").nav
    assert "/docs" in nav
    for href in nav:
        assert httpx.get(populated.url + href, follow_redirects=True).status_code == 200, href


def test_each_page_with_tables_links_their_data_and_every_link_resolves(populated, pages: list[str]) -> None:
    for path in pages:
        found = links_of(populated.url + path)
        assert found.tables == 0 or found.data, f"{path}: {found.tables} tables, no data link"
        for href in found.data:
            answer = httpx.get(populated.url + href)
            assert answer.status_code == 200, (path, href, answer.text[:200])
            assert answer.headers["content-type"].startswith(("application/json", "text/csv")), href


def test_a_runs_csv_is_pytorchs_file(populated, lookup) -> None:
    run_id = lookup.run_id("timm_models", "inductor", "2026-11-21")
    suite = links_of(f"{populated.url}/suite/{run_id}").data
    assert f"/api/v1/runs/{run_id}/csv/performance" in suite and f"/api/v1/runs/{run_id}/csv/accuracy" in suite
    performance = httpx.get(f"{populated.url}/api/v1/runs/{run_id}/csv/performance")
    assert performance.headers["content-disposition"] == f'inline; filename="{STEM}_performance.csv"'
    rows = parse_performance_csv(performance.content, "performance")
    source = read_performance_csv(DATA / "night2" / f"{STEM}_performance.csv")
    assert {r.name: r.speedup for r in rows} == pytest.approx({r.name: r.speedup for r in source})
    accuracy = httpx.get(f"{populated.url}/api/v1/runs/{run_id}/csv/accuracy")
    assert {r.name for r in parse_accuracy_csv(accuracy.content, "accuracy")} == {r.name for r in source}
    assert httpx.get(f"{populated.url}/api/v1/runs/999999/csv/accuracy").status_code == 404
    assert httpx.get(f"{populated.url}/api/v1/runs/{run_id}/csv/samples").status_code == 422
