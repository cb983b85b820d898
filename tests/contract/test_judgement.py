"""perfdash.judgement and perfdash.verdicts: the one judgement of a model's change between two runs, in the one
vocabulary."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from perfdash import verdicts
from perfdash.judgement import EVERY_METRIC, Side, change_verdict, direction, judge, speedup_only
from perfdash.metric_registry import Better


def _result(passed: bool = True, speedup: float = 2.0, abs_latency: float = 10.0,
            ci: tuple[float, float] | None = None) -> SimpleNamespace:
    low, high = ci if ci is not None else (None, None)
    return SimpleNamespace(passed=passed, speedup=speedup, abs_latency=abs_latency, speedup_ci_low=low,
                           speedup_ci_high=high)


def _judge(base, new, criteria=EVERY_METRIC) -> list[str]:
    metrics = ("speedup", "abs_latency")
    judged = judge(Side.of(base, metrics), Side.of(new, metrics), [c for c in criteria if c.metric.name in metrics])
    return [judged.verdict_of(i).name for i in range(len(base))]


def test_status_changes_come_first() -> None:
    base = [None, _result(), _result(), _result(passed=False), _result(passed=False)]
    new = [_result(), None, _result(passed=False), _result(speedup=0.5), _result(passed=False)]
    assert _judge(base, new) == ["added", "removed", "new_failure", "fixed", "still_failing"]


def test_a_metric_beyond_its_minimum_effect_by_its_direction() -> None:
    base = [_result(), _result(), _result(), _result()]
    new = [_result(speedup=1.5), _result(speedup=2.5), _result(abs_latency=12.0), _result(speedup=2.02)]
    assert _judge(base, new) == ["regression", "improvement", "regression", "unchanged"]


def test_worse_in_any_metric_beats_better_in_another() -> None:
    assert _judge([_result()], [_result(speedup=3.0, abs_latency=20.0)]) == ["regression"]


def test_speedup_only_ignores_the_other_metrics() -> None:
    assert _judge([_result()], [_result(abs_latency=20.0)], speedup_only()) == ["unchanged"]
    assert _judge([_result()], [_result(speedup=1.7)], speedup_only(threshold=0.2)) == ["unchanged"]
    assert _judge([_result()], [_result(speedup=1.5)], speedup_only(threshold=0.2)) == ["regression"]


def test_overlapping_intervals_make_a_speedup_move_noise() -> None:
    base = [_result(ci=(1.8, 2.2)), _result(ci=(1.9, 2.1))]
    new = [_result(speedup=1.7, ci=(1.5, 1.9)), _result(speedup=1.7, ci=(1.6, 1.8))]
    assert _judge(base, new) == ["within_noise", "regression"]


def test_an_exact_minimum_effect_is_not_beyond_it() -> None:
    # 1.05 / 1.0 - 1 is 0.05000000000000004 in floating point: the same answer on every page
    assert direction(1.05 / 1.0 - 1, Better.HIGHER, 0.05) == 0
    assert direction(0.0501, Better.HIGHER, 0.05) == 1
    assert direction(0.0501, Better.LOWER, 0.05) == -1
    assert direction(np.nan, Better.LOWER, 0.05) == 0


def test_a_change_point_is_a_regression_when_it_goes_the_worse_way() -> None:
    assert change_verdict(-10.0, Better.HIGHER) is verdicts.REGRESSION
    assert change_verdict(-10.0, Better.LOWER) is verdicts.IMPROVEMENT


def test_an_unknown_word_is_an_error_not_a_regression() -> None:
    with pytest.raises(verdicts.UnknownVerdict):
        verdicts.verdict("slower")
    with pytest.raises(verdicts.UnknownVerdict):
        verdicts.category("still_failing")  # a model verdict, never a finding
    assert verdicts.category("environment").severity is verdicts.Severity.NOTE


def test_every_finding_category_has_a_report_section_and_every_model_verdict_a_place_in_the_order() -> None:
    assert all(c.report_section for c in verdicts.FINDING_CATEGORIES)
    assert [v.name for v in verdicts.MODEL_VERDICTS] == [m.value for m in verdicts.ModelVerdictName]
    assert len({v.tag for v in verdicts.MODEL_VERDICTS if v.tag}) == len([v for v in verdicts.MODEL_VERDICTS if v.tag])
