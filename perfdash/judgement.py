"""How a model changed between two runs: the one judgement that Compare, Releases, the summary cells and detection
share. Words and severities come from perfdash.verdicts; directions and minimum effects from perfdash.metric_registry.

Status first: in one run only (``added`` / ``removed``), pass -> fail (``new_failure``), fail -> pass (``fixed``),
failing in both (``still_failing``). Between two passing results each judged metric (a :class:`Criterion`: the metric
and the relative change that counts) moves ``better`` or ``worse`` by the metric's direction when its change exceeds
the criterion's minimum effect; a speedup change whose two 95 % confidence intervals overlap does not count. Any worse
metric makes a ``regression``, else a better one an ``improvement``, else a speedup move inside the intervals is
``within_noise``, else ``unchanged``.

"Regression" therefore depends on what is judged, and the two uses say which (see :data:`EVERY_METRIC` and
:func:`speedup_only`): Compare judges the speedup against a threshold the reader sets ("speedup regression"), the
Releases view every registry metric by its own minimum effect ("regression in any metric").

Vectorised (numpy): the Releases view judges thousands of models per request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from perfdash.metric_registry import RESULT_METRICS, SPEEDUP, Better, ResultMetric
from perfdash.verdicts import (
    ADDED,
    FIXED,
    IMPROVEMENT,
    MODEL_VERDICTS,
    NEW_FAILURE,
    REGRESSION,
    REMOVED,
    STILL_FAILING,
    UNCHANGED,
    WITHIN_NOISE,
    Verdict,
    model_verdict_index,
)

# An exact 5 % (1.05 / 1.0 - 1 = 0.05000000000000004 in floating point) is not beyond a 5 % minimum effect.
EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class Criterion:
    metric: ResultMetric
    min_effect: float  # relative


# The Releases view's meaning: every registry metric, by its own minimum effect.
EVERY_METRIC: tuple[Criterion, ...] = tuple(Criterion(m, m.min_effect) for m in RESULT_METRICS)


# Bump when judge() changes its rules, or a migration rewrites results' judged values: verdicts kept under an older
# fingerprint are then not read, and ingest judges each configuration's pairs again (service/release_verdicts.py).
RULES_VERSION = 1


def criteria_words(criteria: Sequence[Criterion]) -> str:
    """What a kept verdict was judged by, in words: the rules' version, the verdict order, each criterion (metric,
    its direction, its minimum effect) and the epsilon. Verdicts kept under other words are stale (the service keeps
    a hash of them: service.queries.releases.CRITERIA)."""
    return "\n".join([f"rules {RULES_VERSION}", f"epsilon {EPSILON!r}",
                      "verdicts " + ",".join(v.name for v in MODEL_VERDICTS),
                      *(f"{c.metric.name} {c.metric.better.value} {c.min_effect!r}" for c in criteria)])


def speedup_only(threshold: float = SPEEDUP.min_effect) -> tuple[Criterion, ...]:
    """Compare's meaning: the speedup alone, beyond the reader's threshold."""
    return (Criterion(SPEEDUP, threshold),)


def direction(relative: Any, better: Better, min_effect: float) -> np.ndarray:
    """+1 better, -1 worse, 0 within the minimum effect (or no value: NaN), elementwise over a relative change
    (``new / base - 1``). The one rule for "beyond its minimum effect, which way"."""
    relative = np.asarray(relative, dtype=float)
    with np.errstate(invalid="ignore"):
        moved = np.abs(relative) > min_effect + EPSILON
        sign = np.where((relative > 0) == (better is Better.HIGHER), 1, -1)
    return np.where(moved, sign, 0)


def change_verdict(change: float, better: Better) -> Verdict:
    """A significant change (a change point) of a metric: worse is a regression, else an improvement."""
    return REGRESSION if better.is_regression(change) else IMPROVEMENT


class ResultLike(Protocol):
    passed: bool


@dataclass(frozen=True, slots=True)
class Side:
    """One run's side of N models (element i of both sides is the same model). NaN: no value."""

    passed: np.ndarray  # 1.0 passed, 0.0 not, NaN: not in that run
    values: Mapping[str, np.ndarray]  # metric name -> value
    interval: tuple[np.ndarray, np.ndarray]  # the speedup's 95 % confidence interval (low, high)

    @classmethod
    def of(cls, results: Sequence[ResultLike | None], metrics: Sequence[str] = ()) -> Side:
        """From result rows (ORM or API objects; None: not in that run)."""

        def column(name: str) -> np.ndarray:
            # None -> NaN by numpy's float conversion; an absent row has no value either
            return np.array([None if r is None else getattr(r, name, None) for r in results], dtype=float)

        passed = np.array([None if r is None else bool(r.passed) for r in results], dtype=float)
        return cls(passed=passed, values={m: column(m) for m in metrics},
                   interval=(column("speedup_ci_low"), column("speedup_ci_high")))


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: np.ndarray  # index into perfdash.verdicts.MODEL_VERDICTS
    impact: np.ndarray  # the largest relative change in the verdict's direction (status changes: 1.0)
    change: dict[str, np.ndarray]  # metric -> new / base - 1 (NaN: not both measured, or not both passing)
    direction: dict[str, np.ndarray]  # judged metric -> -1 worse, 0 same, +1 better beyond its minimum effect

    def verdict_of(self, i: int) -> Verdict:
        return MODEL_VERDICTS[int(self.verdict[i])]


