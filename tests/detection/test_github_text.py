"""GitHub-safe text (issue 29): the hostile strings of tests/service/hostile.py, as model names, hosts, CPU names,
versions, commands and commit subjects, produce report comments, issue titles and bodies and culprit comments with
no live mention, link, image or markup of their own — checked on the markdown as GitHub renders it (CommonMark with
GFM tables, markdown-it), and on the text GitHub's mention and autolink filters would then see."""

from __future__ import annotations

import html
import importlib.util
import re
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from markdown_it import MarkdownIt
from pydantic import SecretStr

from perfdash import verdicts
from perfdash.bisection import BisectionResult
from service.alerts.confirmation import record_confirmation
from service.alerts.issues import comment_culprit, file_issue
from service.alerts.texts import culprit_body, issue_body, issue_title
from service.detection.detector import detect_run
from service.detection.report import build_report, render_report
from service.github import safe
from service.github.client import GitHubClient, GitHubConfig
from service.models import BisectionRequest, Configuration, Finding, Machine, Run


def _hostile():
    name = "perfdash_tests_hostile"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parent.parent / "service" / "hostile.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


HOSTILE = _hostile().GITHUB_HOSTILE
# What the templates and perfdash's own sentences may produce; nothing from data adds to it.
ALLOWED_TAGS = {"p", "h1", "h2", "h3", "table", "thead", "tbody", "tr", "th", "td", "ul", "li", "strong", "code", "pre",
                "details", "summary", "hr", "br"}
# What GitHub's filters turn into a mention, an issue link or an autolink in rendered text
LIVE = re.compile(r"@[A-Za-z0-9]|#\s*\d|(?i:\bgh-\d)|(?i:\b(?:https?|ftp|mailto):)|(?i:\bwww\.)")

MARKDOWN = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def rendered_problems(markdown: str, *, allow_headings: set[str] | None = None) -> list[str]:
    """What in ``markdown`` would be live on GitHub: tags outside ALLOWED_TAGS (links, images, raw HTML), headings
    not in ``allow_headings``, and mention or link patterns in the text outside code."""
    out = MARKDOWN.render(markdown)
    problems = [f"tag <{tag}>" for tag in re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", out)
                if tag.lower() not in ALLOWED_TAGS]
    problems += [f"comment {c!r}" for c in re.findall(r"<!--.*?-->", out, re.S)
                 if not c.startswith("<!-- perfdash:")]
    if allow_headings is not None:
        for heading in re.findall(r"<h[1-6]>(.*?)</h[1-6]>", out, re.S):
            if html.unescape(heading) not in allow_headings:
                problems.append(f"heading {heading!r}")
    text = re.sub(r"<pre>.*?</pre>|<code>.*?</code>", " ", out, flags=re.S)  # GitHub links nothing in code
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    problems += [f"live {m.group(0)!r} in {text[max(0, m.start() - 30):m.end() + 30]!r}" for m in LIVE.finditer(text)]
    return problems


@pytest.mark.parametrize("text", HOSTILE)
def test_each_hostile_string_is_literal_text(text: str) -> None:
    for markdown in (f"| x | {safe.inline(text)} |\n|---|---|\n| y | z |", f"Culprit: {safe.inline(text)}.",
                     f"Reproduce:\n{safe.code_block(text)}\nafter"):
        assert rendered_problems(markdown, allow_headings=set()) == [], markdown
    # what a reader sees is the string itself (controls and line breaks as spaces, the word joiner invisible)
    out = html.unescape(re.sub(r"<[^>]+>", "", MARKDOWN.render(f"Culprit: {safe.inline(text)}.")))
    expected = " ".join(re.sub(r"[\r\n\u2028\u2029]", " ", text).split())
    assert " ".join(out.replace(safe.WORD_JOINER, "").split()) == f"Culprit: {expected}."
    code = MARKDOWN.render(f"{safe.code_block(text)}\nafter")
    assert code.count("<pre>") == 1 and code.rstrip().endswith("<p>after</p>"), code
    title = safe.title(text)
    assert "\n" not in title and not LIVE.search(title.replace(safe.WORD_JOINER, "\x00"))


def _regression_with_hostile_data(session, store_run, series_values, model: str, text: str) -> tuple[int, Finding]:
    a = series_values(1, 22)
    runs = [store_run(night, {model: a[night] * (0.8 if night >= 20 else 1.0), "safe_model": 1.2},
                      statuses={model: "pass"}) for night in range(22)]
    for run_id in runs:
        detect_run(session, run_id)
    # the strings a manifest carries, all free text: host, CPU name (the machine fingerprint), versions, command,
    # the Jenkins URL
    last = session.get(Run, runs[-1])
    last.host, last.torch_version, last.command = text, text, f"perfdash run --filter '{text}'"
    last.suite_versions, last.jenkins_url = {"timm": text}, text
    machine = session.get(Machine, session.get(Configuration, last.configuration_id).machine_id)
    machine.fingerprint = f"{machine.fingerprint} {text}"[:300]
    session.flush()
    finding = session.scalars(sa.select(Finding).where(Finding.model == model, Finding.metric == "speedup")).one()
    return runs[-1], finding


TEMPLATE = Path(__file__).resolve().parents[2] / "templates" / "report.md.j2"
# its own and those it takes from the vocabulary (a finding section's report_heading)
HEADINGS_OF_THE_TEMPLATE = set(re.findall(r"^#+ ([^{\n]*?) #+$", TEMPLATE.read_text(), re.M)) | {
    c.report_heading for c in verdicts.FINDING_CATEGORIES if c.report_section} | {verdicts.SUSPECTED_REPORT_HEADING}


