"""A metric added to perfdash.metric_registry reaches the database, the API, the model page and compare through its
entry alone. The training throughputs are the proof: no code outside the registry names them."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from perfdash.metric_registry import RESULT_METRICS


def test_every_registry_metric_is_a_column_of_the_migrated_results_table(session) -> None:
    columns = {c["name"]: c for c in sa.inspect(session.connection()).get_columns("results")}
    for metric in RESULT_METRICS:
        assert metric.name in columns, f"{metric.name}: the registry has it, no migration added the column"
        assert columns[metric.name]["nullable"]


def _training_run(upload, run_files, manifest, night: str, speedup: float, eager_ms, compiled_ms) -> int:
    from perfdash.contract import ModelSamples, throughput

    meta = manifest(night=night, mode="training")
    files = run_files({"resnet18": speedup, "vit_small": 1.1}, manifest=meta)
    files[meta.config.key().stem + "_samples.jsonl"] = (ModelSamples(
        "resnet18", 8, eager_ms, compiled_ms, eager_throughput=throughput(8, eager_ms, 1),
        compiled_throughput=throughput(8, compiled_ms, 1)).to_json() + "\n").encode()
    response = upload(files)
    assert response.status_code == 201, response.text
    return response.json()["runs"][0]["run_id"]


def test_throughput_reaches_the_api_the_model_page_and_compare(upload, client, run_files, manifest) -> None:
    base = _training_run(upload, run_files, manifest, "2026-03-01", 1.8, (20.0, 20.0, 20.0), (10.0, 10.0, 10.0))
    new = _training_run(upload, run_files, manifest, "2026-03-02", 1.6, (20.0, 20.0, 20.0), (12.5, 12.5, 12.5))

    results = {r["name"]: r for r in client.get(f"/api/v1/runs/{new}").json()["results"]}
    assert results["resnet18"]["compiled_throughput"] == pytest.approx(8 / 0.0125)
    assert results["resnet18"]["eager_throughput"] == pytest.approx(8 / 0.020)
    assert results["vit_small"]["compiled_throughput"] is None  # no samples for it

    series_id = results["resnet18"]["series_id"]
    points = client.get(f"/api/v1/series/{series_id}/history").json()["points"]
    assert [p["compiled_throughput"] for p in points] == pytest.approx([800.0, 640.0])

    comparison = client.get("/api/v1/compare/runs", params={"base": base, "new": new}).json()
    delta = next(m for m in comparison["models"] if m["name"] == "resnet18")
    assert delta["changes"]["compiled_throughput"] == pytest.approx(640.0 / 800.0 - 1)
    assert delta["changes"]["eager_throughput"] == pytest.approx(0.0)
    assert delta["changes"]["speedup"] == pytest.approx(delta["speedup_change"])

    page = client.get(f"/model/{series_id}", params={"from": "2026-03-01", "to": "2026-03-02"}).text
    assert 'data-metric="compiled_throughput" data-title="compiled throughput (samples/s)"' in page
    assert "<th>compiled samples/s</th>" in page
    assert re.search(r'data-metric="compiled_throughput">640\.0<', page)
    suite = client.get(f"/suite/{new}").text  # the run's model table, against the base run
    assert '<th data-type="num">compiled samples/s</th>' in suite and 'data-value="640.0"' in suite
    # a series whose runs measured no throughput gets no empty chart for it
    other = results["vit_small"]["series_id"]
    assert 'data-metric="compiled_throughput"' not in client.get(
        f"/model/{other}", params={"from": "2026-03-01", "to": "2026-03-02"}).text


def test_a_json_upload_carries_the_samples_metrics_by_their_registry_names(client, auth, session, manifest) -> None:
    import json

    from service.models import Result

    meta = manifest(night="2026-03-05", mode="training")
    row = {"name": "resnet18", "batch_size": 8, "accuracy": "pass", "speedup": 1.5, "abs_latency": 3.0,
           "eager_ms": [2.0, 2.1], "compiled_ms": [1.0, 1.1], "eager_throughput": 3900.0,
           "compiled_throughput": 7600.0}
    body = {"manifest": json.loads(meta.model_dump_json()), "results": [row]}
    response = client.post("/api/v1/runs", json=body, headers=auth)
    assert response.status_code == 201, response.text
    stored = session.scalar(sa.select(Result).where(Result.run_id == response.json()["runs"][0]["run_id"]))
    assert (stored.eager_throughput, stored.compiled_throughput) == (3900.0, 7600.0)
    bad = {"manifest": json.loads(manifest(night="2026-03-06", mode="training").model_dump_json()),
           "results": [{**row, "compiled_throughput": -1.0}]}
    assert client.post("/api/v1/runs", json=bad, headers=auth).status_code == 422
