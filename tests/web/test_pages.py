"""Every page in headless Chromium, on real CSVs ingested into Postgres through service.ingest.

Expected numbers are computed here from the fixture CSVs with perfdash.contract and perfdash.metrics (the
dashboard's definitions), never copied from the page's own code.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from perfdash.contract import join_results, read_accuracy_csv, read_performance_csv, read_samples
from perfdash.metrics import SuiteSummary, summarize_results

DATA = Path(__file__).parent / "data"
XSS_NAME = "<script>alert('xss')</script>"
NIGHT1, NIGHT2 = "2026-11-20", "2026-11-21"


def summary_of(night: str, backend: str, suite: str) -> SuiteSummary:
    stem = DATA / night / f"{backend}_{suite}_float32_inference_cpu"
    perf = read_performance_csv(Path(f"{stem}_performance.csv"))
    acc = read_accuracy_csv(Path(f"{stem}_accuracy.csv"))
    return summarize_results(join_results(perf, acc))


def speedups(night: str, backend: str, suite: str) -> dict[str, float]:
    """Gated speedups of one CSV pair: what the Suite page must show for passing models."""
    stem = DATA / night / f"{backend}_{suite}_float32_inference_cpu"
    joined = join_results(read_performance_csv(Path(f"{stem}_performance.csv")),
                          read_accuracy_csv(Path(f"{stem}_accuracy.csv")))
    return {r.name: r.gated_speedup for r in joined}


def summary_cell(page: Page, metric: str, backend: str, suite: str):  # type: ignore[no-untyped-def]
    table = page.locator(f"table.summary[data-metric='{metric}']")
    return table.locator("tr", has=page.locator(f"th:text-is('{backend}')")).locator(f"td[data-suite='{suite}']")


# --------------------------------------------------------------------------------------------------------------------


def test_empty_database_pages_say_how_to_ingest(empty, page: Page) -> None:
    for path in ("/", "/trends", "/compare", "/runs"):
        page.goto(empty.url + path)
        expect(page.locator("#empty-db")).to_contain_text("perfdash ingest results/")
    expect(page.locator("nav a.active")).to_have_text("Runs")


def test_home_shows_each_configuration_base_to_new(populated, page: Page) -> None:
    page.goto(populated.url + "/")
    expect(page.locator("section.group h2")).to_contain_text("cpu · float32 · inference · all-cores")
    for backend, suite in (("inductor", "timm_models"), ("inductor", "huggingface")):
        old, new = summary_of("night1", backend, suite), summary_of("night2", backend, suite)
        expect(summary_cell(page, "passrate", backend, suite)).to_have_text(
            f"{old.passrate_text} → {new.passrate_text}")
        expect(summary_cell(page, "geomean", backend, suite)).to_have_text(f"{old.geomean_text} → {new.geomean_text}")
        expect(summary_cell(page, "compile_time", backend, suite)).to_have_text(
            f"{old.compile_time_text} → {new.compile_time_text}")
        expect(summary_cell(page, "memory", backend, suite)).to_have_text(
            f"{old.compression_text} → {new.compression_text}")
    # aot_eager ran only on night 2: no base, no arrow; huggingface never ran with it.
    aot = summary_of("night2", "aot_eager", "timm_models")
    expect(summary_cell(page, "passrate", "aot_eager", "timm_models")).to_have_text(aot.passrate_text)
    # Colours from the data: huggingface passrate 2/3 -> 3/3 is better; its compile time rose from 50.6 to 53.3 s
    # (+5.3 %), worse; timm's passrate stays below 90 %: yellow; timm's compile time fell 8.9 %: better.
    expect(summary_cell(page, "passrate", "inductor", "huggingface")).to_have_class(re.compile(r"\bbetter\b"))
    expect(summary_cell(page, "compile_time", "inductor", "huggingface")).to_have_class(re.compile(r"\bworse\b"))
    expect(summary_cell(page, "passrate", "inductor", "timm_models")).to_have_class(re.compile(r"\bbelow-target\b"))
    expect(summary_cell(page, "compile_time", "inductor", "timm_models")).to_have_class(re.compile(r"\bbetter\b"))
    expect(summary_cell(page, "geomean", "inductor", "timm_models")).to_have_class("")  # -1 %: no colour


def test_home_cell_links_to_the_suite_page(populated, lookup, page: Page) -> None:
    page.goto(populated.url + "/")
    summary_cell(page, "passrate", "inductor", "timm_models").locator("a").click()
    expect(page).to_have_url(f"{populated.url}/suite/{lookup.run_id('timm_models', 'inductor', NIGHT2)}")
    expect(page.locator("h1")).to_contain_text("timm_models")


def test_home_group_links_to_its_trends_and_runs(populated, page: Page) -> None:
    page.goto(populated.url + "/")
    page.locator("section.group .meta a", has_text="runs").click()
    expect(page).to_have_url(re.compile(r"/runs\?device=cpu&dtype=float32&mode=inference&thread_config=all-cores$"))
    manifests = sorted(DATA.glob("night*/*_manifest.json"))  # one group: every fixture run is in it
    expect(page.locator("#runs tbody tr")).to_have_count(len(manifests))
    page.go_back()
    page.locator("section.group .meta a", has_text="trends").click()
    expect(page.locator("#trend-table tbody tr")).to_have_count(len({m.name for m in manifests}))


def test_suite_page_marks_failures_new_models_and_deltas(populated, lookup, page: Page) -> None:
    page.goto(f"{populated.url}/suite/{lookup.run_id('timm_models', 'inductor', NIGHT2)}")
    new, old = speedups("night2", "inductor", "timm_models"), speedups("night1", "inductor", "timm_models")
    rows = page.locator("#models tbody tr")
    expect(rows).to_have_count(len(new))
    for name, value in new.items():
        row = page.locator(f"#models tbody tr[data-name=\"{name}\"]")
        expect(row.locator("td").nth(3)).to_have_text(f"{value:.2f}x" if value > 0 else "-")
    convnext = page.locator("#models tbody tr[data-name='convnext_tiny']")
    expect(convnext.locator("td").nth(5)).to_have_text(f"{new['convnext_tiny'] / old['convnext_tiny'] - 1:+.1%}")
    expect(convnext.locator("td").nth(5)).to_have_class(re.compile(r"\bbetter\b"))
    failed = page.locator("#models tbody tr[data-name='efficientnet_b0']")
    expect(failed).to_have_class(re.compile(r"\bfailed\b"))
    expect(failed).to_contain_text("new failure")
    expect(failed.locator("td.status")).to_have_attribute("title", "RuntimeError: compiled model crashed")
    expect(page.locator("#models tbody tr[data-name='deit_small_patch16_224']")).to_contain_text("fixed")
    expect(page.locator("#models tbody tr[data-name='vit_tiny_patch16_224'] td.warnings")).to_contain_text(
        "speedup 0.91x < 0.95x")
    new_rows = page.locator("#models tbody tr", has=page.locator("span.tag.new"))
    expect(new_rows).to_have_count(1)
    expect(new_rows.locator("td.name a")).to_have_text(XSS_NAME)
    summary = summary_of("night2", "inductor", "timm_models")
    expect(page.locator("#run-summary")).to_contain_text(summary.geomean_unclipped_text)
    findings = page.locator("#findings li")
    expect(findings.filter(has_text="efficientnet_b0")).to_have_class("worse")
    expect(findings.filter(has_text="deit_small_patch16_224")).to_have_class("better")
    expect(page.locator(".run-meta a", has_text="Jenkins")).to_have_attribute(
        "href", "https://jenkins.example.org/job/perf-nightly/102/")


def test_suite_table_filters_and_sorts_and_keeps_them_in_the_url(populated, lookup, page: Page) -> None:
    url = f"{populated.url}/suite/{lookup.run_id('timm_models', 'inductor', NIGHT2)}"
    page.goto(url)
    visible = page.locator("#models tbody tr:visible")
    page.select_option(".filter-tag", "fail")
    expect(visible).to_have_count(1)
    expect(visible.first).to_have_attribute("data-name", "efficientnet_b0")
    page.select_option(".filter-tag", "regressed")
    expect(visible).to_have_count(1)
    expect(visible.first).to_have_attribute("data-name", "mobilenetv3_large_100")
    page.select_option(".filter-tag", "")
    page.fill(".filter-text", "NET")  # matching is case-insensitive
    names = speedups("night2", "inductor", "timm_models")
    matching = [n for n in names if "net" in n.lower()]
    expect(visible).to_have_count(len(matching))
    expect(page.locator(".filter-count")).to_have_text(f"{len(matching)} of {len(names)} models")
    expect(page).to_have_url(re.compile(r"[?&]q=NET"))
    page.fill(".filter-text", "")
    page.locator("#models th", has_text="speedup").first.click()  # ascending
    page.locator("#models th", has_text="speedup").first.click()  # descending
    ranked = sorted(((v, n) for n, v in speedups("night2", "inductor", "timm_models").items() if v > 0),
                    reverse=True)
    expect(page.locator("#models tbody tr").first).to_have_attribute("data-name", ranked[0][1])
    expect(page.locator("#models tbody tr").nth(len(ranked) - 1)).to_have_attribute("data-name", ranked[-1][1])
    # A permalink restores the view.
    page.goto(url + "?show=new&sort=3&dir=asc")
    expect(visible).to_have_count(1)
    expect(page.locator(".filter-tag")).to_have_value("new")
    expect(page.locator("#models th").nth(3)).to_have_attribute("aria-sort", "ascending")


def test_stored_strings_are_text_never_markup(populated, lookup, page: Page) -> None:
    series = lookup.series_id("timm_models", "inductor", XSS_NAME)
    for path in (f"/suite/{lookup.run_id('timm_models', 'inductor', NIGHT2)}", f"/model/{series}",
                 f"/compare?base={lookup.run_id('timm_models', 'inductor', NIGHT1)}"
                 f"&new={lookup.run_id('timm_models', 'inductor', NIGHT2)}"):
        page.goto(populated.url + path)
        expect(page.get_by_text(XSS_NAME).first).to_be_visible()
        # Only the app's own scripts exist on the page: none came from the data.
        sources = page.eval_on_selector_all("script", "els => els.map(e => e.src || e.type)")
        assert all(s == "application/json" or s.startswith(populated.url + "/static/") for s in sources), sources
    response = httpx.get(f"{populated.url}/model/{series}")
    assert XSS_NAME not in response.text  # escaped in HTML and in the embedded JSON
    assert "&lt;script&gt;alert(&#39;xss&#39;)&lt;/script&gt;" in response.text
    assert "script-src 'self'" in response.headers["content-security-policy"]


def test_model_page_charts_history_and_repro_command(populated, lookup, page: Page) -> None:
    series = lookup.series_id("huggingface", "inductor", "T5Small")
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{populated.url}/model/{series}")
    expect(page.locator("h1")).to_contain_text("T5Small")
    expect(page.locator(".chart canvas")).to_have_count(4)  # ECharts drew all four series charts
    assert errors == []  # charts.js drew the marks from the severities and labels the page carries
    latest = speedups("night2", "inductor", "huggingface")["T5Small"]
    expect(page.locator("#latest-speedup")).to_have_text(f"{latest:.2f}x")
    expect(page.locator("table.events")).to_contain_text("status fail_to_run → pass")
    finding = page.locator("table.events tr.finding")  # stored by the detector when night 2 arrived
    expect(finding).to_have_count(1)
    expect(finding).to_contain_text("T5Small")
    expect(finding).to_have_class(re.compile(r"\bbetter\b"))
    marks = page.evaluate("JSON.parse(document.getElementById('chart-data').textContent).findings")
    # the chart's colour and label come with the data (perfdash/verdicts.py), not from a rule in the JavaScript
    assert [(m["night"], m["category"], m["severity"], m["label"]) for m in marks] == [(NIGHT2, "fixed", "better",
                                                                                         "fixed")]
    note = page.locator("table.events tr.annotation")
    expect(note).to_contain_text("<b>transformers</b> pin moved")  # stored text, shown as text
    expect(note).to_contain_text("perf-oncall")
    marks = page.evaluate("JSON.parse(document.getElementById('chart-data').textContent).annotations")
    assert [m["night"] for m in marks] == [NIGHT2]
    command = page.locator("#repro-command").inner_text()
    assert command == ("perfdash run --suite huggingface --backend inductor --device cpu --dtype float32 "
                       "--mode inference --only T5Small")
    expect(page.locator("#repro-env")).to_have_text("TORCHINDUCTOR_FREEZING=1")
    page.locator("details.points summary").click()
    expect(page.locator("#points tbody tr")).to_have_count(2)
    expect(page.locator("#points tbody tr").first).to_contain_text("2222222222")
    # A range without data says so instead of drawing empty charts.
    page.goto(f"{populated.url}/model/{series}?from=2020-01-01&to=2020-12-31")
    expect(page.locator(".empty-range")).to_contain_text("No results of this model")


def test_model_page_shows_perfdash_activation_peak_beside_pytorchs_memory_ratio(populated, lookup, page: Page) -> None:
    """The activation peak from perfdash's samples file has its own name, chart and column; the memory ratio chart
    stays PyTorch's compression_ratio from the CSV."""
    stem = "inductor_timm_models_float32_inference_cpu"
    act = {n: {s.name: s for s in read_samples(DATA / n / f"{stem}_samples.jsonl")}["convnext_tiny"]
           for n in ("night1", "night2")}
    csv = {r.name: r for r in read_performance_csv(DATA / "night2" / f"{stem}_performance.csv")}["convnext_tiny"]
    page.goto(f"{populated.url}/model/{lookup.series_id('timm_models', 'inductor', 'convnext_tiny')}")
    expect(page.locator(".chart canvas")).to_have_count(5)
    latest = page.locator("#activation-peak")
    expect(latest).to_contain_text("activation peak (perfdash)")
    expect(latest).to_contain_text(f"eager {act['night2'].eager_activation_peak_mem:.4f} GB")
    expect(latest).to_contain_text(f"compiled {act['night2'].dynamo_activation_peak_mem:.4f} GB")
    expect(latest).to_contain_text(f"ratio {act['night2'].activation_ratio:.2f}x")
    data = page.evaluate("JSON.parse(document.getElementById('chart-data').textContent).series")
    assert data["activation_ratio"] == [pytest.approx(act[n].activation_ratio, abs=1e-4) for n in ("night1", "night2")]
    assert data["compression_ratio"][-1] == pytest.approx(csv.compression_ratio, abs=1e-4)
    page.locator("details.points summary").click()
    expect(page.locator("#points thead")).to_contain_text("activation peak (perfdash) GB")
    expect(page.locator("#points tbody tr").first.locator("td.activation")).to_have_text(
        f"{act['night2'].eager_activation_peak_mem:.4f} / {act['night2'].dynamo_activation_peak_mem:.4f}")
    # A model without perfdash's samples (PyTorch's files) has no such chart or column.
    page.goto(f"{populated.url}/model/{lookup.series_id('timm_models', 'inductor', 'resnet18')}")
    expect(page.locator(".chart canvas")).to_have_count(4)
    expect(page.locator("#activation-peak")).to_have_count(0)


