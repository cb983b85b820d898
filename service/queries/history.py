"""History: one model's series over nights, and a configuration's suite summary over nights.

A series is (configuration, model name, batch size) — the configuration holds suite, backend + variant, compile
mode, dtype, mode, device, threads, batch-size override, env settings and machine fingerprint.
"""

from __future__ import annotations

import functools
from datetime import date, datetime

import sqlalchemy as sa
from pydantic import BaseModel, TypeAdapter
from sqlalchemy.orm import Session

from perfdash.contract import gated_speedup
from perfdash.metric_registry import RESULT_METRICS
from service.models import Configuration, Result, Run, RunSummary, Series
from service.queries.filters import ConfigFilter
from service.queries.schemas import ConfigurationOut, ResultMetricFields, SummaryOut


class SeriesOut(BaseModel):
    id: int
    name: str
    batch_size: int
    configuration: ConfigurationOut


class ModelPoint(ResultMetricFields):  # type: ignore[valid-type, misc]
    """One run of a series: the registry's metrics as measured (``speedup`` included) and the gated speedup."""

    run_id: int
    night: date
    started_at: datetime | None
    torch_git_commit: str | None
    accuracy: str | None
    passed: bool
    gated_speedup: float
    eager_peak_mem: float | None
    dynamo_peak_mem: float | None
    graph_breaks: int | None
    speedup_ci_low: float | None = None  # 95 % confidence interval of the speedup (perfdash.confidence)
    speedup_ci_high: float | None = None
    # perfdash's own activation peak (GB), from the samples the runner wrote; None for PyTorch's files
    eager_activation_peak_mem: float | None = None
    dynamo_activation_peak_mem: float | None = None

    @property
    def activation_ratio(self) -> float | None:
        if not self.eager_activation_peak_mem or not self.dynamo_activation_peak_mem:
            return None
        return self.eager_activation_peak_mem / self.dynamo_activation_peak_mem


class ModelHistory(BaseModel):
    series: SeriesOut
    points: list[ModelPoint]  # oldest night first


class SuitePoint(BaseModel):
    """One night of a suite summary's history. Neither ``summary.warnings`` nor ``summary.warnings_count`` is loaded
    here (parsing the warnings of ~1,000 nights doubled the query's time); a run's warnings come with the night's
    summary or the run."""

    run_id: int
    night: date
    torch_git_commit: str | None
    summary: SummaryOut


class SuiteHistory(BaseModel):
    configuration: ConfigurationOut
    points: list[SuitePoint]  # oldest night first


@functools.cache
def _points_adapter(model: type[BaseModel]) -> TypeAdapter:
    return TypeAdapter(list[model])  # type: ignore[valid-type]


def _validate_points(model: type[BaseModel], rows: list[dict]) -> list:
    # one pydantic-core call for a whole 3-year history instead of ~1,000 model_validate calls
    return _points_adapter(model).validate_python(rows)


def find_series(session: Session, name: str | None = None, filters: ConfigFilter = ConfigFilter(),
                *, limit: int = 200) -> list[SeriesOut]:
    query = (sa.select(Series).join(Series.configuration).where(*filters.clauses())
             .order_by(Series.name, Series.configuration_id, Series.batch_size).limit(limit))
    if name is not None:
        query = query.where(Series.name == name)
    return [SeriesOut(id=s.id, name=s.name, batch_size=s.batch_size,
                      configuration=ConfigurationOut.from_row(s.configuration))
            for s in session.scalars(query).unique()]


def _night_range(query: sa.Select, since: date | None, until: date | None) -> sa.Select:
    if since is not None:
        query = query.where(Run.night >= since)
    if until is not None:
        query = query.where(Run.night <= until)
    return query


def model_history(session: Session, series_id: int, since: date | None = None,
                  until: date | None = None) -> ModelHistory | None:
    """Every point of one series between two nights (inclusive), oldest first; None if there is no such series."""
    series = session.get(Series, series_id)
    if series is None:
        return None
    r = Result
    query = (sa.select(Run.id.label("run_id"), Run.night, Run.started_at, Run.torch_git_commit, r.accuracy, r.passed,
                       *(getattr(r, m.name) for m in RESULT_METRICS), r.eager_peak_mem, r.dynamo_peak_mem,
                       r.graph_breaks, r.speedup_ci_low, r.speedup_ci_high,
                       # two numbers out of the deferred samples JSON, extracted by the database
                       r.samples["eager_activation_peak_mem"].as_float().label("eager_activation_peak_mem"),
                       r.samples["dynamo_activation_peak_mem"].as_float().label("dynamo_activation_peak_mem"))
             # the configuration condition is redundant for the answer but lets the planner take the series' ~1,000
             # runs from ix_runs_configuration_night instead of hashing all runs (x2-3 faster at 3 years)
             .join(Run, sa.and_(Run.id == r.run_id, Run.configuration_id == series.configuration_id))
             .where(r.series_id == series_id).order_by(Run.night, Run.id))
    result = session.execute(_night_range(query, since, until))
    keys = tuple(result.keys())
    rows = [dict(zip(keys, row, strict=True)) for row in result]
    for row in rows:
        row["gated_speedup"] = gated_speedup(row["speedup"], row["passed"])
    points = _validate_points(ModelPoint, rows)
    out = SeriesOut(id=series.id, name=series.name, batch_size=series.batch_size,
                    configuration=ConfigurationOut.from_row(series.configuration))
    return ModelHistory(series=out, points=points)


def suite_history(session: Session, configuration_id: int, since: date | None = None,
                  until: date | None = None) -> SuiteHistory | None:
    """The stored summary of every run of one configuration between two nights, oldest first (without warnings)."""
    configuration = session.get(Configuration, configuration_id)
    if configuration is None:
        return None
    s = RunSummary
    query = (sa.select(Run.id, Run.night, Run.torch_git_commit, s.passed, s.total, s.geomean_speedup,
                       s.geomean_speedup_unclipped, s.mean_compile_time_s, s.mean_compression_ratio)
             .join(s, s.run_id == Run.id)
             .where(Run.configuration_id == configuration_id).order_by(Run.night, Run.id))
    rows = session.execute(_night_range(query, since, until))
    points = _validate_points(SuitePoint, [
        {"run_id": run_id, "night": night, "torch_git_commit": commit,
         "summary": SummaryOut.values(*values, None, with_warnings=False)} for run_id, night, commit, *values in rows])
    return SuiteHistory(configuration=ConfigurationOut.from_row(configuration), points=points)
