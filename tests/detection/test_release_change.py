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
