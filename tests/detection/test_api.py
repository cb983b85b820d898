"""Findings and bisections over HTTP, with detection wired as the post-ingest hook and GitHub as the stand-in."""

from __future__ import annotations


def _upload(client, auth, files: dict[str, bytes]):
    multipart = [("files", (name, data, "text/csv")) for name, data in files.items()]
    response = client.post("/api/v1/runs", files=multipart, headers=auth)
    assert response.status_code in (200, 201), response.text
    assert response.json()["hook_errors"] == []
    return response.json()["runs"][0]["run_id"]


def _nights(app_client, auth, run_files, series_values, nights: int = 22, drop_from: int = 20) -> list[int]:
    a, b = series_values(1, nights), series_values(2, nights, level=2.0)
    runs = []
    for night in range(nights):
        speed = a[night] * (0.8 if night >= drop_from else 1.0)
        status = {"vit_small": "fail_accuracy"} if night == nights - 1 else None
        runs.append(_upload(app_client, auth, run_files(night, {"resnet18": speed, "vit_small": b[night]},
                                                        statuses=status)))
    return runs


def test_ingest_runs_detection_and_findings_are_listed(app_client, auth, run_files, series_values) -> None:
    runs = _nights(app_client, auth, run_files, series_values)
    findings = app_client.get("/api/v1/findings").json()
    by_kind = {(f["kind"], f["model"], f["metric"], f["category"]) for f in findings}
    assert ("performance", "resnet18", "speedup", "regression") in by_kind
    assert ("status", "vit_small", "accuracy", "new_failure") in by_kind
    speedup = next(f for f in findings if f["metric"] == "speedup")
    assert speedup["run_id"] == runs[21] and speedup["change_point_run_id"] == runs[20]
    assert speedup["suite"] == "timm_models" and speedup["backend"] == "inductor"
    assert app_client.get(f"/api/v1/findings?run_id={runs[5]}").json() == []
    one = app_client.get(f"/api/v1/findings/{speedup['id']}").json()
    assert one["summary"] == speedup["summary"]
    assert app_client.get("/api/v1/findings/999999").status_code == 404


def test_acknowledge(app_client, auth, run_files, series_values) -> None:
    _nights(app_client, auth, run_files, series_values)
    (failure,) = app_client.get("/api/v1/findings?kind=status").json()
    url = f"/api/v1/findings/{failure['id']}/acknowledge"
    assert app_client.post(url, json={"note": "flaky"}).status_code == 401
    assert app_client.post(url, json={"note": ""}, headers=auth).status_code == 422
    done = app_client.post(url, json={"note": "timm 1.0.31 bug", "author": "bob"}, headers=auth)
    assert done.status_code == 200 and done.json()["acknowledged"] and done.json()["ack_note"] == "timm 1.0.31 bug"
    open_ids = {f["id"] for f in app_client.get("/api/v1/findings?acknowledged=false").json()}
    assert failure["id"] not in open_ids
    notes = app_client.get(f"/api/v1/annotations?series_id={failure['series_id']}").json()
    assert any("timm 1.0.31 bug" in n["text"] for n in notes)


