"""The suite page of a torchbench run says where its models came from: PyTorch's TorchBench at the commit its manifest
recorded (linked), or, for runs from before perfdash ran TorchBench, that they were torchvision stand-ins."""

from __future__ import annotations

import html


def _upload(upload, run_files, manifest, versions: dict[str, str], **config) -> int:
    meta = manifest(suite="torchbench", **config).model_copy(update={"suite_versions": versions})
    response = upload(run_files({"BERT_pytorch": 1.3, "lennard_jones": 1.1}, manifest=meta))
    assert response.status_code == 201, response.text
    return response.json()["runs"][0]["run_id"]


def test_the_suite_page_names_the_torchbench_commit_and_the_models_that_ran(upload, client, run_files,
                                                                            manifest) -> None:
    commit = "0e83c440a51cd63464fee34724d01b7c814ce39b"
    run = _upload(upload, run_files, manifest, {"torchbench": commit}, model_source="torchbenchmark")
    page = html.unescape(client.get(f"/suite/{run}").text)
    assert "2 models of PyTorch's TorchBench" in page
    assert f'href="https://github.com/pytorch/benchmark/commit/{commit}"' in page
    assert "BERT_pytorch, lennard_jones" in page


def test_a_run_of_the_old_stand_ins_says_it_was_not_torchbench(upload, client, run_files, manifest) -> None:
    run = _upload(upload, run_files, manifest, {"torchbench": "torchvision 0.29.1 (torchbenchmark not installed)"},
                  night="2026-01-03")
    page = html.unescape(client.get(f"/suite/{run}").text)
    assert "not PyTorch's TorchBench: torchvision stand-ins" in page and "pytorch/benchmark/commit" not in page
