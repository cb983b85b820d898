"""The bisection contract (perfdash.bisection): what the service sends, the bisect tool reads, and back."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from perfbisect.service import BisectionJob
from pydantic import ValidationError

from perfdash.bisection import REQUEST_AXES, BisectionIn, BisectionOut, BisectionResult, parse_threads


@pytest.mark.parametrize(("given", "expected"), [
    (None, None), ("", None), ("all", None), ("socket", None), ("All-Cores", None),
    ("single", 1), ("single-thread", 1), (1, 1), (8, 8), ("16", 16),
])
def test_thread_names_and_counts(given, expected) -> None:
    assert parse_threads(given) == expected


@pytest.mark.parametrize("given", ["many", "1.5", True])
def test_an_unknown_thread_name_is_refused(given) -> None:
    with pytest.raises(ValueError, match="threads"):
        parse_threads(given)
    with pytest.raises(ValidationError):
        BisectionIn(threads=given)


def test_a_result_keeps_status_samples_of_an_accuracy_bisection() -> None:
    result = BisectionResult.model_validate({"verdict": "culprit_found", "good_samples": ["pass", "pass"],
                                             "bad_samples": ["fail_accuracy", "crash"],
                                             "steps": [{"sha": "abc", "samples": ["pass", 1.5], "decision": "good"}]})
    assert result.bad_samples == ["fail_accuracy", "crash"] and result.steps[0].samples == ["pass", 1.5]
    with pytest.raises(ValidationError):
        BisectionResult(verdict="maybe")


def test_what_the_service_sends_is_what_the_bisect_tool_measures() -> None:
    sent = BisectionOut(id=7, status="pending", purpose="confirm", finding_id=3, configuration_id=2,
                        suite="timm_models", model="resnet18", backend="inductor", variant="max_autotune_dynamic",
                        compile_mode="max-autotune", dtype="bfloat16", mode="inference", device="cpu", threads=1,
                        batch_size=8, metric="speedup",
                        direction="higher", good_commit="a" * 40, bad_commit="b" * 40, threshold_pct=3.0,
                        created_at=datetime(2026, 11, 24, tzinfo=UTC), result=None)
    job = BisectionJob.from_json(sent.model_dump(mode="json"))
    target = job.target
    assert {name: getattr(target, name) for name in REQUEST_AXES if hasattr(target, name)} == {
        "suite": "timm_models", "backend": "inductor", "compile_mode": "max-autotune", "dtype": "bfloat16",
        "mode": "inference", "device": "cpu", "threads": 1}
    assert target.dynamic_shapes is True and target.model == "resnet18" and target.batch_size == 8
    assert (job.good_commit, job.bad_commit, job.direction, job.threshold_pct) == ("a" * 40, "b" * 40, "higher", 3.0)
