"""What changed between two torch versions, across every configuration: the Releases view and its JSON API.

For each configuration with runs at both versions, the **last run** (latest night, then latest id) of each version
is compared model by model. Statuses follow :mod:`service.queries.compare` (new failure, fixed, still failing,
added, removed; a speedup change whose confidence intervals overlap is within noise). Between two passing results
every metric of :data:`METRICS` is compared: a change larger than the metric's minimum effect is ``better`` or
``worse`` by the metric's direction. A model with any worse metric is a regression, else one with a better metric an
improvement. A model's impact is the largest relative change in its verdict's direction; rows are sorted with status
changes first, then by impact.

``new="latest"`` compares with each configuration's latest run, whatever its version (a release against the latest
nightly).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import date
from typing import Literal, Protocol

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.orm import Session

from perfdash.confidence import Interval, within_noise
from service.models import Result, Run
from service.queries import torch_versions
from service.queries.compare import DEFAULT_THRESHOLD, Verdict
from service.queries.filters import ConfigFilter
from service.queries.schemas import ConfigurationOut

LATEST = "latest"  # as ``new``: each configuration's latest run
DEFAULT_LIMIT = 200  # model rows returned (counts always cover every model)


@dataclass(frozen=True, slots=True)
class MetricRule:
    """How a metric's change is judged. The one table the lead swaps for perfdash/metric_registry.py at merge."""

    key: str  # the ResultOut field
    label: str
    min_effect: float  # relative change below this is noise
    higher_is_better: bool


# DESIGN.md's minimum effects: speedup and memory 5 %, compile time 10 %; latency and throughput as speedup.
METRICS: tuple[MetricRule, ...] = (
    MetricRule("speedup", "speedup", DEFAULT_THRESHOLD, True),
    MetricRule("abs_latency", "latency", DEFAULT_THRESHOLD, False),
    MetricRule("compilation_latency", "compile time", 0.10, False),
    MetricRule("compression_ratio", "memory ratio", 0.05, True),
    MetricRule("dynamo_peak_mem", "peak memory", 0.05, False),
    MetricRule("compiled_throughput", "throughput", DEFAULT_THRESHOLD, True),
)
SPEEDUP = METRICS[0]

ReleaseVerdict = Literal["new_failure", "regression", "fixed", "improvement", "within_noise", "still_failing",
                         "added", "removed", "unchanged"]
VERDICT_ORDER: tuple[ReleaseVerdict, ...] = ("new_failure", "regression", "fixed", "improvement", "within_noise",
                                             "still_failing", "added", "removed", "unchanged")


class MetricRuleOut(BaseModel):
    key: str
    label: str
    min_effect: float
    higher_is_better: bool


class MetricChange(BaseModel):
    base: float
    new: float
    change: float  # new / base - 1
    direction: Literal["better", "worse", "same"]  # beyond the metric's minimum effect, by its direction


class RunRef(BaseModel):
    id: int
    night: date
    torch_version: str | None
    torch_git_commit: str | None


class ModelChange(BaseModel):
    configuration_id: int
    series_id: int
    name: str
    verdict: ReleaseVerdict
    base_status: str | None  # the accuracy status ("pass" when only performance ran), None: not in that run
    new_status: str | None
    impact: float  # the largest relative change in the verdict's direction (status changes: 1.0)
    metrics: dict[str, MetricChange]  # by MetricRule.key, where both runs have the value


class ConfigurationChange(BaseModel):
    configuration: ConfigurationOut
    base_run: RunRef
    new_run: RunRef
    counts: dict[str, int]  # verdict -> models


class ReleaseComparison(BaseModel):
    base: str
    new: str
    metrics: list[MetricRuleOut]
    configurations: list[ConfigurationChange]
    only_base: list[int]  # configuration ids with a run at the base version only
    only_new: list[int]
    totals: dict[str, int]  # verdict -> models, over every configuration
    models_total: int  # rows before the limit
    models: list[ModelChange]  # sorted by impact, at most ``limit``, unchanged models left out unless asked