@pytest.mark.parametrize("text", HOSTILE)
def test_report_issue_and_culprit_comment_carry_no_live_markup(session, store_run, series_values, text) -> None:
    # a CSV field holds no line break (and ingest strips the ends); the rest is the name
    model = re.sub(r"[\r\n\u2028]", " ", text).strip()[:200]
    run_id, finding = _regression_with_hostile_data(session, store_run, series_values, model, text)
    report = render_report(build_report(session, run_id))
    assert len(HEADINGS_OF_THE_TEMPLATE) >= 10
    assert rendered_problems(report, allow_headings={*headings_of(report), *HEADINGS_OF_THE_TEMPLATE}) == []

    confirm = session.scalars(sa.select(BisectionRequest).where(BisectionRequest.finding_id == finding.id)).one()
    record_confirmation(session, confirm, BisectionResult(verdict="confirmed", good_samples=[1.5] * 10,
                                                          bad_samples=[1.2] * 10, change_pct=20.0, p_value=1e-5,
                                                          summary=text))
    assert rendered_problems(issue_body(finding, None), allow_headings=set()) == []
    title = issue_title(finding)
    assert "\n" not in title and not LIVE.search(title)
    # the confirmed regression asked for its bisection; the bisect job reports a commit whose subject is hostile
    bisection = _bisection(session, finding, {"verdict": "culprit_found", "summary": text, "jenkins_build_url": text,
                                              "culprit": {"sha": "c" * 40, "subject": text, "author": text,
                                                          "date": "2026-01-20"}})
    assert rendered_problems(culprit_body(bisection), allow_headings=set()) == []


def _bisection(session, finding: Finding, result: dict) -> BisectionRequest:
    bisection = session.scalars(sa.select(BisectionRequest).where(BisectionRequest.finding_id == finding.id,
                                                                  BisectionRequest.purpose == "bisect")).one()
    bisection.status, bisection.result = "done", result
    session.flush()
    return bisection


def headings_of(report: str) -> set[str]:
    """The report's own headings: its title and the per-suite detail headings (suite and compiler vocabulary)."""
    return {h for h in re.findall(r"^#+ (.*?)(?: #+)?$", report, re.M)
            if h.startswith("Performance Dashboard for") or re.fullmatch(r"[a-z_]+, [a-z_]+", h)}


def _client(github, **kwargs) -> GitHubClient:
    config = GitHubConfig(api_url=github.url, token=SecretStr("ghp_idempotentSECRET"),
                          repository="perfdash-test/dashboard")
    return GitHubClient(config, sleep=lambda _s: None, **kwargs)


@pytest.mark.parametrize("status", [500, 502, 504])
def test_a_create_that_failed_after_github_made_the_issue_never_leads_to_a_second(session, store_run, series_values,
                                                                                   github, status) -> None:
    """GitHub created the issue and answered an error (or the answer was lost), and the token cannot label, so a
    lookup by label would never find it: the client looks for the marker, finds the issue, posts nothing again."""
    github.state.drop_labels = True
    _run_id, finding = _regression_with_hostile_data(session, store_run, series_values, "resnet18", "plain")
    github.fail_after_next(github.canned(status), method="POST")
    with _client(github) as client:
        row = file_issue(session, client, finding, None)
        file_issue(session, client, finding, None)  # and again: the ledger says posted
    assert len(github.state.issues) == 1 and row.status == "posted"
    (issue,) = github.state.issues.values()
    assert row.issue_number == issue["number"] and issue["labels"] == []
    posts = [r for r in github.state.requests if r.method == "POST"]
    assert len(posts) == 1
    # looked up before the create and after the failed one (after asking once who the bot is, GET /user)
    methods = [r.method for r in github.state.requests if r.path != "/user"]
    assert methods[:3] == ["GET", "POST", "GET"]
    assert all("labels" not in r.query for r in github.state.requests if r.method == "GET")


def test_the_ledger_lost_is_no_duplicate_either(session, store_run, series_values, github) -> None:
    _run_id, finding = _regression_with_hostile_data(session, store_run, series_values, "resnet18", "plain")
    with _client(github) as client:
        row = file_issue(session, client, finding, None)
        session.delete(row)  # a restored backup, a ledger row lost: the marker on GitHub still names the issue
        session.flush()
        again = file_issue(session, client, finding, None)
    assert len(github.state.issues) == 1 and again.issue_number == row.issue_number


def test_a_culprit_comment_whose_answer_was_lost_is_posted_once(session, store_run, series_values, github) -> None:
    _run_id, finding = _regression_with_hostile_data(session, store_run, series_values, "resnet18", "plain")
    confirm = session.scalars(sa.select(BisectionRequest).where(BisectionRequest.finding_id == finding.id)).one()
    record_confirmation(session, confirm, BisectionResult(verdict="confirmed", good_samples=[1.5] * 10,
                                                          bad_samples=[1.2] * 10, change_pct=20.0, p_value=1e-5))
    bisection = _bisection(session, finding, {"verdict": "culprit_found", "culprit": {"sha": "c" * 40}})
    with _client(github) as client:
        file_issue(session, client, finding, None)
        github.fail_after_next(github.canned(502), method="POST")
        post = comment_culprit(session, client, bisection, None)
    assert post is not None and post.status == "posted"
    assert len(github.state.comments) == 1