_INDEX = model_verdict_index()


def judge(base: Side, new: Side, criteria: Sequence[Criterion]) -> Judgement:
    """Every model's verdict at once. ``change`` covers every metric both sides carry; ``direction`` the judged."""
    base_passed, new_passed = base.passed, new.passed
    size = len(base_passed)
    in_base, in_new = ~np.isnan(base_passed), ~np.isnan(new_passed)
    passing = in_base & in_new & (base_passed == 1.0) & (new_passed == 1.0)
    change: dict[str, np.ndarray] = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        for name in base.values.keys() & new.values.keys():
            before, after = base.values[name], new.values[name]
            measured = passing & (before > 0) & (after > 0)  # a failure row's zeros are not a measurement
            change[name] = np.where(measured, after / np.where(measured, before, 1.0) - 1.0, np.nan)
        (base_low, base_high), (new_low, new_high) = base.interval, new.interval
        overlap = (base_low <= new_high) & (new_low <= base_high)  # False where an interval is missing (NaN)
    directions = {c.metric.name: direction(change[c.metric.name], c.metric.better, c.min_effect) for c in criteria}
    noise = (directions[SPEEDUP.name] != 0) & overlap if SPEEDUP.name in directions else np.zeros(size, dtype=bool)
    worse = np.zeros(size, dtype=bool)
    better = np.zeros(size, dtype=bool)
    worse_impact = np.zeros(size)
    better_impact = np.zeros(size)
    for name, d in directions.items():
        counted = np.where(noise, 0, d) if name == SPEEDUP.name else d
        magnitude = np.nan_to_num(np.abs(change[name]))
        worse |= counted < 0
        better |= counted > 0
        worse_impact = np.maximum(worse_impact, np.where(counted < 0, magnitude, 0.0))
        better_impact = np.maximum(better_impact, np.where(counted > 0, magnitude, 0.0))
    verdict = np.select(
        [~in_base, ~in_new, (base_passed == 1.0) & (new_passed == 0.0), (base_passed == 0.0) & (new_passed == 1.0),
         ~passing, worse, better, noise],
        [_INDEX[v.name] for v in (ADDED, REMOVED, NEW_FAILURE, FIXED, STILL_FAILING, REGRESSION, IMPROVEMENT,
                                  WITHIN_NOISE)], default=_INDEX[UNCHANGED.name])
    impact = np.select([worse & passing, better & passing, verdict == _INDEX[NEW_FAILURE.name],
                        verdict == _INDEX[FIXED.name]], [worse_impact, better_impact, 1.0, 1.0], default=0.0)
    return Judgement(verdict=verdict, impact=impact, change=change, direction=directions)
