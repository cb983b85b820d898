"""The bisection page (/bisections/{id}) in Chromium: what a reader sees of a real perfbisect result -- the verdict,
the culprit, every step, and every A/B the decision saw (its looks, order and samples) -- with no console error.

The result is a real ``Bisector`` run (perfbisect.procedure) on a simulated history, turned into the body the bisect
job posts (perfbisect.report.build_report(...).to_service()) and stored with the service's own request_bisection and
record_result, on a database of its own (night1's runs give the configuration a request names).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

COMMITS = [f"{i:02d}" + "c" * 38 for i in range(12)]  # 40-character shas, oldest first; the last is bad
GOOD = "9" * 40
CULPRIT = 8  # the search's last step is the culprit against its parent: the verification continues it


class _StepHistory:
    """Every commit from COMMITS[CULPRIT] on is 10 % slower; 1 % noise; COMMITS[5] (the first probe) does not build."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def build(self, sha: str) -> str | None:
        return "does not compile" if sha == COMMITS[5] else None

    def measure(self, sha: str, index: int) -> float:
        slow = sha != GOOD and COMMITS.index(sha) >= CULPRIT
        return 100.0 * (1.10 if slow else 1.0) * (1 + 0.01 * self.rng.gauss(0, 1))


@pytest.fixture(scope="module")
def bisection(postgres_url: str, web_harness) -> Iterator[tuple[object, int, dict]]:  # type: ignore[no-untyped-def]
    """(server, bisection id, the stored result) for one culprit_found bisection."""
    from perfbisect.gitops import Commit
    from perfbisect.procedure import Bisector
    from perfbisect.report import build_report
    from perfbisect.state import BisectState
    from perfbisect.stats import Policy

    from perfdash.bisection import BisectionIn, BisectionResult
    from service.alerts.bisections import record_result, request_bisection
    from service.db import make_engine, make_session_factory

    url = web_harness.fresh_database(postgres_url)
    web_harness.ingest_dir(url, web_harness.DATA / "night1")
    policy = Policy(threshold_pct=5)
    outcome = Bisector(_StepHistory(3), policy, BisectState(identity={})).run(GOOD, COMMITS)
    report = build_report(outcome, lambda sha: Commit(sha, f"change {sha[:2]}", "dev <d@x>", "2026-01-21"), GOOD,
                          COMMITS[-1], policy, len(COMMITS))
    engine = make_engine(url)
    try:
        with make_session_factory(engine)() as session:
            row, _created = request_bisection(session, BisectionIn(
                suite="huggingface", model="BertForMaskedLM", backend="inductor", metric="speedup",
                good_commit=GOOD, bad_commit=COMMITS[-1]))
            stored = record_result(session, row.id, BisectionResult.model_validate(report.to_service()))
            bisection_id, result = stored.id, dict(stored.result)
            session.commit()
    finally:
        engine.dispose()
    server = web_harness.start_server(url)
    yield server, bisection_id, result
    server.stop()


def test_the_page_shows_the_verdict_and_every_ab_the_decision_saw(page, bisection) -> None:  # type: ignore[no-untyped-def]
    server, bisection_id, result = bisection
    assert result["verdict"] == "culprit_found" and result["culprit"]["sha"] == COMMITS[CULPRIT]
    page.goto(f"{server.url}/bisections/{bisection_id}")  # type: ignore[attr-defined]

    verdict = page.locator("#verdict")
    expect(verdict).to_have_attribute("data-verdict", "culprit_found")
    expect(verdict.locator("h2")).to_have_text("Verdict: culprit found")
    expect(page.locator("#culprit")).to_contain_text(COMMITS[CULPRIT])
    expect(page.locator("#culprit")).to_contain_text("change 08")
    expect(page.locator("#status")).to_have_text("done")

    # every step, the broken build among them, in the order they were probed
    steps = result["steps"]
    rows = page.locator("#steps tbody tr")
    expect(rows).to_have_count(len(steps))
    for i, step in enumerate(steps):
        expect(rows.nth(i)).to_have_attribute("data-decision", step["decision"])
        expect(rows.nth(i).locator("td").nth(1)).to_have_text(step["sha"][:10])
    assert any(s["decision"] == "skip" for s in steps)

    # every A/B: the confirmation first, each measured step, the verification last
    records = [result["confirmation"], *(s["ab"] for s in steps if s["ab"]), result["verification"]]
    sections = page.locator("section.ab")
    expect(sections).to_have_count(len(records))
    expect(sections.first).to_have_attribute("data-purpose", "confirm")
    expect(sections.last).to_have_attribute("data-purpose", "verify")
    for i, record in enumerate(records):
        section = sections.nth(i)
        expect(section.locator(".answer")).to_have_text(record["answer"])
        expect(section.locator("table.rounds tbody tr")).to_have_count(len(record["rounds"]))
        expect(section.locator(".order code")).to_have_text(record["order"])
        expect(section.locator(".samples-a")).to_contain_text(f"A ({len(record['samples_a'])})")
        expect(section.locator(".samples-b")).to_contain_text(f"B ({len(record['samples_b'])})")
        expect(section.locator(".cap")).to_have_text(str(record["cap"]))
        last = record["rounds"][-1]
        last_row = section.locator("table.rounds tbody tr").last
        expect(last_row.locator("td").first).to_have_text(str(last["pairs"]))
        expect(last_row.locator("td").nth(3)).to_have_text(f"{last['llr']:+.2f}")
    # the steps pooled the noise the confirmation measured, and the page says how much
    assert records[1]["pooled_residuals"] > 0
    expect(sections.nth(1)).to_contain_text(f"noise pooled from {records[1]['pooled_residuals']} earlier residuals")
    expect(page.locator("#ab-method")).to_contain_text("sequential probability ratio test")
    # the verification continues the last step (the culprit against its parent) and says how many pairs were its
    carried = result["verification"]["carried_pairs"]
    assert carried == len(records[-2]["samples_a"]) > 0
    expect(sections.last.locator(".carried")).to_contain_text(f"its first {carried} pairs are that step's")
    expect(sections.nth(len(records) - 2).locator(".carried")).to_have_count(0)

    # the JSON link serves the same result
    expect(page.locator("#api-link")).to_have_attribute("href", re.compile(rf"/api/v1/bisections/{bisection_id}$"))


def test_the_culprit_comment_links_the_page_when_the_dashboard_has_an_address() -> None:
    from service.alerts.texts import culprit_body
    from service.models import BisectionRequest, Configuration

    row = BisectionRequest(id=4, model="BertForMaskedLM", metric="speedup", good_commit="a" * 40,
                           bad_commit="b" * 40, result={"verdict": "culprit_found", "culprit": {"sha": "c" * 40}})
    row.configuration = Configuration(suite="huggingface")
    assert "Bisection page: https://dash.example/bisections/4" in culprit_body(row, "https://dash.example/")
    assert "/bisections/" not in culprit_body(row)  # no address configured: no link
