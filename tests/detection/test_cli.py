"""`perfdash detect` and `perfdash report [--run] [--output] [--post]` end to end on a fresh Postgres, posting to the
GitHub stand-in: one comment per night and group, one issue per regression, failures kept and retried next run."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from perfdash.cli import main

TOKEN = "ghp_cliSECRETtoken99"


@pytest.fixture
def database(fresh_postgres: str, run_files, series_values, monkeypatch, github) -> dict:
    """22 nights of timm_models on inductor, resnet18 20 % slower from night 20 on, stored and committed."""
    from service.db import make_engine, make_session_factory
    from service.ingest.files import bundles_from_files
    from service.ingest.upload import ingest
    from service.migrate import upgrade

    upgrade(fresh_postgres)
    a, b = series_values(1, 22), series_values(2, 22, level=2.0)
    engine = make_engine(fresh_postgres)
    run_ids = []
    with make_session_factory(engine)() as session:
        for night in range(22):
            files = run_files(night, {"resnet18": a[night] * (0.8 if night >= 20 else 1.0), "vit_small": b[night]})
            run_ids += [r.run_id for r in ingest(session, bundles_from_files(files)).runs]  # no hooks: detect below
    engine.dispose()
    issue = github.add_issue("nightly reports")
    for name, value in {"DATABASE_URL": fresh_postgres, "GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": "pytorch/pytorch",
                        "GITHUB_API_URL": github.url, "PERFDASH_REPORT_ISSUE": str(issue),
                        "PERFDASH_DASHBOARD_URL": "http://perfdash.example"}.items():
        monkeypatch.setenv(name, value)
    return {"url": fresh_postgres, "runs": run_ids, "issue": issue}


def _scalar(url: str, sql: str):
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.scalar(sa.text(sql))
    finally:
        engine.dispose()


def _confirm_all(url: str) -> None:
    """What the bisect job's confirm step posts back, applied to every pending confirm request."""
    from perfdash.bisection import BisectionResult
    from service.alerts.confirmation import record_confirmation
    from service.db import make_engine, make_session_factory
    from service.models import BisectionRequest

    engine = make_engine(url)
    with make_session_factory(engine)() as session:
        for request in session.scalars(sa.select(BisectionRequest).where(BisectionRequest.purpose == "confirm")):
            record_confirmation(session, request, BisectionResult(
                verdict="confirmed", good_samples=[1.5] * 10, bad_samples=[1.2] * 10, change_pct=20.0))
        session.commit()
    engine.dispose()


def test_detect_then_report_posted_once(database, github, capsys, tmp_path) -> None:
    assert main(["detect", "--all"]) == 0
    out = capsys.readouterr().out
    assert "resnet18: speedup -" in out and "22 run(s) examined" in out
    assert main(["detect", "--all"]) == 0
    assert "0 new finding(s)" in capsys.readouterr().out

    target = tmp_path / "report.md"
    assert main(["report", "--output", str(target)]) == 0
    text = target.read_text()
    assert "# Performance Dashboard for float32 precision -- multiple-threads" in text
    assert github.state.requests == []  # no --post, no GitHub

    assert "| timm_models | resnet18 | speedup |" in text.split("## Suspected", 1)[1].split("## ", 1)[0]
    assert main(["report", "--post", "--output", str(target)]) == 0
    # a candidate: reported as suspected, no issue until its A/B re-measurement confirms it
    assert [i["number"] for i in github.state.issues.values()] == [database["issue"]]
    _confirm_all(database["url"])
    assert main(["report", "--post", "--output", str(target)]) == 0
    issues = [i for i in github.state.issues.values() if i["number"] != database["issue"]]
    assert len(issues) == 1 and "resnet18: speedup" in issues[0]["title"]
    assert "| timm_models | resnet18 | speedup |" in target.read_text().split("## Regressions", 1)[1]
    comments = [c for c in github.state.comments.values() if c["issue_number"] == database["issue"]]
    assert len(comments) == 1 and "Performance Dashboard" in comments[0]["body"]
    writes = len(github.writes())

    assert main(["report", "--post", "--output", str(target)]) == 0  # the same night again: nothing new
    assert len(github.writes()) == writes
    assert main(["report", "--post", "--run", str(database["runs"][-1]), "--output", str(target)]) == 0
    assert len(github.writes()) == writes
    assert _scalar(database["url"], "SELECT count(*) FROM github_posts WHERE status = 'posted'") == 2


def test_github_down_is_not_fatal_and_retried(database, github, capsys, tmp_path) -> None:
    assert main(["detect"]) == 0  # the latest run: finds the change point over the whole history
    _confirm_all(database["url"])
    capsys.readouterr()
    github.fail_next(*[github.canned(503) for _ in range(40)])
    assert main(["report", "--post", "--output", str(tmp_path / "r.md")]) == 0
    err = capsys.readouterr().err
    assert "not posted, kept for the next run" in err and TOKEN not in err
    assert github.state.comments == {} and len(github.state.issues) == 1  # only the tracking issue
    assert _scalar(database["url"], "SELECT count(*) FROM github_posts WHERE status = 'failed'") == 2
    with github.state.lock:
        github.state.failures.clear()
    assert main(["report", "--post", "--output", str(tmp_path / "r.md")]) == 0
    assert _scalar(database["url"], "SELECT count(*) FROM github_posts WHERE status = 'posted'") == 2
    assert len(github.state.comments) == 1 and len(github.state.issues) == 2


def test_report_needs_github_settings(database, github, monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    assert main(["report", "--post", "--output", str(tmp_path / "r.md")]) == 1
    assert "GITHUB_TOKEN" in capsys.readouterr().err
    # no default repository or issue: an empty placeholder (as in docker/perfdash.env.example) is not set either
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_REPOSITORY", "")
    monkeypatch.delenv("PERFDASH_REPORT_ISSUE")
    assert main(["report", "--post", "--output", str(tmp_path / "r.md")]) == 1
    err = capsys.readouterr().err
    assert "GITHUB_REPOSITORY, PERFDASH_REPORT_ISSUE not set" in err and "no default" in err
    assert github.state.requests == []
    assert main(["report", "--run", "999999"]) == 1


def test_a_refused_report_fails_loudly(database, github, monkeypatch, capsys, tmp_path) -> None:
    # GitHub refuses the comment (here: no such issue; alike for a token that may not comment): not exit 0 with the
    # report silently unposted, as an outage is.
    assert main(["detect"]) == 0
    monkeypatch.setenv("PERFDASH_REPORT_ISSUE", "999")
    capsys.readouterr()
    assert main(["report", "--post", "--output", str(tmp_path / "r.md")]) == 1
    err = capsys.readouterr().err
    assert "report NOT posted" in err and "GitHub refused 1 post(s)" in err and TOKEN not in err
    assert _scalar(database["url"], "SELECT status FROM github_posts WHERE kind = 'report'") == "refused"
