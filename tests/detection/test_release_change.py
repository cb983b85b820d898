"""A release-to-release comparison (the same models under two torch releases) is one finding naming the two
releases and how the models moved, never per-model regressions; nightlies of one release stay per-model."""

from __future__ import annotations

import math

import sqlalchemy as sa

from service.detection.detector import detect_run
from service.models import Finding

MODELS = {"lcnet_050": 1.50, "resnet18": 1.20, "BertForMaskedLM": 1.10, "T5Small": 1.05}


def _findings(session, run_id: int) -> list[Finding]:
    return list(session.scalars(sa.select(Finding).where(Finding.run_id == run_id)))


def test_two_releases_are_one_finding_naming_both(session, store_run) -> None:
    before = store_run(0, MODELS, torch_version="2.13.0")
    # Under 2.14.1 one model is 30 % slower, one 20 % faster, two did not move; one more model fails accuracy.
    after = store_run(1, {**MODELS, "lcnet_050": 1.05, "resnet18": 1.44, "T5Small": 1.05},
                      statuses={"T5Small": "fail_accuracy"}, torch_version="2.14.1+cpu")
    detect_run(session, before)
    detect_run(session, after)
    found = _findings(session, after)
    environment = [f for f in found if f.category == "environment"]
    assert len(environment) == 1
    summary = environment[0].summary
    assert summary.startswith("torch release change: torch 2.13.0 -> 2.14.1+cpu;")
    assert "speedup median" in summary and "over 3 models (1 better, 1 worse beyond 5%)" in summary
    # No per-model performance finding: the release is one change, its models are in the comparison.
    assert not [f for f in found if f.kind == "performance"]
    # A status change is still its own finding, at once.
    assert [(f.model, f.category) for f in found if f.kind == "status"] == [("T5Small", "new_failure")]


def test_nightlies_and_builds_of_one_release_are_not_a_release_change(session, store_run) -> None:
    first = store_run(0, MODELS, torch_version="2.14.1+cpu")
    same = store_run(1, MODELS, torch_version="2.14.1+cu130")
    nightly = store_run(2, MODELS, torch_version="2.15.0.dev20261125")
    for run in (first, same, nightly):
        detect_run(session, run)
    assert not [f for run in (same, nightly) for f in _findings(session, run) if f.category == "environment"]


def test_the_release_summary_counts_as_every_comparison_does() -> None:
    # A 4.8 % drop is not beyond 5 % (log moves once counted it: log(0.952) < -log(1.05)); a 6 % gain is.
    from service.detection.detector import _release_summary

    summary = _release_summary("speedup", [math.log(0.952), math.log(1.06), math.log(0.90)])
    assert "(1 better, 1 worse beyond 5%)" in summary


def test_a_new_torchbench_commit_is_one_finding_and_stand_in_series_stay_apart(session, store_run) -> None:
    """The TorchBench commit is the torchbench models' own code: a new one is one environment finding naming both
    commits, whatever moved, and no per-model regressions. Runs of the torchvision stand-ins perfdash ran before
    (no model_source) are another configuration: their series are never compared with TorchBench's."""
    from service.models import Run

    tb = {"suite": "torchbench", "model_source": "torchbenchmark"}
    stand_in = store_run(0, MODELS, suite="torchbench", suite_versions={"torchbench": "torchvision 0.29.1"})
    before = store_run(1, MODELS, suite_versions={"torchbench": "0e83c440"}, **tb)
    after = store_run(2, {**MODELS, "lcnet_050": 1.05}, suite_versions={"torchbench": "1234abcd"}, **tb)
    for run in (stand_in, before, after):
        detect_run(session, run)
    configurations = {session.get(Run, run).configuration_id for run in (stand_in, before, after)}
    assert len(configurations) == 2 and session.get(Run, before).configuration_id != \
        session.get(Run, stand_in).configuration_id
    assert not _findings(session, before)  # the first TorchBench run has nothing to be compared with
    found = _findings(session, after)
    assert [f.category for f in found] == ["environment"], [(f.category, f.summary) for f in found]
    assert found[0].summary.startswith("models' code change: suite torchbench 0e83c440 -> 1234abcd;")
    assert "over 4 models (0 better, 1 worse beyond 5%)" in found[0].summary
