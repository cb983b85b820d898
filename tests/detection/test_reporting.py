"""The report markdown and posting it, issues and culprit comments through the ledger, against the GitHub stand-in."""

from __future__ import annotations

import dataclasses
import re
from datetime import date

import sqlalchemy as sa
from pydantic import SecretStr

from perfdash import verdicts
from perfdash.bisection import BisectionResult
from service.alerts.confirmation import record_confirmation
from service.alerts.issues import comment_culprit, file_issue, issue_finding_ids
from service.detection.detector import detect_run
from service.detection.report import TEMPLATE, TEMPLATES, ReportContext, build_report, render_report
from service.github.client import GitHubClient, GitHubConfig
from service.github.models import GithubPost
from service.github.publisher import publish, retry_unposted
from service.models import BisectionRequest, Finding

TOKEN = "ghp_reportingSECRET42"


def _client(github, **kwargs) -> GitHubClient:
    config = GitHubConfig(api_url=github.url, token=SecretStr(TOKEN), repository="pytorch/pytorch")
    return GitHubClient(config, sleep=lambda _s: None, **kwargs)


def _regression(session, store_run, series_values) -> tuple[list[int], Finding]:
    a, b = series_values(1, 22), series_values(2, 22, level=2.0)
    runs = []
    for night in range(22):
        runs.append(store_run(night, {"resnet18": a[night] * (0.8 if night >= 20 else 1), "vit_small": b[night]}))
        detect_run(session, runs[-1])
    finding = session.scalars(sa.select(Finding).where(Finding.metric == "speedup")).unique().one()
    return runs, finding


