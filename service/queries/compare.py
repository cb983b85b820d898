"""Compare two runs of one configuration (or two commits across configurations): per-model deltas and verdicts.

Verdicts per model, in order: ``new_failure`` (passed before, not now), ``fixed`` (the reverse), ``still_failing``,
``added`` / ``removed`` (in one run only), ``regression`` / ``improvement`` (both passed and the speedup changed by
more than ``threshold``, relative), ``within_noise`` (such a change, but the two speedups' confidence intervals
overlap: perfdash.confidence.within_noise), else ``unchanged``. Speedups compared are the measured ones of passing
models.
"""

from __future__ import annotations

from typing import Literal

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.orm import Session

from perfdash.confidence import Interval, within_noise
from perfdash.metric_registry import COMPILATION_LATENCY, COMPRESSION_RATIO, RESULT_METRICS, SPEEDUP, relative_change
from service.models import Run
from service.queries.filters import ConfigFilter, RunFilter
from service.queries.order import run_order
from service.queries.runs import results_of
from service.queries.schemas import ResultOut, RunOut

ModelChange = Literal["new_failure", "fixed", "still_failing", "added", "removed", "regression", "improvement",
                  "within_noise", "unchanged"]
DEFAULT_THRESHOLD = SPEEDUP.min_effect  # the verdicts are the speedup's


class ModelDelta(BaseModel):
    name: str
    base: ResultOut | None
    new: ResultOut | None
    verdict: ModelChange
    status_changed: bool
    speedup_change: float | None  # new / base - 1, both passing
    compile_time_change: float | None
    memory_ratio_change: float | None
    # new / base - 1 of every metric of perfdash.metric_registry, both passing (None: missing on either side)
    changes: dict[str, float | None] = {}


class RunComparison(BaseModel):
    base: RunOut
    new: RunOut
    threshold: float
    models: list[ModelDelta]
    new_failures: list[str]
    fixed: list[str]
    regressions: list[str]
    improvements: list[str]
    within_noise: list[str] = []


class NotComparable(ValueError):
    """The two runs belong to different configurations."""


def _delta(name: str, base: ResultOut | None, new: ResultOut | None, threshold: float) -> ModelDelta:
    changes: dict[str, float | None] = {}
    if base is None or new is None:
        verdict: ModelChange = "added" if base is None else "removed"
    elif base.passed and not new.passed:
        verdict = "new_failure"
    elif new.passed and not base.passed:
        verdict = "fixed"
    elif not new.passed:
        verdict = "still_failing"
    else:
        changes = {m.name: relative_change(getattr(base, m.name), getattr(new, m.name)) for m in RESULT_METRICS}
        speedup = changes[SPEEDUP.name]
        if speedup is not None and abs(speedup) > threshold and within_noise(interval(base), interval(new)):
            verdict = "within_noise"
        elif speedup is not None and speedup < -threshold:
            verdict = "regression"
        elif speedup is not None and speedup > threshold:
            verdict = "improvement"
        else:
            verdict = "unchanged"
    changed = base is not None and new is not None and base.accuracy != new.accuracy
    return ModelDelta(name=name, base=base, new=new, verdict=verdict, status_changed=changed,
                      speedup_change=changes.get(SPEEDUP.name),
                      compile_time_change=changes.get(COMPILATION_LATENCY.name),
                      memory_ratio_change=changes.get(COMPRESSION_RATIO.name), changes=changes)


def interval(result: ResultOut) -> Interval | None:
    """The stored confidence interval of a result's speedup (None for runs without raw samples)."""
    if result.speedup_ci_low is None or result.speedup_ci_high is None:
        return None
    return Interval(result.speedup_ci_low, result.speedup_ci_high)


def _results(session: Session, run_id: int) -> dict[str, ResultOut]:
    return {r.name: r for r in results_of(session, run_id)}


def compare_runs(session: Session, base_run_id: int, new_run_id: int,
                 threshold: float = DEFAULT_THRESHOLD) -> RunComparison | None:
    """None if either run does not exist; :class:`NotComparable` if they are of different configurations."""
    base, new = session.get(Run, base_run_id), session.get(Run, new_run_id)
    if base is None or new is None:
        return None
    if base.configuration_id != new.configuration_id:
        raise NotComparable(f"runs {base_run_id} and {new_run_id} are of different configurations "
                            f"({base.configuration_id} and {new.configuration_id})")
    before, after = _results(session, base.id), _results(session, new.id)
    names = sorted(set(before) | set(after))
    models = [_delta(n, before.get(n), after.get(n), threshold) for n in names]

    def named(verdict: str) -> list[str]:
        return [m.name for m in models if m.verdict == verdict]

    return RunComparison(base=RunOut.from_row(base), new=RunOut.from_row(new), threshold=threshold, models=models,
                         new_failures=named("new_failure"), fixed=named("fixed"), regressions=named("regression"),
                         improvements=named("improvement"), within_noise=named("within_noise"))


def _latest_by_configuration(session: Session, commit: str, filters: ConfigFilter) -> dict[int, int]:
    query = (sa.select(Run.configuration_id, Run.id).join(Run.configuration)
             .where(*RunFilter(config=filters, commit=commit).clauses()).order_by(*run_order()))
    return {configuration_id: run_id for configuration_id, run_id in session.execute(query)}


def compare_commits(session: Session, base_commit: str, new_commit: str, filters: ConfigFilter = ConfigFilter(),
                    threshold: float = DEFAULT_THRESHOLD) -> list[RunComparison]:
    """One comparison per configuration that has runs at both commits (a commit may be given by a prefix; the
    latest run at each commit counts)."""
    before = _latest_by_configuration(session, base_commit, filters)
    after = _latest_by_configuration(session, new_commit, filters)
    out = []
    for configuration_id in sorted(set(before) & set(after)):
        comparison = compare_runs(session, before[configuration_id], after[configuration_id], threshold)
        if comparison is not None:
            out.append(comparison)
    out.sort(key=lambda c: (c.new.configuration.suite, c.new.configuration.backend_variant, c.new.configuration.id))
    return out