def test_bisection_contract(app_client, auth, run_files, series_values, github) -> None:
    _nights(app_client, auth, run_files, series_values)
    speedup = next(f for f in app_client.get("/api/v1/findings").json() if f["metric"] == "speedup")
    assert app_client.post("/api/v1/bisections", json={"finding_id": speedup["id"]}).status_code == 401
    created = app_client.post("/api/v1/bisections", json={"finding_id": speedup["id"]}, headers=auth)
    assert created.status_code == 201, created.text
    request = created.json()
    assert {k: request[k] for k in ("status", "finding_id", "suite", "model", "backend", "variant", "compile_mode",
                                    "dtype", "mode", "device", "threads", "batch_size", "metric", "direction",
                                    "threshold_pct", "result")} == {
        "status": "pending", "finding_id": speedup["id"], "suite": "timm_models", "model": "resnet18",
        "backend": "inductor", "variant": "", "compile_mode": "default", "dtype": "float32", "mode": "inference",
        "device": "cpu", "threads": None, "batch_size": 8, "metric": "speedup", "direction": "higher",
        "threshold_pct": 5.0, "result": None}
    assert (request["good_commit"], request["bad_commit"]) == (speedup["good_commit"], speedup["bad_commit"])
    again = app_client.post("/api/v1/bisections", json={"finding_id": speedup["id"]}, headers=auth)
    assert again.status_code == 200 and again.json()["id"] == request["id"]
    pending = app_client.get("/api/v1/bisections?status=pending").json()
    assert [b["id"] for b in pending if b["purpose"] == "bisect"] == [request["id"]]
    # detection queued the candidate's A/B re-measurement on its own (service.detection.confirmation)
    assert [b["finding_id"] for b in pending if b["purpose"] == "confirm"] == [speedup["id"]]
    assert app_client.get("/api/v1/bisections?status=done").json() == []

    result = {"verdict": "culprit_found",
              "culprit": {"sha": "abc123def", "subject": "[inductor] slower conv", "author": "dev <d@x>",
                          "date": "2026-01-21"},
              "steps": [{"sha": "abc123def", "samples": [1.2, 1.21], "decision": "bad"}],
              "good_samples": [1.5, 1.49], "bad_samples": [1.2, 1.21], "summary": "1 step",
              "jenkins_build_url": "http://jenkins/job/bisect/7/"}
    url = f"/api/v1/bisections/{request['id']}/result"
    assert app_client.post(url, json={**result, "verdict": "maybe"}, headers=auth).status_code == 422
    done = app_client.post(url, json=result, headers=auth)
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "done" and done.json()["result"]["culprit"]["sha"] == "abc123def"
    assert app_client.get(f"/api/v1/bisections/{request['id']}").json()["result"]["verdict"] == "culprit_found"
    # GitHub: the regression's issue (filed now, it had not been) and the culprit comment on it.
    (issue,) = github.state.issues.values()
    (comment,) = github.state.comments.values()
    assert comment["issue_number"] == issue["number"] and "abc123def" in comment["body"]
    # data: shown, not linked (service/github/safe.py)
    assert "http\u2060://jenkins/job/bisect/7/" in comment["body"]
    # both posts are in the audit log, under the token that posted the result
    log = app_client.get("/api/v1/audit", params={"action": "GITHUB"}, headers=auth).json()
    assert [(e["token_name"], e["action"], e["target"].rsplit(":", 1)[0], e["detail"].split(":", 1)[0])
            for e in reversed(log)] == [
        ("test-operator", "GITHUB issue", f"bisection_id={request['id']}, changepoint", "posted"),
        ("test-operator", "GITHUB culprit", f"bisection_id={request['id']}, bisection", "posted")]
    assert issue["html_url"] in log[1]["detail"] and comment["html_url"] in log[0]["detail"]
    # the same result again posts nothing, and records nothing
    assert app_client.post(url, json=result, headers=auth).status_code == 200
    assert len(app_client.get("/api/v1/audit", params={"action": "GITHUB"}, headers=auth).json()) == 2


