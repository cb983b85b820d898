"""The generated code travels in the samples file (or the JSON body) and is stored per model and run
(generated_code, migration 0010); files without it ingest as before."""

from __future__ import annotations

import json
from pathlib import Path

import sqlalchemy as sa

from perfdash.contract import ModelSamples
from perfdash.generated_code import KernelTime, fingerprint, normalise, pack_source, unpack_source
from service.models import GeneratedCode

OUTPUT = normalise((Path(__file__).parents[1] / "contract" / "data" / "inductor_output_cpu.txt").read_text())


def _samples(name: str) -> ModelSamples:
    return ModelSamples(name, 8, (2.0, 2.2), (1.4, 1.5), code=fingerprint([OUTPUT]),
                        kernel_times=(KernelTime("mkl::_mkl_linear", 62.6, 0.32, 2.0),
                                      KernelTime("cpp_fused_addmm_relu_0", 0.31, 0.0016, 1.0)),
                        code_source=pack_source([OUTPUT]))


def test_the_samples_file_stores_the_generated_code(upload, session, run_files, manifest):
    meta = manifest(night="2026-03-01")
    files = run_files({"resnet18": 1.4, "vit": 1.2}, manifest=meta)
    files[meta.config.key().stem + "_samples.jsonl"] = (
        _samples("resnet18").to_json() + "\n" + ModelSamples("vit", 8, (2.0,), (1.0,)).to_json() + "\n").encode()
    response = upload(files)
    assert response.status_code == 201, response.text
    run_id = response.json()["runs"][0]["run_id"]
    rows = list(session.scalars(sa.select(GeneratedCode).where(GeneratedCode.run_id == run_id)))
    assert [r.name for r in rows] == ["resnet18"]  # vit's line has no code: no row
    (row,) = rows
    assert row.digest == fingerprint([OUTPUT]).digest and (row.graphs, row.kernels) == (1, 2)
    assert [k for k, _ in row.kernel_digests] == ["cpp_fused_addmm_relu_0", "cpp_fused_addmm_relu_1"]
    assert row.kernel_times[0] == ["mkl::_mkl_linear", 62.6, 0.32, 2.0]
    assert unpack_source(row.source) == OUTPUT
    # the same files again are the same run (the code is part of its content)
    assert upload(files).status_code == 200


def test_the_json_body_carries_the_generated_code(client, auth, session, manifest):
    samples = _samples("resnet50")
    body = {"manifest": json.loads(manifest(night="2026-03-02").model_dump_json()), "results": [
        {"name": "resnet50", "batch_size": 8, "accuracy": "pass", "speedup": 1.5, "abs_latency": 3.0,
         "eager_ms": [2.0, 2.1], "compiled_ms": [1.0, 1.1], "code": samples.code.to_json(),
         "kernel_times": [k.to_json() for k in samples.kernel_times], "code_source": samples.code_source}]}
    response = client.post("/api/v1/runs", json=body, headers=auth)
    assert response.status_code == 201, response.text
    row = session.get(GeneratedCode, (response.json()["runs"][0]["run_id"], "resnet50"))
    assert row is not None and row.digest == samples.code.digest
    bad = json.loads(json.dumps(body))
    bad["manifest"]["start_time"] = "2026-03-03T01:00:00Z"
    bad["results"][0]["code"] = {"digest": "not hex", "graphs": 1, "kernels": 0}
    response = client.post("/api/v1/runs", json=bad, headers=auth)
    assert response.status_code in (400, 422) and "digest" in response.text
