"""History: one model's series over its runs, and suite summaries over runs (one configuration, or many for Trends).

Every run is a point, two runs on one night included; the night is the label of the x axis.

A series is (configuration, model name, batch size) — the configuration holds suite, backend + variant, compile
mode, dtype, mode, device, threads, batch-size override, env settings and machine fingerprint.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date, datetime

import sqlalchemy as sa
from pydantic import BaseModel, Field, TypeAdapter, computed_field
from sqlalchemy.orm import Session

from perfdash import contract
from perfdash.metric_registry import RESULT_METRICS
from service.models import Configuration, Result, Run, RunSummary, Series
from service.queries.filters import ConfigFilter, night_range
from service.queries.noise import NoiseOut, series_figures
from service.queries.order import run_order
from service.queries.runs import SUMMARY_COLUMNS, SummaryNumbers
from service.queries.schemas import ConfigurationOut, ResultMetricFields, SummaryOut


class SeriesOut(BaseModel):
    id: int
    name: str
    batch_size: int
    configuration: ConfigurationOut


class ModelPoint(ResultMetricFields):
    """One run of a series: the registry's metrics as measured (``speedup`` included) and the gated speedup."""

    run_id: int
    night: date
    started_at: datetime | None
    torch_git_commit: str | None
    accuracy: str | None
    passed: bool
    eager_peak_mem: float | None
    dynamo_peak_mem: float | None
    graph_breaks: int | None
    speedup_ci_low: float | None = None  # 95 % confidence interval of the speedup (perfdash.confidence)
    speedup_ci_high: float | None = None
    # perfdash's own activation peak (GB), from the samples the runner wrote; None for PyTorch's files
    eager_activation_peak_mem: float | None = None
    dynamo_activation_peak_mem: float | None = None

    # computed, not validated: one field less to check per point of a 3-year history, and no pass over the rows
    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented form; mypy allows no decorated property
    @property
    def gated_speedup(self) -> float:
        return contract.gated_speedup(self.speedup, self.passed)

    @property
    def activation_ratio(self) -> float | None:
        if not self.eager_activation_peak_mem or not self.dynamo_activation_peak_mem:
            return None
        return self.eager_activation_peak_mem / self.dynamo_activation_peak_mem


class ModelHistory(BaseModel):
    series: SeriesOut
    points: list[ModelPoint]  # oldest night first
    noise: list[NoiseOut] = Field(default_factory=list, description=(
        "the series' between-run noise and minimum detectable effect per watched metric, from its newest runs "
        "(whatever the range asked for); empty without a passing run"))


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
    return TypeAdapter(list[model])  # type: ignore[valid-type]  # a model known when it runs: one adapter a model


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


def get_series(session: Session, series_id: int) -> Series | None:
    return session.get(Series, series_id)


def model_history(session: Session, series_id: int, since: date | None = None,
                  until: date | None = None) -> ModelHistory | None:
    """Every point of one series between two nights (inclusive), oldest first; None if there is no such series."""
    series = session.get(Series, series_id)
    if series is None:
        return None
    r = Result
    query = (sa.select(Run.id.label("run_id"), Run.night, Run.started_at, Run.torch_git_commit, r.accuracy, r.passed,
                       *(getattr(r, m.name) for m in RESULT_METRICS), r.eager_peak_mem, r.dynamo_peak_mem,
                       r.graph_breaks, r.speedup_ci_low, r.speedup_ci_high, r.eager_activation_peak_mem,
                       r.dynamo_activation_peak_mem)
             # every column of results read here is in ix_results_series_history (models.HISTORY_INCLUDE): an
             # index-only scan, no heap page a night
             # the configuration condition is redundant for the answer but lets the planner take the series' ~1,000
             # runs from ix_runs_configuration_night instead of hashing all runs (x2-3 faster at 3 years)
             .join(Run, sa.and_(Run.id == r.run_id, Run.configuration_id == series.configuration_id))
             .where(r.series_id == series_id, *night_range(Run.night, since, until)).order_by(*run_order()))
    # columns only: the session's connection returns plain rows (the ORM's result machinery cost ~1 ms a 3-year
    # history)
    result = session.connection().execute(query)
    keys = tuple(result.keys())
    points = _validate_points(ModelPoint, [dict(zip(keys, row, strict=True)) for row in result])
    out = SeriesOut(id=series.id, name=series.name, batch_size=series.batch_size,
                    configuration=ConfigurationOut.from_row(series.configuration))
    figures = series_figures(session, series_id, series.configuration_id)
    return ModelHistory(series=out, points=points, noise=list(figures.noise) if figures else [])


