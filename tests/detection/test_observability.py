"""What an operator watches: /metrics after real ingests, detection and a bisection whose GitHub posts fail, and the
service's JSON log lines, each with the id of the request that made it (the one its response answered)."""

from __future__ import annotations

import json

from prometheus_client.parser import text_string_to_metric_families

NIGHTS = 22  # a 20 % speedup drop from night 20 on: a change point with two nights after it (tests/detection)


def _upload(client, headers: dict[str, str], files: dict[str, bytes]):
    return client.post("/api/v1/runs", files=[("files", (n, d, "text/csv")) for n, d in files.items()],
                       headers=headers)


def _nights(app_client, auth, run_files, series_values) -> list[int]:
    a, b = series_values(1, NIGHTS), series_values(2, NIGHTS, level=2.0)
    runs = []
    for night in range(NIGHTS):
        speedups = {"resnet18": a[night] * (0.8 if night >= 20 else 1.0), "vit_small": b[night]}
        response = _upload(app_client, auth, run_files(night, speedups))
        assert response.status_code == 201 and response.json()["hook_errors"] == [], response.text
        runs.append(response.json()["runs"][0]["run_id"])
    return runs


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape: (name, sorted labels) -> value, parsed by prometheus_client's own parser."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_after_ingests_detection_and_failed_github_posts(app_client, auth, run_files, series_values,
                                                                 github) -> None:
    _nights(app_client, auth, run_files, series_values)
    assert _upload(app_client, {"Authorization": "Bearer not-a-token"}, run_files(0, {"resnet18": 1.0})
                   ).status_code == 401
    again = _upload(app_client, auth, run_files(3, {"resnet18": series_values(1, NIGHTS)[3], "vit_small": 2.0}))
    assert again.status_code in (200, 409)  # night 3 again: already stored, or other content for the same run
    findings = app_client.get("/api/v1/findings").json()
    # the backlog, from the database: the regression candidates and their A/B requests detection queued
    before = samples(app_client.get("/metrics").text)
    pending = [f for f in findings if f["confirmation"] == "pending"]
    assert pending and before[("perfdash_confirmations_pending", ())] == len(pending)
    confirms = [b for b in app_client.get("/api/v1/bisections?status=pending").json() if b["purpose"] == "confirm"]
    assert confirms and before[("perfdash_bisections_open", (("purpose", "confirm"), ("status", "pending")))] == len(
        confirms)
    assert before[("perfdash_bisections_oldest_open_age_seconds", ())] > 0
    assert before[("perfdash_github_posts_failed", (("kind", "issue"),))] == 0
    speedup = next(f for f in findings if f["metric"] == "speedup" and f["model"] == "resnet18")
    bisection = app_client.post("/api/v1/bisections", json={"finding_id": speedup["id"]}, headers=auth).json()
    # GitHub refuses everything (422 is not retried): the culprit's issue and comment stay in the ledger as failed
    github.fail_next(*[github.canned(422) for _ in range(20)])
    result = {"verdict": "culprit_found", "culprit": {"sha": "abc123def", "subject": "slower conv",
                                                      "author": "dev <d@x>", "date": "2026-01-21"},
              "steps": [], "good_samples": [1.5], "bad_samples": [1.2], "summary": "1 step"}
    assert app_client.post(f"/api/v1/bisections/{bisection['id']}/result", json=result,
                           headers=auth).status_code == 200

    scrape = app_client.get("/metrics")
    assert scrape.status_code == 200 and scrape.headers["content-type"].startswith("text/plain")
    got = samples(scrape.text)
    assert got[("perfdash_ingests_total", (("outcome", "accepted"),))] == NIGHTS + (again.status_code == 200)
    assert got[("perfdash_ingests_total", (("outcome", "refused"),))] == 1 + (again.status_code == 409)
    assert got[("perfdash_results_stored_total", ())] == 2 * NIGHTS
    assert got[("perfdash_detection_duration_seconds_count", ())] == NIGHTS
    assert got[("perfdash_detection_duration_seconds_sum", ())] > 0
    # by route template, never the raw path
    assert got[("perfdash_http_requests_total",
                (("method", "POST"), ("route", "/api/v1/runs"), ("status", "201")))] == NIGHTS
    assert got[("perfdash_http_requests_total", (("method", "POST"), ("route", "/api/v1/bisections/{bisection_id}"
                                                                        "/result"), ("status", "200")))] == 1
    assert got[("perfdash_http_request_duration_seconds_count",
                (("method", "GET"), ("route", "/api/v1/findings")))] == 1
    assert not any(f"/api/v1/bisections/{bisection['id']}" in dict(labels).get("route", "") for _, labels in got)
    assert got[("perfdash_bisections_open", (("purpose", "bisect"), ("status", "pending")))] == 0  # it is done
    assert got[("perfdash_github_posts_failed", (("kind", "issue"),))] == 1
    assert got[("perfdash_database_up", ())] == 1


def test_log_lines_are_json_with_the_request_id_of_the_response(app_client, auth, run_files, series_values,
                                                                capsys) -> None:
    capsys.readouterr()
    given = app_client.get("/api/v1/runs?token=secret-in-a-query", headers={"X-Request-ID": "trace-0042"})
    assert given.headers["X-Request-ID"] == "trace-0042"
    made = _upload(app_client, auth, run_files(0, {"resnet18": 1.4, "vit_small": 2.0}))
    assert made.status_code == 201
    rid = made.headers["X-Request-ID"]
    assert len(rid) == 32 and rid != "trace-0042"
    hostile = app_client.get("/api/v1/runs", headers={"X-Request-ID": "x\ty" + "z" * 200})
    assert hostile.headers["X-Request-ID"] not in ("x\ty" + "z" * 200, "")  # not a plain token: replaced

    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    # the service's lines: the test client (starlette's, on httpx2) logs each URL it requests, query and all
    lines = [line for line in lines if not line["logger"].startswith("httpx")]
    assert lines and all({"timestamp", "level", "logger", "message"} <= set(line) for line in lines)
    assert all(line["timestamp"].endswith("Z") for line in lines)
    (request_line,) = [line for line in lines if line.get("request_id") == "trace-0042"]
    assert request_line["logger"] == "service.requests" and request_line["level"] == "INFO"
    # a token in the URL is refused (400: service/api/query_token.py), and the line still names the path alone
    assert request_line["path"] == "/api/v1/runs" and request_line["status"] == 400
    assert "secret-in-a-query" not in json.dumps(lines)  # the path is logged, never the query string
    # what the upload's detection logged (INFO, once dropped) carries the upload's id
    run_id = made.json()["runs"][0]["run_id"]
    (detected,) = [line for line in lines if line["message"].startswith(f"run {run_id}: ")]
    assert detected["logger"] == "service.detection.detector" and detected["request_id"] == rid
    assert {line["request_id"] for line in lines if line["logger"] == "service.requests"} == {
        "trace-0042", rid, hostile.headers["X-Request-ID"]}
