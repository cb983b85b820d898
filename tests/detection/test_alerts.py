"""Alerts people act on (issue 16), against a real Postgres and the GitHub stand-in:

- a model's regression is a candidate (suspected, no issue) with a confirm request; the A/B result decides it:
  confirmed files the issue and requests the bisection, not reproduced closes it quietly;
- an environment change (manifest differs, most series move together) is one finding, and no per-model findings follow;
- a configuration that stopped reporting, and a suite whose model count dropped, are in the morning report.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from service.detection.detector import detect_run
from service.detection.report import build_report, render_report
from service.models import BisectionRequest, Finding

MODELS = [f"model_{i:02d}" for i in range(12)]


def _upload(client, auth, files: dict[str, bytes]) -> int:
    multipart = [("files", (name, data, "text/csv")) for name, data in files.items()]
    response = client.post("/api/v1/runs", files=multipart, headers=auth)
    assert response.status_code in (200, 201), response.text
    assert response.json()["hook_errors"] == []
    return response.json()["runs"][0]["run_id"]


def _candidate(app_client, auth, run_files, series_values) -> tuple[dict, dict]:
    """22 nights through the API (detection as the post-ingest hook), resnet18 20 % slower from night 20."""
    a, b = series_values(1, 22), series_values(2, 22, level=2.0)
    for night in range(22):
        _upload(app_client, auth, run_files(night, {"resnet18": a[night] * (0.8 if night >= 20 else 1.0),
                                                    "vit_small": b[night]}))
    findings = app_client.get("/api/v1/findings?kind=performance").json()
    speedup = next(f for f in findings if f["metric"] == "speedup" and f["category"] == "regression")
    (confirm,) = [r for r in app_client.get("/api/v1/bisections?status=pending").json() if r["purpose"] == "confirm"]
    return speedup, confirm


def _result(verdict: str, bad: float) -> dict:
    return {"verdict": verdict, "culprit": None, "steps": [], "good_samples": [1.5] * 10,
            "bad_samples": [bad] * 10, "summary": f"A/B: {verdict}", "jenkins_build_url": "http://jenkins/job/b/3/",
            "change_pct": 100 * (1 - bad / 1.5), "p_value": 1e-5 if verdict == "confirmed" else 0.4}


def test_candidate_confirmed_files_the_issue_and_requests_a_bisection(app_client, auth, run_files, series_values,
                                                                      github) -> None:
    speedup, confirm = _candidate(app_client, auth, run_files, series_values)
    assert speedup["confirmation"] == "pending"
    assert github.state.issues == {}  # a candidate: no issue
    assert "suspected: awaiting A/B re-measurement" in app_client.get(f"/model/{speedup['series_id']}").text
    assert confirm["finding_id"] == speedup["id"] and confirm["threshold_pct"] == 3.0  # 0.6 of the 5 % effect
    # the A/B's range is the change point's, two nights wider each way but not past tonight (commits: c<night>000...)
    assert confirm["good_commit"].startswith("c0017") and confirm["bad_commit"].startswith("c0021")
    assert (speedup["good_commit"][:5], speedup["bad_commit"][:5]) == ("c0019", "c0020")
    latency = next(f for f in app_client.get("/api/v1/findings?kind=performance").json()
                   if f["metric"] == "abs_latency")
    assert latency["confirmation"] == "pending"  # answered by the speedup's A/B, no request of its own

    done = app_client.post(f"/api/v1/bisections/{confirm['id']}/result", json=_result("confirmed", 1.2), headers=auth)
    assert done.status_code == 200, done.text
    finding = app_client.get(f"/api/v1/findings/{speedup['id']}").json()
    assert finding["confirmation"] == "confirmed" and finding["confirmation_result"]["bad_median"] == 1.2
    assert app_client.get(f"/api/v1/findings/{latency['id']}").json()["confirmation"] == "confirmed"
    (issue,) = github.state.issues.values()  # one issue: the speedup's (the latency is the same regression)
    assert "resnet18: speedup" in issue["title"] and "A/B re-measurement | good 1.5 (10 runs), bad 1.2" in issue["body"]
    (bisection,) = app_client.get("/api/v1/bisections?status=pending").json()
    assert bisection["purpose"] == "bisect" and bisection["finding_id"] == speedup["id"]
    assert (bisection["good_commit"], bisection["bad_commit"]) == (confirm["good_commit"], confirm["bad_commit"])
    assert bisection["threshold_pct"] == confirm["threshold_pct"] == 3.0
    assert "confirmed by A/B re-measurement" in app_client.get(f"/model/{speedup['series_id']}").text


def test_requests_carry_their_series_own_noise(app_client, auth, run_files, series_values) -> None:
    """Issue 39 item 2: the confirm request and the bisection of a series with a history carry its between-run
    noise (the finding's: the runs before the change), the prior of perfbisect's confirmation; a request by hand
    carries the series' noise now; a metric without a noise estimate carries none."""
    from perfdash.noise import robust_cv

    speedup, confirm = _candidate(app_client, auth, run_files, series_values)
    noise = speedup["noise"]
    assert noise["runs"] == 20 and noise["robust_cv"] > 0  # the 20 nights before the change
    assert (confirm["series_noise_cv"], confirm["series_noise_runs"]) == (noise["robust_cv"], noise["runs"])
    done = app_client.post(f"/api/v1/bisections/{confirm['id']}/result", json=_result("confirmed", 1.2), headers=auth)
    assert done.status_code == 200, done.text
    (bisection,) = app_client.get("/api/v1/bisections?status=pending").json()
    assert (bisection["series_noise_cv"], bisection["series_noise_runs"]) == (noise["robust_cv"], noise["runs"])

    by_hand = {"suite": "timm_models", "model": "vit_small", "backend": "inductor", "device": "cpu",
               "good_commit": "c0001" + "0" * 36, "bad_commit": "c0021" + "0" * 36}
    made = app_client.post("/api/v1/bisections", json={**by_hand, "metric": "speedup"}, headers=auth)
    assert made.status_code == 201, made.text
    assert made.json()["series_noise_runs"] == 22
    assert made.json()["series_noise_cv"] == pytest.approx(robust_cv(series_values(2, 22, level=2.0)), rel=1e-3)
    status_only = app_client.post("/api/v1/bisections", json={**by_hand, "metric": "accuracy"}, headers=auth)
    assert status_only.status_code == 201, status_only.text
    assert (status_only.json()["series_noise_cv"], status_only.json()["series_noise_runs"]) == (None, None)


def test_candidate_not_reproduced_stays_quiet(app_client, auth, run_files, series_values, github, session) -> None:
    speedup, confirm = _candidate(app_client, auth, run_files, series_values)
    done = app_client.post(f"/api/v1/bisections/{confirm['id']}/result", json=_result("not_reproduced", 1.49),
                           headers=auth)
    assert done.status_code == 200, done.text
    finding = app_client.get(f"/api/v1/findings/{speedup['id']}").json()
    assert finding["confirmation"] == "not_reproduced" and finding["confirmation_result"]["good_median"] == 1.5
    assert github.state.issues == {} and github.writes() == []
    assert app_client.get("/api/v1/bisections?status=pending").json() == []  # no bisection either
    text = render_report(build_report(session, speedup["run_id"]))
    suspected = text.split("## Suspected", 1)[1].split("## Environment", 1)[0]
    assert "Not reproduced by their A/B re-measurement" in suspected and "A/B: not_reproduced" in suspected
    assert "| timm_models | resnet18 |" not in text.split("## Regressions ##", 1)[1].split("## Suspected", 1)[0]


def _nights(store_run, session, count: int, first: int = 0, factor: float = 1.0, **kwargs) -> list[int]:
    from tests.detection.conftest import noisy

    values = {m: noisy(100 + i, first + count, level=1.0 + 0.1 * i) for i, m in enumerate(MODELS)}
    runs = []
    for night in range(first, first + count):
        runs.append(store_run(night, {m: v[night] * factor for m, v in values.items()}, **kwargs))
        detect_run(session, runs[-1], incremental=True)
    return runs


def test_environment_shift_is_one_finding_and_resets_baselines(session, store_run) -> None:
    old, new = {"kernel": "6.1.0-18", "perfdash": "0.4.0"}, {"kernel": "6.8.0-1", "perfdash": "0.4.0"}
    _nights(store_run, session, 15, environment=old)
    runs = _nights(store_run, session, 6, first=15, factor=0.92, environment=new)
    findings = session.scalars(sa.select(Finding)).unique().all()
    (env,) = [f for f in findings if f.kind == "environment"]
    assert env.run_id == runs[0] and "kernel 6.1.0-18 -> 6.8.0-1" in env.summary and "perfdash" not in env.summary
    assert -10 < env.change_pct < -6
    assert [f for f in findings if f.kind == "performance"] == []  # 12 models moved 8 %: no per-model finding
    assert session.scalars(sa.select(BisectionRequest)).all() == []
    text = render_report(build_report(session, runs[0]))
    assert "kernel 6.1.0-18 -> 6.8.0-1" in text.split("## Environment changes ##", 1)[1].split("##", 1)[0]


def test_the_same_move_without_a_manifest_change_is_per_model_candidates(session, store_run) -> None:
    # The control: the manifest is what makes a common move an environment change.
    same = {"kernel": "6.1.0-18"}
    _nights(store_run, session, 15, environment=same)
    _nights(store_run, session, 6, first=15, factor=0.92, environment=same)
    findings = session.scalars(sa.select(Finding)).unique().all()
    assert not [f for f in findings if f.kind == "environment"]
    candidates = [f for f in findings if f.kind == "performance" and f.metric == "speedup"]
    assert len(candidates) >= 6 and {f.confirmation for f in candidates} == {"pending"}


def test_missing_configuration_and_dropped_models_are_in_the_posted_report(session, store_run, github) -> None:
    from pydantic import SecretStr

    from service.github.client import GitHubClient, GitHubConfig
    from service.github.publisher import publish

    for night in range(2):
        store_run(night, {"resnet18": 1.3, "vit_small": 0.9, "deit": 1.1, "mixer": 1.2, "convnext": 1.0})
        store_run(night, {"gpt2": 1.5, "t5": 2.0}, suite="huggingface")
    tonight = store_run(2, {"resnet18": 1.3, "vit_small": 0.9, "deit": 1.1})  # huggingface: nothing
    detect_run(session, tonight)
    context = build_report(session, tonight)
    (missing,) = context.missing
    assert (missing.suite, missing.last_night.isoformat()) == ("huggingface", "2026-01-02")
    (dropped,) = context.models_dropped
    assert dropped.summary == "timm_models: 3 models reported, 5 the run before"
    issue = github.add_issue("nightly reports")
    config = GitHubConfig(api_url=github.url, token=SecretStr("ghp_x"), repository="pytorch/pytorch")
    with GitHubClient(config, sleep=lambda _s: None) as client:
        publish(session, client, kind="report", key="missing", body=render_report(context), issue_number=issue)
    (comment,) = github.state.comments.values()
    section = comment["body"].split("## Missing data ##", 1)[1].split("##", 1)[0]
    assert "huggingface, inductor" in section and "reported on 2026-01-02" in section and "nothing tonight" in section
    assert "3 models reported, 5 the run before" in section


def test_a_backfill_queues_no_confirmation_of_old_nights(session, store_run, series_values) -> None:
    a = series_values(1, 30)
    runs = [store_run(night, {"resnet18": a[night] * (0.8 if night >= 20 else 1.0)}) for night in range(30)]
    for run in runs:  # `perfdash detect --all`: every stored run, oldest first, after the import
        detect_run(session, run, incremental=True)
    (finding,) = session.scalars(sa.select(Finding).where(Finding.metric == "speedup")).unique().all()
    assert finding.confirmation == "pending" and "not re-measured" in finding.confirmation_result["summary"]
    assert session.scalars(sa.select(BisectionRequest)).all() == []