class Measured(Protocol):
    """What judging reads of a result (a row of :data:`JUDGED_COLUMNS`)."""

    series_id: int
    name: str
    accuracy: str | None
    passed: bool
    speedup: float | None
    speedup_ci_low: float | None
    speedup_ci_high: float | None
    abs_latency: float | None
    compilation_latency: float | None
    compression_ratio: float | None
    dynamo_peak_mem: float | None
    compiled_throughput: float | None


JUDGED_COLUMNS: tuple[str, ...] = tuple(Measured.__annotations__)


def status_of(result: Measured | None) -> str | None:
    if result is None:
        return None
    return result.accuracy or ("pass" if result.passed else "fail_to_run")


def _interval(result: Measured) -> Interval | None:
    if result.speedup_ci_low is None or result.speedup_ci_high is None:
        return None
    return Interval(result.speedup_ci_low, result.speedup_ci_high)


def status_verdict(base: Measured | None, new: Measured | None) -> Verdict:
    """compare.py's verdict order on status (its ``_delta`` needs full ResultOut rows, too slow for thousands of
    models in one request): in one run only, pass -> fail, fail -> pass, failing in both; both passing:
    ``within_noise`` when the speedup moved beyond its minimum effect inside both confidence intervals."""
    if base is None or new is None:
        return "added" if base is None else "removed"
    if base.passed and not new.passed:
        return "new_failure"
    if new.passed and not base.passed:
        return "fixed"
    if not new.passed:
        return "still_failing"
    change = metric_change(SPEEDUP, base.speedup, new.speedup)
    if change is not None and change[3] != "same" and within_noise(_interval(base), _interval(new)):
        return "within_noise"
    return "unchanged"  # judged metric by metric


@dataclass(frozen=True, slots=True)
class Judged:
    """A model's verdict before it becomes a :class:`ModelChange` (most of them only count: kept light)."""

    configuration_id: int
    series_id: int
    name: str
    verdict: ReleaseVerdict
    base_status: str | None
    new_status: str | None
    impact: float
    metrics: dict[str, tuple[float, float, float, str]]  # key -> (base, new, change, direction)

    def out(self) -> ModelChange:
        metrics = {k: MetricChange(base=b, new=n, change=c, direction=d)  # type: ignore[arg-type]
                   for k, (b, n, c, d) in self.metrics.items()}
        return ModelChange(configuration_id=self.configuration_id, series_id=self.series_id, name=self.name,
                           verdict=self.verdict, base_status=self.base_status, new_status=self.new_status,
                           impact=self.impact, metrics=metrics)


def metric_change(rule: MetricRule, base: float | None, new: float | None) -> tuple[float, float, float, str] | None:
    """(base, new, relative change, direction) of one metric; None unless both runs measured it."""
    if base is None or new is None or base <= 0 or new <= 0:
        return None  # a failure row's zeros are not a measurement
    change = new / base - 1.0
    direction = "same"
    if abs(change) > rule.min_effect:
        direction = "better" if (change > 0) == rule.higher_is_better else "worse"
    return base, new, change, direction


def judge(configuration_id: int, name: str, base: Measured | None, new: Measured | None) -> Judged:
    """One model's verdict: its status change, else every metric."""
    status = status_verdict(base, new)
    metrics: dict[str, tuple[float, float, float, str]] = {}
    verdict: ReleaseVerdict
    impact = 0.0
    if status in ("within_noise", "unchanged"):
        assert base is not None and new is not None
        for rule in METRICS:
            found = metric_change(rule, getattr(base, rule.key), getattr(new, rule.key))
            if found is not None:
                metrics[rule.key] = found
        # a speedup change inside both runs' confidence intervals is not a change
        counted = [m for k, m in metrics.items() if not (k == SPEEDUP.key and status == "within_noise")]
        worse = [abs(m[2]) for m in counted if m[3] == "worse"]
        better = [abs(m[2]) for m in counted if m[3] == "better"]
        if worse:
            verdict, impact = "regression", max(worse)
        elif better:
            verdict, impact = "improvement", max(better)
        else:
            verdict = "within_noise" if status == "within_noise" else "unchanged"
    else:
        verdict = status
        impact = 1.0 if status in ("new_failure", "fixed") else 0.0
    series = new or base
    assert series is not None
    return Judged(configuration_id, series.series_id, name, verdict, status_of(base), status_of(new), impact,
                  metrics)