def test_trends_filters_live_in_the_url(populated, page: Page) -> None:
    page.goto(f"{populated.url}/trends?suite=timm_models")
    expect(page.locator("#trend-table tbody tr")).to_have_count(2)  # inductor and aot_eager
    expect(page.locator(".chart canvas")).to_have_count(4)
    page.select_option("select[name=backend]", "inductor")
    page.click("#trend-filters button[type=submit]")
    expect(page).to_have_url(re.compile(r"suite=timm_models.*backend=inductor"))
    rows = page.locator("#trend-table tbody tr")
    expect(rows).to_have_count(1)
    old, new = summary_of("night1", "inductor", "timm_models"), summary_of("night2", "inductor", "timm_models")
    expect(rows.first.locator("td").nth(3)).to_have_text(f"{old.passrate_text} → {new.passrate_text}")
    page.goto(f"{populated.url}/trends?suite=timm_models&from=2026-11-21&to=2026-11-21")
    expect(page.locator("#trend-table tbody tr").first.locator("td").nth(4)).to_have_text(
        summary_of("night2", "aot_eager", "timm_models").geomean_text + " → "
        + summary_of("night2", "aot_eager", "timm_models").geomean_text)


def test_trends_weekly_points_keep_the_last_night_of_each_week(populated, page: Page) -> None:
    # Both fixture nights (Fri 2026-11-20, Sat 2026-11-21) fall in one week: weekly keeps night 2 only.
    page.goto(f"{populated.url}/trends?suite=timm_models&backend=inductor&granularity=week")
    new = summary_of("night2", "inductor", "timm_models")
    expect(page.locator("#trend-table tbody tr").first.locator("td").nth(3)).to_have_text(
        f"{new.passrate_text} → {new.passrate_text}")
    nights = page.evaluate("JSON.parse(document.getElementById('trend-data').textContent).nights")
    assert nights == [NIGHT2]
    expect(page.locator("select[name=granularity]")).to_have_value("week")