@dataclass(frozen=True, slots=True)
class SummaryPoint(SummaryNumbers):
    """A run's summary numbers with the run (fields after the numbers: the order of _summary_points' columns)."""

    configuration_id: int
    run_id: int
    night: date
    commit: str | None


GRANULARITIES = ("day", "week", "month")


def _bucket(dialect: str, granularity: str) -> sa.ColumnElement[object]:
    """The week (starting Monday) or month a night falls in, in the database's own date functions."""
    if dialect == "postgresql":
        return sa.func.date_trunc(granularity, Run.night)
    if granularity == "week":  # SQLite: back to Monday ('weekday 0' is the next Sunday)
        return sa.func.date(Run.night, "weekday 0", "-6 days")
    return sa.func.strftime("%Y-%m", Run.night)


def _summary_points(session: Session, filters: ConfigFilter, since: date | None, until: date | None,
                    granularity: str = "day") -> sa.Result:
    """Rows of SummaryPoint's fields (the numbers, then the run): every run's stored summary over a range of
    nights, oldest first (two runs on one night are two points). With ``week`` or ``month`` each configuration keeps
    the last run of each week or month: a real run (its commit and link stay meaningful), and a three-year chart
    carries 150 points a line instead of 1,100."""
    columns = (*SUMMARY_COLUMNS, Run.configuration_id, Run.id, Run.night, Run.torch_git_commit)
    query = (sa.select(*columns).join(RunSummary, RunSummary.run_id == Run.id)
             .where(*filters.clauses(), *night_range(Run.night, since, until)))
    if filters.clauses():
        query = query.join(Configuration, Configuration.id == Run.configuration_id)
    connection = session.connection()  # columns only: plain rows, without the ORM's result machinery
    if granularity == "day":
        return connection.execute(query.order_by(*run_order()))
    bucket = _bucket(session.get_bind().dialect.name, granularity)
    rank = sa.func.row_number().over(partition_by=(Run.configuration_id, bucket),
                                     order_by=run_order(newest_first=True))
    ranked = query.add_columns(rank.label("rank"), Run.started_at).subquery()
    return connection.execute(sa.select(*(ranked.c[c.key] for c in columns)).where(ranked.c.rank == 1)
                              .order_by(ranked.c.night, ranked.c.started_at.asc().nulls_first(), ranked.c.id))


def summary_history(session: Session, filters: ConfigFilter, since: date | None, until: date | None,
                    granularity: str = "day") -> list[SummaryPoint]:
    """Suite summaries of every configuration matching ``filters`` over a range of nights, oldest first (Trends)."""
    return [SummaryPoint(*row) for row in _summary_points(session, filters, since, until, granularity)]


def suite_history(session: Session, configuration_id: int, since: date | None = None,
                  until: date | None = None) -> SuiteHistory | None:
    """The stored summary of every run of one configuration between two nights, oldest first (without warnings)."""
    configuration = session.get(Configuration, configuration_id)
    if configuration is None:
        return None
    rows = _summary_points(session, ConfigFilter(configuration_id=configuration_id), since, until)
    points = _validate_points(SuitePoint, [
        {"run_id": run_id, "night": night, "torch_git_commit": commit,
         "summary": SummaryOut.values(passed, total, geomean, unclipped, compile_s, ratio, None, with_warnings=False)}
        for passed, total, geomean, unclipped, compile_s, ratio, _, run_id, night, commit in rows])
    return SuiteHistory(configuration=ConfigurationOut.from_row(configuration), points=points)


@dataclass(frozen=True, slots=True)
class LatencyPoint:
    name: str
    night: date
    run_id: int
    compiled_ms: float | None  # the CSV's abs_latency (median compiled latency); None for a failure row
    passed: bool


def latency_history(session: Session, configuration_id: int, since: date) -> list[LatencyPoint]:
    """Every model row's compiled latency in every run since the night ``since``, oldest first (the Vision page)."""
    rows = session.execute(
        sa.select(Result.name, Run.night, Run.id, Result.abs_latency, Result.speedup, Result.passed)
        .join(Run, Run.id == Result.run_id)
        .where(Run.configuration_id == configuration_id, *night_range(Run.night, since, None))
        .order_by(*run_order()))
    return [LatencyPoint(name=name, night=night, run_id=run_id,
                         compiled_ms=abs_latency if abs_latency and speedup else None, passed=bool(passed))
            for name, night, run_id, abs_latency, speedup, passed in rows]
