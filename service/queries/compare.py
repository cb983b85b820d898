"""Compare two runs of one configuration (or two commits across configurations): per-model deltas and verdicts.

Verdicts per model by perfdash.judgement with :func:`perfdash.judgement.speedup_only`: a "regression" here is the
measured speedup of a model passing in both runs dropping by more than ``threshold`` (relative) outside the two
confidence intervals; the Releases view (service.queries.releases) judges every metric instead. The words are
perfdash.verdicts'.
"""

from __future__ import annotations

import math

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.orm import Session

from perfdash.judgement import Side, judge, speedup_only
from perfdash.metric_registry import COMPILATION_LATENCY, COMPRESSION_RATIO, RESULT_METRICS, SPEEDUP
from perfdash.verdicts import FIXED, IMPROVEMENT, NEW_FAILURE, REGRESSION, WITHIN_NOISE, ModelVerdictName, Verdict
from service.models import Run
from service.queries.filters import ConfigFilter, RunFilter
from service.queries.order import run_order
from service.queries.runs import results_of
from service.queries.schemas import ResultOut, RunOut

DEFAULT_THRESHOLD = SPEEDUP.min_effect  # the verdicts are the speedup's


class ModelDelta(BaseModel):
    name: str
    base: ResultOut | None
    new: ResultOut | None
    verdict: ModelVerdictName  # judged on the speedup alone (perfdash.judgement.speedup_only)
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


def _deltas(names: list[str], before: dict[str, ResultOut], after: dict[str, ResultOut],
            threshold: float) -> list[ModelDelta]:
    metrics = [m.name for m in RESULT_METRICS]
    base = [before.get(n) for n in names]
    new = [after.get(n) for n in names]
    judged = judge(Side.of(base, metrics), Side.of(new, metrics), speedup_only(threshold))
    columns = {m: judged.change[m].tolist() for m in metrics}  # plain floats: one conversion, not one per cell
    out = []
    for i, name in enumerate(names):
        b, n = base[i], new[i]
        changes: dict[str, float | None] = {}
        if b is not None and n is not None and b.passed and n.passed:
            changes = {m: None if math.isnan(c := columns[m][i]) else c for m in metrics}
        out.append(ModelDelta(name=name, base=b, new=n, verdict=ModelVerdictName(judged.verdict_of(i).name),
                              status_changed=b is not None and n is not None and b.accuracy != n.accuracy,
                              speedup_change=changes.get(SPEEDUP.name),
                              compile_time_change=changes.get(COMPILATION_LATENCY.name),
                              memory_ratio_change=changes.get(COMPRESSION_RATIO.name), changes=changes))
    return out


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
    models = _deltas(names, before, after, threshold)

    def named(verdict: Verdict) -> list[str]:
        return [m.name for m in models if m.verdict == verdict.name]

    return RunComparison(base=RunOut.from_row(base), new=RunOut.from_row(new), threshold=threshold, models=models,
                         new_failures=named(NEW_FAILURE), fixed=named(FIXED), regressions=named(REGRESSION),
                         improvements=named(IMPROVEMENT), within_noise=named(WITHIN_NOISE))


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