def test_compare_by_runs_and_by_commits(populated, lookup, page: Page) -> None:
    page.goto(f"{populated.url}/compare")
    option = page.locator("#compare-config option", has_text=re.compile(r"^timm_models · inductor ·"))
    page.select_option("#compare-config", option.get_attribute("value"))
    page.click("#compare-form button[type=submit]")
    counts = page.locator("#compare-counts")
    expect(counts).to_contain_text("1 regressions")
    expect(counts).to_contain_text("1 improvements")
    expect(counts).to_contain_text("1 new failures")
    expect(counts).to_contain_text("1 fixed")
    expect(counts).to_contain_text("1 new models")
    # which "regression" this page means (the Releases view means another): the speedup's, beyond 5 %
    expect(page.locator("#compare-meaning")).to_contain_text("speedup")
    expect(page.locator("#compare-meaning")).to_contain_text("5 %")
    expect(page.locator("#section-regressions tbody tr")).to_have_attribute("data-name", "mobilenetv3_large_100")
    expect(page.locator("select[name=base]")).to_have_value(str(lookup.run_id("timm_models", "inductor", NIGHT1)))
    expect(page.locator("select[name=new]")).to_have_value(str(lookup.run_id("timm_models", "inductor", NIGHT2)))
    expect(page.locator("#section-new-failures tbody tr")).to_have_attribute("data-name", "efficientnet_b0")
    page.fill("input[name=base_commit]", "1111111111")
    page.fill("input[name=new_commit]", "2222222")
    page.click("#compare-commits button[type=submit]")
    expect(page.locator("#section-fixed tbody tr")).to_have_attribute("data-name", "deit_small_patch16_224")
    page.locator("#section-improvements a", has_text="convnext_tiny").click()
    expect(page).to_have_url(f"{populated.url}/model/{lookup.series_id('timm_models', 'inductor', 'convnext_tiny')}")


