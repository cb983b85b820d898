"""Runs, history, comparison and annotation queries through the JSON API (and the query functions behind it)."""

from __future__ import annotations

import pytest


@pytest.fixture
def three_nights(upload, run_files, manifest):
    """timm_models inductor cpu on three nights and commits, plus a bfloat16 configuration on the last night."""
    nights = [("2026-01-01", "aaa111", {"resnet": 2.0, "vit": 1.0, "mixer": 1.5}, {}),
              ("2026-01-02", "bbb222", {"resnet": 1.8, "vit": 1.0, "mixer": None}, {}),
              ("2026-01-03", "ccc333", {"resnet": 1.5, "vit": 1.2, "mixer": 1.5}, {"vit": "fail_accuracy"})]
    ids = []
    for night, commit, speedups, statuses in nights:
        response = upload(run_files(speedups, statuses, manifest=manifest(night=night, commit=commit)))
        assert response.status_code == 201, response.text
        ids.append(response.json()["runs"][0]["run_id"])
    other = upload(run_files({"resnet": 3.0}, manifest=manifest(night="2026-01-03", commit="ccc333",
                                                                 dtype="bfloat16")))
    return ids, other.json()["runs"][0]["run_id"]


def test_runs_list_filters(client, three_nights):
    ids, bf16 = three_nights
    everything = client.get("/api/v1/runs").json()
    assert [r["id"] for r in everything] == [bf16, ids[2], ids[1], ids[0]]  # newest night first
    assert [r["id"] for r in client.get("/api/v1/runs", params={"dtype": "bfloat16"}).json()] == [bf16]
    assert [r["id"] for r in client.get("/api/v1/runs", params={"commit": "bbb"}).json()] == [ids[1]]
    ranged = client.get("/api/v1/runs", params={"since": "2026-01-02", "until": "2026-01-02"}).json()
    assert [r["id"] for r in ranged] == [ids[1]]
    assert client.get("/api/v1/runs", params={"suite": "torchbench"}).json() == []
    assert client.get("/api/v1/runs", params={"machine": "Test Xeon | 2 cores", "limit": 1}).json()[0]["id"] == bf16
    assert client.get("/api/v1/runs", params={"backend": "aot_eager"}).json() == []
    assert len(client.get("/api/v1/runs", params={"backend": "inductor"}).json()) == 4


def test_one_run_with_results(client, three_nights):
    ids, _ = three_nights
    run = client.get(f"/api/v1/runs/{ids[2]}").json()
    assert run["torch_git_commit"] == "ccc333" and run["configuration"]["suite"] == "timm_models"
    results = {r["name"]: r for r in run["results"]}
    assert results["vit"]["accuracy"] == "fail_accuracy" and results["vit"]["gated_speedup"] == 0.0
    assert results["vit"]["speedup"] == 1.2
    assert results["resnet"]["gated_speedup"] == 1.5
    assert client.get("/api/v1/runs/999999").status_code == 404
    assert [w["name"] for w in run["summary"]["warnings"]] == ["vit"]
    listed = next(r for r in client.get("/api/v1/runs").json() if r["id"] == ids[2])
    assert listed["summary"]["warnings"] == [] and listed["summary"]["warnings_count"] == 1  # lists carry the count


def test_model_history(client, three_nights):
    ids, _ = three_nights
    (series,) = client.get("/api/v1/series", params={"name": "resnet", "dtype": "float32"}).json()
    history = client.get(f"/api/v1/series/{series['id']}/history").json()
    assert [p["night"] for p in history["points"]] == ["2026-01-01", "2026-01-02", "2026-01-03"]
    assert [p["speedup"] for p in history["points"]] == [2.0, 1.8, 1.5]
    assert [p["torch_git_commit"] for p in history["points"]] == ["aaa111", "bbb222", "ccc333"]
    assert history["series"]["configuration"]["machine"]["fingerprint"] == "Test Xeon | 2 cores"
    window = client.get(f"/api/v1/series/{series['id']}/history", params={"since": "2026-01-02"}).json()
    assert [p["run_id"] for p in window["points"]] == ids[1:]
    assert len(client.get("/api/v1/series", params={"name": "resnet"}).json()) == 2  # float32 and bfloat16
    assert client.get("/api/v1/series/999999/history").status_code == 404