def test_bisection_explicit_fields_and_errors(app_client, auth, run_files, series_values) -> None:
    # what bisect/Jenkinsfile sends for a request without a finding (threads as a name)
    explicit = {"suite": "timm_models", "model": "resnet18", "backend": "inductor", "variant": "",
                "compile_mode": "default", "dtype": "float32", "mode": "inference", "device": "cpu",
                "threads": "all", "metric": "abs_latency", "direction": "lower", "good_commit": "aaaa1111",
                "bad_commit": "bbbb2222", "threshold_pct": 5}
    # a request points at a stored configuration: none is stored yet
    refused = app_client.post("/api/v1/bisections", json=explicit, headers=auth)
    # the configuration it names is not there: a 404, as a finding that is not there
    assert refused.status_code == 404 and "no stored run has this configuration" in refused.text
    _nights(app_client, auth, run_files, series_values, nights=3, drop_from=99)
    made = app_client.post("/api/v1/bisections", json=explicit, headers=auth)
    assert made.status_code == 201, made.text
    assert made.json()["direction"] == "lower" and made.json()["threshold_pct"] == 5.0
    assert made.json()["finding_id"] is None and made.json()["threads"] is None
    (stored,) = {run["configuration"]["id"] for run in app_client.get("/api/v1/runs").json()}
    assert made.json()["configuration_id"] == stored
    assert made.json()["suite"] == "timm_models" and made.json()["device"] == "cpu"  # sent along to the bisect tool
    single = app_client.post("/api/v1/bisections", json={**explicit, "threads": "1", "direction": None}, headers=auth)
    assert single.status_code == 404  # no single-thread configuration is stored
    missing = app_client.post("/api/v1/bisections", json={"suite": "huggingface"}, headers=auth)
    assert missing.status_code == 422
    assert app_client.post("/api/v1/bisections", json={"finding_id": 999999}, headers=auth).status_code == 404
    runs = app_client.get("/api/v1/findings?kind=summary").json()
    passrate = next(f for f in runs if f["metric"] == "passrate")
    refused = app_client.post("/api/v1/bisections", json={"finding_id": passrate["id"]}, headers=auth)
    assert refused.status_code == 409 and "nothing to bisect" in refused.text  # the finding's state (issue 29)
    assert app_client.get("/api/v1/bisections/999999").status_code == 404


def test_bisection_page_shows_everything_the_decision_saw(app_client, auth, run_files, series_values) -> None:
    """A real Bisector run (simulated measurements: every commit 0.4 % slower than its parent, so no single commit
    reproduces the regression) posted as the tool posts it; the page shows the verdict, no name, and every A/B."""
    import random

    from perfbisect.gitops import Commit
    from perfbisect.procedure import Bisector
    from perfbisect.report import build_report
    from perfbisect.state import BisectState
    from perfbisect.stats import Policy

    _nights(app_client, auth, run_files, series_values)
    speedup = next(f for f in app_client.get("/api/v1/findings").json() if f["metric"] == "speedup")
    request = app_client.post("/api/v1/bisections", json={"finding_id": speedup["id"]}, headers=auth).json()

    rng = random.Random(3)
    commits = [f"c{i:02d}" for i in range(40)]

    class Gradual:
        def build(self, sha: str) -> None:
            return None

        def measure(self, sha: str, index: int) -> float:
            steps = 0 if sha == "good" else max(0, int(sha[1:]) - 9)
            return 100 * 1.004**steps * (1 + 0.01 * rng.gauss(0, 1))

    policy = Policy(threshold_pct=5)
    outcome = Bisector(Gradual(), policy, BisectState(identity={})).run("good", commits)
    report = build_report(outcome, lambda sha: Commit(sha, f"change {sha}", "dev <d@x>", "2026-01-21"), "good",
                          commits[-1], policy, len(commits))
    posted = app_client.post(f"/api/v1/bisections/{request['id']}/result", json=report.to_service(), headers=auth)
    assert posted.status_code == 200, posted.text
    stored = posted.json()["result"]
    assert stored["verdict"] == "not_confirmed" and stored["culprit"] is None
    assert stored["verification"]["answer"] != "different" and stored["confirmation"]["answer"] == "different"

    page = app_client.get(f"/bisections/{request['id']}")
    assert page.status_code == 200
    html = page.text
    assert 'data-verdict="not_confirmed"' in html and "nobody is named" in html and 'id="culprit"' not in html
    confirmation = stored["confirmation"]
    assert confirmation["order"] in html  # the measured order, A and B as they ran
    assert f'<span class="cap">{confirmation["cap"]}</span>' in html
    assert html.count('class="ab"') == 2 + sum(1 for s in stored["steps"] if s["ab"])  # confirm, steps, verify
    first_round = confirmation["rounds"][0]
    assert f'{first_round["p_different"]:.2g}' in html
    assert app_client.get("/bisections/999999").status_code == 404