def test_report_layout_and_numbers(session, store_run) -> None:
    for night, speed in ((0, 1.30), (1, 1.10)):
        store_run(night, {"resnet18": speed, "vit_small": 0.8, "bert": None})
        store_run(night, {"gpt2": 1.5, "t5": 2.0}, suite="huggingface")
        store_run(night, {"resnet18": 1.0, "vit_small": 1.0, "bert": 1.0}, backend="aot_eager")
        last = store_run(night, {"gpt2": 1.1, "t5": 1.0}, suite="huggingface", backend="aot_eager",
                         statuses={"t5": "fail_accuracy"} if night else None)
    store_run(1, {"resnet18": 9.9}, dtype="bfloat16")  # another group: not in this report
    detect_run(session, last)
    context = build_report(session, last, dashboard_url="http://perfdash.example/")
    text = render_report(context)
    assert text.splitlines()[1] == "# Performance Dashboard for float32 precision -- multiple-threads"
    assert "## Executive Summary ##" in text
    passrate = text.split("\nPassrate\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert passrate[0] == "| Compiler | huggingface | timm_models |"
    assert passrate[2] == "| aot_eager | 50%, 1/2 (-50%) | 100%, 3/3 | "
    assert passrate[3] == "| inductor | 100%, 2/2 | 67%, 2/3 | "
    geomean = text.split("\nGeometric mean speedup\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    # inductor timm: speedups 1.10 and 0.8 clipped to 1.0 -> sqrt(1.1) = 1.05; the night before sqrt(1.3) = 1.14
    assert geomean[3] == "| inductor | 1.73x | 1.05x (-0.09) | "
    assert "9.9" not in text
    assert "<details><summary>see more</summary>" in text
    assert "| t5 | 8 | fail_accuracy | 0.00x | 1.00x |" in text
    # the per-model columns come from the metric registry, in PyTorch's CSV names; throughput only where measured
    assert ("| name | batch_size | accuracy | speedup | previous | change | abs_latency (ms) | compilation_latency (s) "
            "| compression_ratio |\n|---|---|---|---|---|---|---|---|---|\n") in text
    assert "| resnet18 | 8 | pass | 1.10x | 1.30x | -15.4% | 9.091 | 20.0 | 1.20 |\n" in text
    assert "throughput" not in text
    assert "timm_models / vit_small: speedup 0.80x \\< 0.95x" in text  # "<" escaped: no HTML from data
    assert "| huggingface | t5 | accuracy | pass | fail_accuracy |" in text  # a new failure, from the findings
    assert "| huggingface | (suite) | passrate | 100% | 50% | -50.0% |" in text
    assert "- timm: 1.0.31" in text and "perfdash run --suite timm_models" in text
    assert "Dashboard: http://perfdash.example/suite/" in text
    assert context.marker in text


def test_every_report_section_is_headed_as_the_vocabulary_says() -> None:
    # A finding category with a report section is a ReportContext list shown under its verdict's report_heading, and
    # the template takes that heading from perfdash.verdicts (no copy of its text that a new wording would miss).
    context = ReportContext(title="t", night=date(2026, 1, 1), scope="s", scope_key="k", machine="m", hosts=[],
                            torch_version=None, commit=None, previous_commit=None, suite_versions={}, commands=[],
                            jenkins_urls=[], dashboard_url=None, run_ids=[1])
    headings = re.findall(r"^## (.*) ##$", render_report(context), re.MULTILINE)
    lists = {f.name for f in dataclasses.fields(ReportContext)}
    template = (TEMPLATES / TEMPLATE).read_text()
    sectioned = [c for c in verdicts.FINDING_CATEGORIES if c.report_section]
    expected = [c.report_heading for c in sectioned] + [verdicts.SUSPECTED_REPORT_HEADING]
    assert all(c.report_section in lists for c in sectioned)
    assert [h for h in expected if h not in headings] == []
    assert [h for h in expected if h in template] == []
    assert "## Fixed models ##" in render_report(context)  # a report title of its own (the pages say "Fixed")


def test_report_posted_once_then_edited_when_it_changes(session, github) -> None:
    issue = github.add_issue()
    with _client(github) as client:
        first = publish(session, client, kind="report", key="2026-01-02:abc", body="report v1", issue_number=issue)
        again = publish(session, client, kind="report", key="2026-01-02:abc", body="report v1", issue_number=issue)
        assert len(github.writes()) == 1 and first.id == again.id and first.status == "posted"
        publish(session, client, kind="report", key="2026-01-02:abc", body="report v2", issue_number=issue)
    writes = github.writes()
    assert [w.method for w in writes] == ["POST", "PATCH"]
    (comment,) = github.state.comments.values()
    assert "report v2" in comment["body"] and "<!-- perfdash:report:2026-01-02:abc -->" in comment["body"]


def test_failed_post_is_kept_and_retried_next_run(session, github, caplog) -> None:
    issue = github.add_issue()
    github.fail_next(*[github.canned(502, message=f"upstream said {TOKEN}") for _ in range(2)])
    with _client(github, max_attempts=2) as client:
        row = publish(session, client, kind="report", key="n:g", body="the report", issue_number=issue)
    assert row.status == "failed" and row.attempts == 1
    assert TOKEN not in (row.last_error or "") and "502" in (row.last_error or "")
    assert TOKEN not in caplog.text
    assert github.state.comments == {}
    with _client(github) as client:
        retried = retry_unposted(session, client)
    assert [r.id for r in retried] == [row.id] and row.status == "posted" and row.last_error is None
    assert len(github.state.comments) == 1


def test_retry_adopts_a_post_that_did_land(session, github) -> None:
    # The earlier attempt reached GitHub but its answer was lost: the retry finds the marker instead of re-posting.
    issue = github.add_issue()
    github.fail_next(github.canned(500), github.canned(500))
    with _client(github, max_attempts=2) as client:
        row = publish(session, client, kind="report", key="n:lost", body="the report", issue_number=issue)
        assert row.status == "failed"
        with github.state.lock:
            github.state.comments[77] = {"id": 77, "body": row.body, "issue_number": issue, "html_url": "u#77",
                                         "user": {"login": github.state.bot_login}}
        before = len(github.writes())
        retry_unposted(session, client)
    assert row.status == "posted" and row.comment_id == 77
    assert list(github.state.comments) == [77]
    assert github.writes()[before:] == []  # found by its marker (a GET), nothing posted again


def test_one_issue_per_change_point_and_culprit_comment(session, store_run, series_values, github) -> None:
    runs, finding = _regression(session, store_run, series_values)
    assert finding.confirmation == "pending" and finding.id not in issue_finding_ids(session, [runs[-1]])
    confirm = session.scalars(sa.select(BisectionRequest).where(BisectionRequest.finding_id == finding.id)).one()
    record_confirmation(session, confirm, BisectionResult(verdict="confirmed", good_samples=[1.5] * 10,
                                                          bad_samples=[1.2] * 10, change_pct=20.0, p_value=1e-5))
    assert finding.id in issue_finding_ids(session, [runs[-1]])
    with _client(github) as client:
        row = file_issue(session, client, finding, "http://perfdash.example")
        file_issue(session, client, finding, "http://perfdash.example")
        assert len(github.state.issues) == 1
        (issue,) = github.state.issues.values()
        assert issue["title"].startswith("[perfdash] timm_models resnet18: speedup -")
        assert "(inductor, float32, inference, cpu, all-cores)" in issue["title"]
        assert f"{finding.good_commit}..{finding.bad_commit}" in issue["body"]
        ab = "| A/B re-measurement | good 1.5 (10 runs), bad 1.2 (10 runs); +20.0% worse; p=1.0e-05 |"
        assert ab in issue["body"]
        assert "perfdash run --suite timm_models --backend inductor" in issue["body"]
        assert f"http://perfdash.example/model/{finding.series_id}" in issue["body"]
        assert [lab["name"] for lab in issue["labels"]] == ["perfdash-regression"]
        # the confirmed regression asked for its bisection; the bisect job reports a culprit
        bisection = session.scalars(sa.select(BisectionRequest).where(
            BisectionRequest.finding_id == finding.id, BisectionRequest.purpose == "bisect")).one()
        bisection.status = "done"
        bisection.result = {"verdict": "culprit_found", "culprit": {"sha": "deadbeef", "subject": "[inductor] oops",
                                                                    "author": "a@b", "date": "2026-01-20"},
                            "steps": [], "summary": "3 steps", "jenkins_build_url": None}
        session.flush()
        comment = comment_culprit(session, client, bisection, None)
        comment_culprit(session, client, bisection, None)  # the same result again: not posted twice
    assert comment is not None and comment.status == "posted" and comment.issue_number == row.issue_number
    (posted,) = github.state.comments.values()
    assert "deadbeef" in posted["body"] and "\\[inductor\\] oops" in posted["body"]  # brackets escaped
    kinds = session.scalars(sa.select(GithubPost.kind).order_by(GithubPost.id)).all()
    assert kinds == ["issue", "culprit"]


def test_culprit_comment_names_a_range_as_a_range_and_nobody_when_not_confirmed() -> None:
    from service.alerts.texts import culprit_body
    from service.models import Configuration

    def body(result: dict) -> str:
        row = BisectionRequest(id=3, metric="speedup", model="resnet18", good_commit="a" * 40, bad_commit="f" * 40,
                               result=result)
        row.configuration = Configuration(suite="timm_models")
        return culprit_body(row)

    commits = [{"sha": c * 40, "subject": f"change {c}", "author": "dev", "date": "2026-01-01"} for c in "bcd"]
    ranged = body({"verdict": "culprit_range", "candidates": commits, "summary": "verified across the range"})
    assert "**culprit_range**" in ranged and "Range (3 commits" in ranged and "bbbbbbbbbb..dddddddddd" in ranged
    assert "Culprit:" not in ranged
    unconfirmed = body({"verdict": "not_confirmed", "candidates": commits[-1:], "summary": "did not reproduce"})
    assert "nobody is named" in unconfirmed and "Culprit:" not in unconfirmed and "dddd" not in unconfirmed


def test_a_squatted_issue_and_report_comment_are_never_adopted(session, store_run, series_values, github) -> None:
    # Someone else writes perfdash's predictable markers first: the change point's issue marker on an issue of
    # theirs, and tonight's report marker on a comment of theirs on the report issue (GitHub would let the token
    # edit it). perfdash files its own issue, posts its own comment, and edits nothing of theirs.
    _runs, finding = _regression(session, store_run, series_values)
    report_issue = github.add_issue("nightly reports")
    squat_issue = github.add_issue("[perfdash] a regression", body=f"<!-- perfdash:issue:changepoint:"
                                   f"{finding.change_point_id} -->", author="mallory")
    squat_comment = github.add_comment(report_issue, "<!-- perfdash:report:n:g -->\nmallory's text", author="mallory")
    with _client(github) as client:
        issue = file_issue(session, client, finding, None)
        report = publish(session, client, kind="report", key="n:g", body="tonight's report", issue_number=report_issue)
        bisection = BisectionRequest(finding_id=finding.id, configuration_id=finding.configuration_id,
                                     purpose="bisect", status="done", model="resnet18", metric="speedup",
                                     direction="higher", threshold_pct=5.0, good_commit="a" * 40, bad_commit="b" * 40,
                                     result={"verdict": "culprit_found", "culprit": {"sha": "deadbeef"}})
        session.add(bisection)
        session.flush()
        culprit = comment_culprit(session, client, bisection, None)
    assert issue.status == "posted" and issue.issue_number not in (squat_issue, report_issue)
    assert github.state.issues[issue.issue_number]["user"]["login"] == "perfdash-bot"
    assert report.status == "posted" and report.comment_id != squat_comment
    assert culprit is not None and culprit.issue_number == issue.issue_number
    assert github.state.comments[squat_comment]["body"].endswith("mallory's text")
    assert github.state.issues[squat_issue]["body"].startswith("<!-- perfdash:issue")
    assert {w.method for w in github.writes()} == {"POST"}
    assert not [c for c in github.state.comments.values() if c["issue_number"] == squat_issue]


def test_a_report_comment_the_bot_may_not_edit_is_posted_anew(session, github) -> None:
    issue = github.add_issue()
    with _client(github) as client:
        first = publish(session, client, kind="report", key="n:edit", body="report v1", issue_number=issue)
    old = first.comment_id
    # the comment changed hands (GitHub: another account's comment, for a token that may not edit it)
    github.state.comments[old]["user"] = {"login": "someone-else"}
    github.state.others_may_not_edit = True
    with _client(github) as client:
        second = publish(session, client, kind="report", key="n:edit", body="report v2", issue_number=issue)
    assert second.status == "posted" and second.comment_id != old
    assert github.state.comments[old]["body"].endswith("report v1")
    assert github.state.comments[second.comment_id]["body"].endswith("report v2")


def test_a_refused_post_is_refused_not_failed(session, github) -> None:
    with _client(github) as client:
        row = publish(session, client, kind="report", key="n:none", body="the report", issue_number=404)
    assert row.status == "refused" and "404" in (row.last_error or "")


def test_a_reports_scope_key_stays_what_was_posted() -> None:
    # The key names the report's comment in the ledger and in its marker: the grouping's declaration
    # (perfdash.axes.SummaryScope.REPORT) must give the keys already posted (computed before it existed).
    from service.detection.report import report_scope_key
    from service.models import Configuration, Machine

    gpu = Configuration(suite="torchbench", backend="inductor", variant="", dtype="bfloat16", mode="inference",
                        device="cuda", thread_config="all-cores", compile_mode="max-autotune", dynamic_shapes=True,
                        batch_size_override=8, machine=Machine(fingerprint="H100-80GB|550.54|12.4"))
    cpu = Configuration(suite="timm_models", backend="eager", variant="", dtype="float32", mode="training",
                        device="cpu", thread_config="single-thread", compile_mode="default", dynamic_shapes=False,
                        batch_size_override=None, machine=Machine(fingerprint="Xeon 8480+"))
    assert (report_scope_key(gpu), report_scope_key(cpu)) == ("f6c7e39f8a3e", "3b0bfeb4c62d")