def test_suite_summary_history(client, three_nights):
    ids, _ = three_nights
    configuration_id = client.get(f"/api/v1/runs/{ids[0]}").json()["configuration"]["id"]
    history = client.get(f"/api/v1/configurations/{configuration_id}/history").json()
    assert [p["summary"]["passrate_text"] for p in history["points"]] == ["100%, 3/3", "67%, 2/3", "67%, 2/3"]
    until = client.get(f"/api/v1/configurations/{configuration_id}/history", params={"until": "2026-01-01"}).json()
    assert [p["run_id"] for p in until["points"]] == [ids[0]]
    configurations = client.get("/api/v1/configurations").json()
    assert {c["dtype"] for c in configurations} == {"float32", "bfloat16"}


def test_compare_runs(client, three_nights):
    ids, bf16 = three_nights
    comparison = client.get("/api/v1/compare/runs", params={"base": ids[0], "new": ids[1]}).json()
    assert comparison["new_failures"] == ["mixer"]
    assert comparison["regressions"] == ["resnet"]  # 2.0 -> 1.8 is -10 %
    by_name = {m["name"]: m for m in comparison["models"]}
    assert by_name["resnet"]["speedup_change"] == pytest.approx(-0.1)
    assert by_name["vit"]["verdict"] == "unchanged"
    assert by_name["mixer"]["status_changed"]  # pass -> fail_to_run

    later = client.get("/api/v1/compare/runs", params={"base": ids[1], "new": ids[2]}).json()
    assert later["fixed"] == ["mixer"] and later["new_failures"] == ["vit"]
    assert later["regressions"] == ["resnet"]  # 1.8 -> 1.5
    loose = client.get("/api/v1/compare/runs", params={"base": ids[1], "new": ids[2], "threshold": 0.2}).json()
    assert loose["regressions"] == []  # -16.7 % is within 20 %

    assert client.get("/api/v1/compare/runs", params={"base": ids[0], "new": bf16}).status_code == 422
    assert client.get("/api/v1/compare/runs", params={"base": ids[0], "new": 999999}).status_code == 404


def test_compare_commits(client, three_nights):
    ids, _ = three_nights
    comparisons = client.get("/api/v1/compare/commits", params={"base": "aaa", "new": "ccc333"}).json()
    assert [(c["base"]["id"], c["new"]["id"]) for c in comparisons] == [(ids[0], ids[2])]  # bf16 has no 'aaa' run
    assert comparisons[0]["new_failures"] == ["vit"]
    assert comparisons[0]["regressions"] == ["resnet"]


def test_annotations(client, auth, three_nights):
    ids, _ = three_nights
    configuration_id = client.get(f"/api/v1/runs/{ids[0]}").json()["configuration"]["id"]
    note = {"text": "expected: new timm pin", "author": "ci", "configuration_id": configuration_id,
            "night": "2026-01-02"}
    assert client.post("/api/v1/annotations", json=note).status_code == 401
    created = client.post("/api/v1/annotations", json=note, headers=auth)
    assert created.status_code == 201, created.text
    listed = client.get("/api/v1/annotations", params={"configuration_id": configuration_id}).json()
    assert [a["text"] for a in listed] == ["expected: new timm pin"]
    assert client.get("/api/v1/annotations", params={"since": "2026-01-03"}).json() == []
    assert client.post("/api/v1/annotations", json={"text": "floating"}, headers=auth).status_code == 422
    missing = client.post("/api/v1/annotations", json={"text": "x", "series_id": 999999}, headers=auth)
    assert missing.status_code == 404


def test_openapi_documents_the_api(client):
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/api/v1/runs", "/api/v1/runs/{run_id}", "/api/v1/summary", "/api/v1/series/{series_id}/history",
                 "/api/v1/configurations/{configuration_id}/history", "/api/v1/compare/runs",
                 "/api/v1/compare/commits", "/api/v1/annotations"):
        assert path in paths
    body = paths["/api/v1/runs"]["post"]["requestBody"]["content"]
    assert set(body) == {"application/json", "multipart/form-data"}
    import json
    import re

    document = client.get("/openapi.json").json()
    referenced = set(re.findall(r"#/components/schemas/(\w+)", json.dumps(document)))
    assert referenced <= set(document["components"]["schemas"])  # every $ref resolves
    assert "Manifest" in referenced