def test_compare_refuses_runs_of_different_configurations(populated, lookup) -> None:
    base = lookup.run_id("huggingface", "inductor", NIGHT1)
    new = lookup.run_id("timm_models", "inductor", NIGHT2)
    response = httpx.get(f"{populated.url}/compare", params={"base": base, "new": new})
    assert response.status_code == 400
    assert "different configurations" in response.text


def test_compare_says_when_a_run_has_nothing_before_it(populated, lookup) -> None:
    only = lookup.run_id("timm_models", "aot_eager", NIGHT2)  # aot_eager ran on night 2 only
    response = httpx.get(f"{populated.url}/compare", params={"new": only})
    assert response.status_code == 400
    assert "first of its configuration" in response.text


def test_runs_page_lists_machine_versions_and_build(populated, page: Page) -> None:
    page.goto(f"{populated.url}/runs")
    rows = page.locator("#runs tbody tr")
    expect(rows).to_have_count(len(list((DATA / "night1").glob("*_manifest.json")))
                               + len(list((DATA / "night2").glob("*_manifest.json"))))
    first = rows.first
    expect(first).to_contain_text("Intel Xeon Platinum 8488C | 48 cores")
    expect(first).to_contain_text("timm 1.0.31")
    expect(first.locator("a", has_text="Jenkins")).to_have_attribute("href", re.compile(r"/perf-nightly/102/$"))
    page.select_option("select[name=suite]", "huggingface")
    page.click("#run-filters button[type=submit]")
    expect(rows).to_have_count(2)
    expect(page).to_have_url(re.compile(r"suite=huggingface"))
    rows.first.locator("a").first.click()
    expect(page.locator("h1")).to_contain_text("huggingface")


@pytest.mark.parametrize("path", ["/suite/987654", "/model/987654"])
def test_unknown_ids_are_404_pages(populated, path: str) -> None:
    response = httpx.get(populated.url + path)
    assert response.status_code == 404
    assert "There is no" in response.text


def test_pages_load_nothing_from_outside_the_app(populated, lookup, page: Page) -> None:
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    series = lookup.series_id("timm_models", "inductor", "resnet18")
    for path in ("/", f"/model/{series}", "/trends", "/runs"):
        page.goto(populated.url + path)
        page.wait_for_load_state("networkidle")
    assert requested and all(u.startswith(populated.url) or u.startswith("data:") for u in requested), requested
    assert any(u.endswith("/static/vendor/echarts/echarts.common.min.js") for u in requested)