def sort_key(change: Judged | ModelChange) -> tuple[int, float, str, int]:
    return (VERDICT_ORDER.index(change.verdict), -change.impact, change.name, change.configuration_id)


# --------------------------------------------------------------------------------------------------------------------
# Reads


def versions(session: Session, filters: ConfigFilter = ConfigFilter()) -> list[str]:
    """Torch versions that have runs of the selected configurations, newest first."""
    query = (sa.select(Run.torch_version).distinct().join(Run.configuration)
             .where(Run.torch_version.is_not(None), *filters.clauses()))
    return list(reversed(torch_versions.ordered(session.scalars(query))))


def last_runs(session: Session, version: str, filters: ConfigFilter) -> dict[int, Run]:
    """Per configuration, its last run at ``version`` (LATEST: its last run)."""
    query = sa.select(Run).join(Run.configuration).where(*filters.clauses()).order_by(Run.night, Run.id)
    if version == LATEST:
        last = (sa.select(Run.configuration_id, sa.func.max(Run.night).label("night"))
                .group_by(Run.configuration_id).subquery())
        query = query.join(last, sa.and_(last.c.configuration_id == Run.configuration_id, last.c.night == Run.night))
    else:
        query = query.where(Run.torch_version == version)
    return {run.configuration_id: run for run in session.scalars(query).unique()}


def _results(session: Session, run_ids: list[int]) -> dict[int, dict[str, Measured]]:
    out: dict[int, dict[str, Measured]] = {run_id: {} for run_id in run_ids}
    if not run_ids:
        return out
    columns = [Result.run_id] + [getattr(Result, name) for name in JUDGED_COLUMNS]
    for row in session.execute(sa.select(*columns).where(Result.run_id.in_(run_ids))):
        out[row.run_id][row.name] = row  # type: ignore[assignment]  # a Row has the Protocol's attributes
    return out


def _ref(run: Run) -> RunRef:
    return RunRef(id=run.id, night=run.night, torch_version=run.torch_version, torch_git_commit=run.torch_git_commit)


def compare_versions(session: Session, base: str, new: str, filters: ConfigFilter = ConfigFilter(), *,
                     limit: int = DEFAULT_LIMIT, include_unchanged: bool = False) -> ReleaseComparison:
    before, after = last_runs(session, base, filters), last_runs(session, new, filters)
    both = sorted(set(before) & set(after))
    results = _results(session, sorted({before[c].id for c in both} | {after[c].id for c in both}))
    configurations: list[ConfigurationChange] = []
    changes: list[Judged] = []
    totals: Counter[str] = Counter()
    for configuration_id in both:
        old_run, new_run = before[configuration_id], after[configuration_id]
        old, now = results[old_run.id], results[new_run.id]
        judged = [judge(configuration_id, name, old.get(name), now.get(name)) for name in sorted(set(old) | set(now))]
        counts = Counter(c.verdict for c in judged)
        totals.update(counts)
        configurations.append(ConfigurationChange(
            configuration=ConfigurationOut.from_row(new_run.configuration), base_run=_ref(old_run),
            new_run=_ref(new_run), counts={v: counts.get(v, 0) for v in VERDICT_ORDER}))
        changes.extend(c for c in judged if include_unchanged or c.verdict != "unchanged")
    changes.sort(key=sort_key)
    configurations.sort(key=lambda c: (-(c.counts["new_failure"] + c.counts["regression"]),
                                       c.configuration.suite, c.configuration.id))
    return ReleaseComparison(
        base=base, new=new, metrics=[MetricRuleOut(key=m.key, label=m.label, min_effect=m.min_effect,
                                                   higher_is_better=m.higher_is_better) for m in METRICS],
        configurations=configurations, only_base=sorted(set(before) - set(after)),
        only_new=sorted(set(after) - set(before)), totals={v: totals.get(v, 0) for v in VERDICT_ORDER},
        models_total=len(changes), models=[c.out() for c in changes[:limit]])
