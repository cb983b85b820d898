"""A series whose between-run spread jumps while its median holds is a noise_change finding (issue 39 item 4)."""

from __future__ import annotations

import numpy as np

from perfdash.verdicts import NOISE_CHANGE
from service.detection.detector import NOISE_WINDOW, RULES, RunDetection, run_rules
from service.models import Run
from service.queries.order import previous_run


def _noise_rule_on(session, run_id: int) -> list:
    (rule,) = [r for r in RULES if r.name == "noise"]  # fails without the rule's entry
    run = session.get(Run, run_id)
    return run_rules(RunDetection(session, run, previous_run(session, run), incremental=True), [rule])


def test_a_spread_jump_is_filed_once_with_its_runs(session, store_run) -> None:
    rng = np.random.default_rng(3)
    quiet = 1.5 * np.exp(rng.normal(0, 0.02, 16))
    loud = 1.5 * np.exp(rng.normal(0, 0.20, NOISE_WINDOW))
    steady = [store_run(night, {"resnet18": float(v), "deit": 1.3}) for night, v in enumerate(quiet)]
    assert _noise_rule_on(session, steady[-1]) == []
    filed = []
    for night, v in enumerate(loud, start=len(quiet)):
        filed += [(night, f) for f in _noise_rule_on(session, store_run(night, {"resnet18": float(v), "deit": 1.3}))]
    ((night, finding),) = [(n, f) for n, f in filed if f.metric == "speedup"]  # once, on the night it first shows
    assert finding.category == NOISE_CHANGE.name and finding.model == "resnet18"
    assert finding.new_value > 3 * finding.old_value
    assert f"{NOISE_WINDOW} runs" in finding.summary
