"""POST /api/v1/runs on a real Postgres: PyTorch-named CSVs, JSON, idempotency, auth, limits, malformed input."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from service.models import Annotation, Configuration, Machine, Result, Run, RunSummary, Series

DATA_FILES = ("inductor_torchbench_float32_inference_cpu_performance.csv",
              "inductor_torchbench_float32_inference_cpu_accuracy.csv")
TABLES = (Machine, Configuration, Run, Series, Result, RunSummary, Annotation)


def _pytorch_files() -> dict[str, bytes]:
    from pathlib import Path

    folder = Path(__file__).parent / "data" / "pytorch_run"
    return {name: (folder / name).read_bytes() for name in DATA_FILES}


def _snapshot(session) -> dict[str, list[tuple]]:
    """Every row of every table, to show that a second upload changed nothing at all."""
    out = {}
    for model in TABLES:
        table = model.__table__
        rows = session.execute(sa.select(table).order_by(*table.primary_key.columns)).all()
        out[table.name] = [tuple(r) for r in rows]
    return out


def _count(session, model) -> int:
    return session.scalar(sa.select(sa.func.count()).select_from(model))


def test_pytorch_csvs_are_stored_joined_and_gated(upload, session, hook_calls):
    response = upload(_pytorch_files(), machine="Xeon 8375C", commit="deadbeef", timestamp="2026-03-04T02:00:00+00:00")
    assert response.status_code == 201, response.text
    (run_info,) = response.json()["runs"]
    assert run_info["created"] and run_info["suite"] == "torchbench" and run_info["models"] == 7
    run = session.get(Run, run_info["run_id"])
    assert run.source == "pytorch" and run.torch_git_commit == "deadbeef" and run.night.isoformat() == "2026-03-04"
    assert run.configuration.machine.fingerprint == "Xeon 8375C"
    results = {r.name: r for r in session.scalars(sa.select(Result).where(Result.run_id == run.id))}
    # accuracy gates performance: fail_accuracy keeps its measured speedup but does not pass
    assert results["mobilenet_v2"].speedup == 3.0 and not results["mobilenet_v2"].passed
    assert results["mobilenet_v2"].graph_breaks == 1
    assert results["alexnet"].passed and results["resnet18"].accuracy == "pass_due_to_skip"
    assert results["densenet121"].speedup == 0.0 and results["densenet121"].compilation_latency is None
    assert results["squeezenet1_1"].speedup is None and results["squeezenet1_1"].accuracy == "eager_two_runs_differ"
    assert hook_calls == [run.id]


def test_variant_in_the_name_is_its_own_configuration(upload, session):
    files = {name.replace("inductor_", "inductor_no_cudagraphs_"): data for name, data in _pytorch_files().items()}
    response = upload(files, machine="A100", timestamp="2026-03-04T02:00:00")
    assert response.status_code == 201, response.text
    run = session.get(Run, response.json()["runs"][0]["run_id"])
    assert (run.configuration.backend, run.configuration.variant) == ("inductor", "no_cudagraphs")
    assert run.configuration.backend_variant == "inductor_no_cudagraphs"


def test_same_upload_twice_changes_nothing(upload, session, hook_calls):
    form = {"machine": "Xeon", "commit": "abc", "timestamp": "2026-03-04T02:00:00+00:00"}
    first = upload(_pytorch_files(), **form)
    assert first.status_code == 201
    before = _snapshot(session)
    second = upload(_pytorch_files(), **form)
    assert second.status_code == 200, second.text
    assert second.json()["runs"][0]["created"] is False
    assert second.json()["runs"][0]["run_id"] == first.json()["runs"][0]["run_id"]
    assert _snapshot(session) == before
    assert len(hook_calls) == 1  # hooks run for new runs only


def test_same_key_with_other_results_is_a_conflict(upload, session, run_files, manifest):
    meta = manifest()
    assert upload(run_files({"a": 1.5, "b": 2.0}, manifest=meta)).status_code == 201
    response = upload(run_files({"a": 1.5, "b": 0.5}, manifest=meta))
    assert response.status_code == 409
    assert _count(session, Run) == 1


def test_json_body_is_ingested_like_the_files(client, auth, session, manifest):
    meta = manifest(night="2026-02-01")
    body = {"manifest": json.loads(meta.model_dump_json()), "results": [
        {"name": "resnet50", "batch_size": 8, "accuracy": "pass", "speedup": 1.5, "abs_latency": 3.0,
         "compilation_latency": 30.0, "compression_ratio": 1.1, "eager_ms": [2.0, 2.1], "compiled_ms": [1.0, 1.1]},
        {"name": "vit", "batch_size": 8, "accuracy": "fail_accuracy", "speedup": 1.2},
    ]}
    response = client.post("/api/v1/runs", json=body, headers=auth)
    assert response.status_code == 201, response.text
    run_id = response.json()["runs"][0]["run_id"]
    summary = session.get(RunSummary, run_id)
    assert (summary.passed, summary.total, summary.geomean_speedup) == (1, 2, pytest.approx(1.5))
    stored = session.scalar(sa.select(Result).where(Result.run_id == run_id, Result.name == "resnet50"))
    assert stored.samples == {"eager_ms": [2.0, 2.1], "compiled_ms": [1.0, 1.1]}
    assert client.post("/api/v1/runs", json=body, headers=auth).status_code == 200


def test_manifest_and_samples_beside_the_csvs(upload, session, run_files, manifest):
    from perfdash.contract import ModelSamples

    meta = manifest(night="2026-02-03", commit="1234abcd", threads=1, env={"TORCHINDUCTOR_FREEZING": "1"})
    files = run_files({"resnet18": 1.4}, manifest=meta)
    files[meta.config.key().stem + "_samples.jsonl"] = (ModelSamples("resnet18", 8, (2.0, 2.2), (1.4, 1.5)).to_json()
                                                        + "\n").encode()
    response = upload(files)
    assert response.status_code == 201, response.text
    run = session.get(Run, response.json()["runs"][0]["run_id"])
    assert run.source == "perfdash" and run.host == "agent-1" and run.suite_versions == {"timm": "1.0.31"}
    assert run.configuration.thread_config == "single-thread"
    assert run.configuration.env == {"TORCHINDUCTOR_FREEZING": "1"}
    assert run.configuration.machine.fingerprint == "Test Xeon | 2 cores"
    result = session.scalar(sa.select(Result).where(Result.run_id == run.id))
    assert result.samples == {"eager_ms": [2.0, 2.2], "compiled_ms": [1.4, 1.5]}


def test_activation_peak_is_kept_with_the_samples_not_in_pytorchs_columns(upload, client, auth, session, run_files,
                                                                            manifest):
    """perfdash's own activation peak travels in the samples file (or the JSON body) and is stored with the samples;
    PyTorch's peak memory columns keep the CSV's values."""
    from perfdash.contract import ModelSamples

    meta = manifest(night="2026-02-04")
    files = run_files({"resnet18": 1.4}, manifest=meta)
    files[meta.config.key().stem + "_samples.jsonl"] = (
        ModelSamples("resnet18", 8, (2.0, 2.2), (1.4, 1.5), eager_activation_peak_mem=0.024,
                     dynamo_activation_peak_mem=0.015).to_json() + "\n").encode()
    response = upload(files)
    assert response.status_code == 201, response.text
    result = session.scalar(sa.select(Result).where(Result.run_id == response.json()["runs"][0]["run_id"]))
    assert result.samples == {"eager_ms": [2.0, 2.2], "compiled_ms": [1.4, 1.5], "eager_activation_peak_mem": 0.024,
                              "dynamo_activation_peak_mem": 0.015}
    assert (result.eager_peak_mem, result.dynamo_peak_mem) != (0.024, 0.015)
    assert (result.eager_activation_peak_mem, result.dynamo_activation_peak_mem) == (0.024, 0.015)  # the history's

    body = {"manifest": json.loads(manifest(night="2026-02-05").model_dump_json()), "results": [
        {"name": "resnet50", "batch_size": 8, "accuracy": "pass", "speedup": 1.5, "abs_latency": 3.0,
         "compilation_latency": 30.0, "compression_ratio": 0.9, "eager_peak_mem": 1.8, "dynamo_peak_mem": 2.0,
         "eager_ms": [2.0, 2.1], "compiled_ms": [1.0, 1.1], "eager_activation_peak_mem": 0.3,
         "dynamo_activation_peak_mem": 0.1}]}
    response = client.post("/api/v1/runs", json=body, headers=auth)
    assert response.status_code == 201, response.text
    stored = session.scalar(sa.select(Result).where(Result.run_id == response.json()["runs"][0]["run_id"]))
    assert (stored.eager_peak_mem, stored.dynamo_peak_mem, stored.compression_ratio) == (1.8, 2.0, 0.9)
    assert (stored.samples["eager_activation_peak_mem"], stored.samples["dynamo_activation_peak_mem"]) == (0.3, 0.1)
    assert (stored.eager_activation_peak_mem, stored.dynamo_activation_peak_mem) == (0.3, 0.1)


def test_a_bad_activation_peak_names_the_samples_line(upload, session, run_files, manifest):
    meta = manifest(night="2026-02-06")
    files = run_files({"resnet18": 1.4}, manifest=meta)
    name = meta.config.key().stem + "_samples.jsonl"
    files[name] = (b'{"name": "resnet18", "batch_size": 8, "eager_ms": [2.0], "compiled_ms": [1.0]}\n'
                   b'{"name": "resnet18", "batch_size": 8, "eager_ms": [2.0], "compiled_ms": [1.0], '
                   b'"eager_activation_peak_mem": "lots"}\n')
    response = upload(files)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert (detail["file"], detail["line"]) == (name, 2)
    assert _count(session, Run) == 0


def _parts(files: dict[str, bytes]) -> list:
    return [("files", (name, data, "text/csv")) for name, data in files.items()]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic dG9rZW4tb25l"},
                                     {"Authorization": "Bearer token-one,token-two"},
                                     {"Authorization": "Bearer token-on"}])
def test_bad_or_missing_token_is_401_and_stores_nothing(client, session, headers):
    response = client.post("/api/v1/runs", files=_parts(_pytorch_files()), headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert "token-one" not in response.text
    assert _count(session, Run) == 0


def test_both_configured_tokens_work(client, session):
    for token in ("token-one", "token-two"):
        response = client.post("/api/v1/runs", files=_parts(_pytorch_files()), data={"machine": token},
                               headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 201, response.text
    assert _count(session, Run) == 2


def test_upload_over_the_limit_is_413(client, auth, session):
    big = _pytorch_files()
    name = DATA_FILES[0]
    big[name] = big[name] + b"cpu,x,1,1.0,1.0\n" * 20_000  # ~300 kB > 256 kB limit of the test settings
    response = client.post("/api/v1/runs", files=_parts(big), headers=auth)
    assert response.status_code == 413
    assert "limit" in response.json()["detail"]
    assert _count(session, Run) == 0


def test_chunked_upload_over_the_limit_is_413(client, auth, session):
    body = b"{" + b" " * (300 * 1024) + b"}"

    def chunks():
        for start in range(0, len(body), 64 * 1024):
            yield body[start:start + 64 * 1024]

    response = client.post("/api/v1/runs", content=chunks(),
                           headers={**auth, "Content-Type": "application/json"})
    assert response.status_code == 413
    assert _count(session, Run) == 0


PERF = "inductor_torchbench_float32_inference_cpu_performance.csv"
ACC = "inductor_torchbench_float32_inference_cpu_accuracy.csv"
GOOD_ACC = b"dev,name,batch_size,accuracy\ncpu,alexnet,4,pass\n"


@pytest.mark.parametrize(("files", "expected"), [
    pytest.param({PERF: b"dev,name,batch_size,speedup,abs_latency,compression_ratio\ncpu,a,1,1.0,1.0,1.0\n"},
                 {"file": PERF, "line": 1, "column": "compilation_latency"}, id="missing-column"),
    pytest.param({PERF: (b"dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,"
                         b"eager_peak_mem,dynamo_peak_mem\ncpu,a,1,1.0,1.0,2.0,1.0,1,1\ncpu,b,1,fast,1.0,2,1,1,1\n"),
                  ACC: GOOD_ACC},
                 {"file": PERF, "line": 3, "column": "speedup"}, id="bad-number"),
    pytest.param({ACC: b"dev,name,batch_size,accuracy\ncpu,a,1,pass\ncpu,b,1,0.97\n"},
                 {"file": ACC, "line": 3, "column": "accuracy"}, id="not-a-status"),
    pytest.param({PERF: b""}, {"file": PERF, "line": 1, "column": None}, id="empty-file"),
    pytest.param({ACC: "dev,name,batch_size,accuracy\ncpu,caf\xe9,1,pass\n".encode("latin-1")},
                 {"file": ACC, "line": 2, "column": None}, id="wrong-encoding"),
    pytest.param({"inductor_mysuite_float32_inference_cpu_performance.csv": b"x"},
                 {"file": "inductor_mysuite_float32_inference_cpu_performance.csv", "line": None, "column": None},
                 id="bad-name"),
])
def test_malformed_input_names_file_line_column_and_stores_nothing(upload, session, files, expected):
    response = upload(files, machine="m")
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert {k: detail[k] for k in expected} == expected
    assert detail["message"]
    assert _count(session, Run) == 0 and _count(session, Machine) == 0


def test_unknown_but_wellformed_status_is_kept_and_counts_as_failure(upload, session):
    files = {ACC: b"dev,name,batch_size,accuracy\ncpu,a,1,pass\ncpu,b,1,fail_new_thing\n",
             PERF: (b"dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,eager_peak_mem,"
                    b"dynamo_peak_mem\ncpu,a,1,2.0,1.0,5.0,1.0,1,1\ncpu,b,1,3.0,1.0,5.0,1.0,1,1\n")}
    response = upload(files, machine="m")
    assert response.status_code == 201, response.text
    run_id = response.json()["runs"][0]["run_id"]
    assert session.scalar(sa.select(Result.accuracy).where(Result.run_id == run_id, Result.name == "b")) \
        == "fail_new_thing"
    summary = session.get(RunSummary, run_id)
    assert (summary.passed, summary.total) == (1, 2)


def test_a_failing_run_rolls_back_the_whole_upload(upload, session, run_files):
    good = run_files({"resnet18": 1.3}, stem="inductor_timm_models_float32_inference_cpu")
    # A model name longer than the column allows: refused by the contract, naming where, before anything is stored.
    bad = run_files({"x" * 300: 1.1}, stem="inductor_torchbench_float32_inference_cpu")
    response = upload({**good, **bad}, machine="m", timestamp="2026-01-01T00:00:00")
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert "at most 200" in detail["message"] and (detail["line"], detail["column"]) == (2, "name")
    assert _count(session, Run) == 0 and _count(session, Result) == 0 and _count(session, Machine) == 0


def test_manifest_for_another_configuration_is_rejected(upload, session, run_files, manifest):
    files = run_files({"a": 1.0}, stem="inductor_torchbench_float32_inference_cpu")
    files["inductor_torchbench_float32_inference_cpu_manifest.json"] = manifest(suite="timm_models") \
        .model_dump_json().encode()
    response = upload(files)
    assert response.status_code == 422
    assert response.json()["detail"]["file"] == "inductor_torchbench_float32_inference_cpu_manifest.json"
    assert _count(session, Run) == 0


def test_failing_hook_is_reported_and_the_run_stays(settings, session, run_files, auth):
    from fastapi.testclient import TestClient

    from service.api.deps import get_session
    from service.app import create_app

    def broken(_session, run_id):
        raise RuntimeError(f"detector down for {run_id}")

    app = create_app(settings, post_ingest_hooks=[broken])
    app.dependency_overrides[get_session] = lambda: session
    with TestClient(app) as client:
        response = client.post("/api/v1/runs", files=_parts(run_files({"a": 1.2})), data={"machine": "m"},
                               headers=auth)
    assert response.status_code == 201
    assert "detector down" in response.json()["hook_errors"][0]
    assert _count(session, Run) == 1


def test_malformed_json_results_name_the_result(client, auth, session, manifest):
    body = {"manifest": json.loads(manifest().model_dump_json()),
            "results": [{"name": "ok", "accuracy": "pass", "speedup": 1.1},
                        {"name": "bad", "accuracy": "pass", "speedup": -2.0}]}
    response = client.post("/api/v1/runs", json=body, headers=auth)
    assert response.status_code == 422
    # the schema's minimum (issue 29: the document says what the rows check), named where it is
    assert response.json()["detail"][0]["loc"] == ["results", 1, "speedup"]
    body["results"][1] = {"name": "neither"}
    assert client.post("/api/v1/runs", json=body, headers=auth).json()["detail"]["file"] == "results[1]"
    del body["manifest"]["config"]
    invalid = client.post("/api/v1/runs", json=body, headers=auth)
    assert invalid.status_code == 422 and invalid.json()["detail"][0]["loc"][:2] == ["manifest", "config"]
    assert _count(session, Run) == 0


def test_performance_csv_without_accuracy_counts_every_speedup(upload, session):
    files = {PERF: (b"dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,eager_peak_mem,"
                    b"dynamo_peak_mem\ncpu,a,1,2.0,1.0,5.0,1.0,1,1\ncpu,b,1,0.5,1.0,7.0,1.0,1,1\ncpu,c,0,0.0,0.0\n")}
    response = upload(files, machine="m")
    assert response.status_code == 201, response.text
    summary = session.get(RunSummary, response.json()["runs"][0]["run_id"])
    assert (summary.passed, summary.total) == (2, 3)
    assert summary.mean_compile_time_s == pytest.approx(6.0)
    accuracy = session.scalars(sa.select(Result.accuracy).where(Result.run_id == summary.run_id)).all()
    assert accuracy == [None, None, None]


def test_throughput_is_stored_and_world_size_is_its_own_configuration(upload, session, run_files, manifest):
    """A training run's samples per second travel in the samples file; a DDP run at another world size or process
    group backend is another configuration, and a single-process run keeps the key it had before those axes."""
    from perfdash.contract import ModelSamples, throughput
    from service.ingest.keys import configuration_key

    single = manifest(night="2026-02-06", mode="training")
    assert configuration_key(single.config, "fp") == configuration_key(
        single.config.model_copy(update={"world_size": 1, "distributed_backend": None}), "fp")
    run_ids = []
    for meta, eager_ms, compiled_ms in ((single, (20.0, 22.0, 30.0), (10.0, 12.0, 11.0)),
                                        (manifest(night="2026-02-06", mode="training", world_size=2,
                                                  distributed_backend="gloo"), (25.0, 26.0), (14.0, 15.0))):
        files = run_files({"resnet18": 1.8}, manifest=meta)
        world = meta.config.world_size
        files[meta.config.key().stem + "_samples.jsonl"] = (ModelSamples(
            "resnet18", 8, eager_ms, compiled_ms, eager_throughput=throughput(8, eager_ms, world),
            compiled_throughput=throughput(8, compiled_ms, world)).to_json() + "\n").encode()
        response = upload(files)
        assert response.status_code == 201, response.text
        run_ids.append(response.json()["runs"][0]["run_id"])
    one, two = (session.get(Run, run_id) for run_id in run_ids)
    assert one.configuration_id != two.configuration_id
    assert (one.configuration.world_size, one.configuration.distributed_backend) == (1, None)
    assert (two.configuration.world_size, two.configuration.distributed_backend) == (2, "gloo")
    stored = {r.run_id: r for r in session.scalars(sa.select(Result).where(Result.run_id.in_(run_ids)))}
    # batch over the median step: 8 samples in 22 ms eager, 11 ms compiled; two processes of 8 in 25.5 / 14.5 ms
    assert stored[one.id].eager_throughput == pytest.approx(8 / 0.022)
    assert stored[one.id].compiled_throughput == pytest.approx(8 / 0.011)
    assert stored[two.id].compiled_throughput == pytest.approx(16 / 0.0145)


def test_two_files_of_one_name_in_one_upload_are_refused(client, auth, run_files, session) -> None:
    files = run_files({"resnet18": 1.2})
    name, data = next(iter(files.items()))
    parts = [*_parts(files), ("files", (name, data.replace(b"resnet18", b"alexnet"), "text/csv"))]
    response = client.post("/api/v1/runs", files=parts, data={"machine": "Test Xeon"}, headers=auth)
    assert response.status_code == 422
    # a fault of the upload's files, named as every file fault is (file, line, column)
    assert f"two files named '{name}' in one upload" in response.json()["detail"]["message"]
    assert response.json()["detail"]["file"] == name
    assert session.query(Run).count() == 0


def test_two_files_of_one_base_name_in_one_upload_are_refused(client, auth, run_files, session) -> None:
    # a/NAME and b/NAME: the directory is not part of a name, so one of them would be dropped without a word
    files = run_files({"resnet18": 1.2})
    name, data = next(iter(files.items()))
    rest = [(n, d) for n, d in files.items() if n != name]
    parts = [("files", (f"a/{name}", data, "text/csv")),
             ("files", (f"b/{name}", data.replace(b"resnet18", b"alexnet"), "text/csv")),
             *[("files", (n, d, "text/csv")) for n, d in rest]]
    response = client.post("/api/v1/runs", files=parts, data={"machine": "Test Xeon"}, headers=auth)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert f"two files named '{name}' in one upload ('a/{name}' and 'b/{name}')" in detail["message"]
    assert detail["file"] == name
    assert session.query(Run).count() == 0
