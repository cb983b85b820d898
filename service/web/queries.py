"""Read-only queries the pages need, each one or two indexed SQL statements (pages stay fast on years of history).

Every query returns ORM rows or small frozen dataclasses; nothing here formats or colours (see format.py / views.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

import sqlalchemy as sa
from sqlalchemy.orm import Session, aliased

from service.detection.models import Finding
from service.models import Annotation, Configuration, Result, Run, RunSummary, Series
from service.queries.filters import ConfigFilter, RunFilter


def has_runs(session: Session) -> bool:
    return session.scalar(sa.select(Run.id).limit(1)) is not None


@dataclass(frozen=True, slots=True)
class RunLite:
    """What list pages show of a run: no JSON columns, no per-model warnings (decoding those dominated the pages)."""

    id: int
    night: date
    torch_git_commit: str | None
    torch_version: str | None
    host: str | None
    jenkins_url: str | None
    suite_versions: dict[str, str] | None
    partition_id: int
    total_partitions: int
    configuration: Configuration
    summary: SummaryNumbers | None


@dataclass(frozen=True, slots=True)
class SummaryNumbers:
    """The numbers of a RunSummary (the attribute names views.suite_summary reads)."""

    passed: int
    total: int
    geomean_speedup: float | None
    geomean_speedup_unclipped: float | None
    mean_compile_time_s: float | None
    mean_compression_ratio: float | None


_SUMMARY_COLUMNS = (RunSummary.passed, RunSummary.total, RunSummary.geomean_speedup,
                    RunSummary.geomean_speedup_unclipped, RunSummary.mean_compile_time_s,
                    RunSummary.mean_compression_ratio)


def _lite_runs(session: Session, query: sa.Select, with_versions: bool = False) -> list[RunLite]:
    """Rows of ``query`` (Run columns, then the summary columns) as RunLite, configurations loaded once."""
    configs = {c.id: c for c in configurations(session)}
    out = []
    for row in session.execute(query):
        summary = SummaryNumbers(*row[-6:]) if row[-6] is not None else None
        out.append(RunLite(id=row.id, night=row.night, torch_git_commit=row.torch_git_commit,
                           torch_version=row.torch_version, host=row.host, jenkins_url=row.jenkins_url,
                           suite_versions=row.suite_versions if with_versions else None,
                           partition_id=row.partition_id, total_partitions=row.total_partitions,
                           configuration=configs[row.configuration_id], summary=summary))
    return out


def _lite_select(with_versions: bool = False) -> sa.Select:
    columns = [Run.id, Run.night, Run.torch_git_commit, Run.torch_version, Run.host, Run.jenkins_url,
               Run.partition_id, Run.total_partitions, Run.configuration_id]
    if with_versions:
        columns.append(Run.suite_versions)
    return sa.select(*columns, *_SUMMARY_COLUMNS).outerjoin(RunSummary, RunSummary.run_id == Run.id)


def latest_runs_with_base(session: Session) -> list[tuple[RunLite, RunLite | None]]:
    """For every configuration: its latest run and its previous night's run, or None.

    Same semantics as service.queries.summary: the previous night is the latest run of the same configuration on an
    earlier night; when a configuration ran twice in one night, the later run counts. Correlated subqueries walk
    the (configuration_id, night) index backwards: two index probes per configuration, whatever the history length.
    """
    r = aliased(Run)
    latest_night = (sa.select(sa.func.max(r.night)).where(r.configuration_id == Configuration.id)
                    .correlate(Configuration).scalar_subquery())

    def newest(before_latest: bool) -> sa.ScalarSelect[int]:
        r2 = aliased(Run)
        night_clause = r2.night < latest_night if before_latest else r2.night == latest_night
        return (sa.select(r2.id).where(r2.configuration_id == Configuration.id, night_clause)
                .order_by(r2.night.desc(), r2.id.desc()).limit(1).correlate(Configuration).scalar_subquery())

    pairs = session.execute(sa.select(newest(False).label("latest"), newest(True).label("base"))
                            .select_from(Configuration)).all()
    ids = [i for pair in pairs for i in pair if i is not None]
    if not ids:
        return []
    runs = {run.id: run for run in _lite_runs(session, _lite_select().where(Run.id.in_(ids)))}
    return [(runs[latest], runs.get(base) if base is not None else None) for latest, base in pairs
            if latest is not None]


def runs_list(session: Session, config_filter: ConfigFilter, commit: str | None, limit: int,
              offset: int) -> list[RunLite]:
    """Runs matching the filters, newest night first (the Runs page)."""
    query = (_lite_select(with_versions=True).join(Configuration, Configuration.id == Run.configuration_id)
             .where(*RunFilter(config=config_filter, commit=commit).clauses())
             .order_by(Run.night.desc(), Run.id.desc()).limit(limit).offset(offset))
    return _lite_runs(session, query, with_versions=True)


@dataclass(frozen=True, slots=True)
class RunChoice:
    id: int
    night: date
    torch_git_commit: str | None


def run_choices(session: Session, configuration_id: int, limit: int = 400) -> list[RunChoice]:
    """Runs of a configuration for the Compare form's selects, newest first."""
    rows = session.execute(sa.select(Run.id, Run.night, Run.torch_git_commit)
                           .where(Run.configuration_id == configuration_id)
                           .order_by(Run.night.desc(), Run.id.desc()).limit(limit))
    return [RunChoice(*row) for row in rows]


def get_run(session: Session, run_id: int) -> Run | None:
    return session.get(Run, run_id)


def run_results(session: Session, run_id: int) -> list[Result]:
    return list(session.scalars(sa.select(Result).where(Result.run_id == run_id).order_by(Result.name)))


def run_by_commit(session: Session, configuration_id: int, commit: str) -> Run | None:
    """The latest run of a configuration whose torch commit starts with ``commit`` (a short hash works)."""
    commit = commit.strip().lower()
    if not commit:
        return None
    return session.scalars(
        sa.select(Run)
        .where(Run.configuration_id == configuration_id, Run.torch_git_commit.startswith(commit, autoescape=True))
        .order_by(Run.night.desc(), Run.id.desc())
        .limit(1)
    ).first()


def get_series(session: Session, series_id: int) -> Series | None:
    return session.get(Series, series_id)


def annotations(session: Session, configuration_id: int, series_id: int | None, since: date | None,
                until: date | None) -> list[Annotation]:
    """Notes on the configuration, on the series, and on whole nights (neither configuration nor series)."""
    scope = [Annotation.configuration_id == configuration_id,
             sa.and_(Annotation.configuration_id.is_(None), Annotation.series_id.is_(None))]
    if series_id is not None:
        scope.append(Annotation.series_id == series_id)
    query = sa.select(Annotation).where(sa.or_(*scope)).order_by(Annotation.night, Annotation.id)
    if since is not None:
        query = query.where(sa.or_(Annotation.night.is_(None), Annotation.night >= since))
    if until is not None:
        query = query.where(sa.or_(Annotation.night.is_(None), Annotation.night <= until))
    return list(session.scalars(query))


def configurations(session: Session) -> list[Configuration]:
    return list(session.scalars(sa.select(Configuration).order_by(Configuration.id)))


@dataclass(frozen=True, slots=True)
class SummaryPoint:
    configuration_id: int
    run_id: int
    night: date
    commit: str | None
    passed: int
    total: int
    geomean_speedup: float | None
    geomean_speedup_unclipped: float | None
    mean_compile_time_s: float | None
    mean_compression_ratio: float | None


GRANULARITIES = ("day", "week", "month")


def _bucket(dialect: str, granularity: str) -> sa.ColumnElement[object]:
    """The week (starting Monday) or month a night falls in, in the database's own date functions."""
    if dialect == "postgresql":
        return sa.func.date_trunc(granularity, Run.night)
    if granularity == "week":  # SQLite: back to Monday ('weekday 0' is the next Sunday)
        return sa.func.date(Run.night, "weekday 0", "-6 days")
    return sa.func.strftime("%Y-%m", Run.night)


def summary_history(session: Session, config_filter: ConfigFilter, since: date | None,
                    until: date | None, granularity: str = "day") -> list[SummaryPoint]:
    """Suite summaries of every matching configuration over a range of nights, oldest first.

    With ``week`` or ``month`` granularity each configuration keeps the last night of each week or month: a real
    run (its commit and link stay meaningful), and a three-year chart carries 150 points a line instead of 1,100.
    """
    columns = (Run.configuration_id, Run.id, Run.night, Run.torch_git_commit, RunSummary.passed, RunSummary.total,
               RunSummary.geomean_speedup, RunSummary.geomean_speedup_unclipped, RunSummary.mean_compile_time_s,
               RunSummary.mean_compression_ratio)
    query = (
        sa.select(*columns)
        .join(RunSummary, RunSummary.run_id == Run.id)
        .join(Configuration, Configuration.id == Run.configuration_id)
        .where(*config_filter.clauses())
    )
    if since is not None:
        query = query.where(Run.night >= since)
    if until is not None:
        query = query.where(Run.night <= until)
    if granularity != "day":
        bucket = _bucket(session.get_bind().dialect.name, granularity)
        rank = sa.func.row_number().over(partition_by=(Run.configuration_id, bucket),
                                         order_by=(Run.night.desc(), Run.id.desc()))
        ranked = query.add_columns(rank.label("rank")).subquery()
        query = sa.select(*(ranked.c[c.key] for c in columns)).where(ranked.c.rank == 1)
        query = query.order_by(ranked.c.night, ranked.c.id)
    else:
        query = query.order_by(Run.night, Run.id)
    return [SummaryPoint(*row) for row in session.execute(query)]


def latest_night(session: Session) -> date | None:
    return session.scalar(sa.select(sa.func.max(Run.night)))


def distinct_values(session: Session) -> dict[str, list[str]]:
    """The values each filter can take, for the filter forms."""
    rows: Sequence[Configuration] = configurations(session)
    return {
        "suite": sorted({c.suite for c in rows}),
        "backend": sorted({c.backend_variant for c in rows}),
        "device": sorted({c.device for c in rows}),
        "dtype": sorted({c.dtype for c in rows}),
        "mode": sorted({c.mode for c in rows}),
        "thread_config": sorted({c.thread_config for c in rows}),
    }


def findings_for_series(session: Session, series_id: int, since: date | None, until: date | None) -> list[Finding]:
    """The detection engineer's findings on one series, by the night of the run that showed them, oldest first."""
    query = (sa.select(Finding).join(Run, Run.id == Finding.run_id).where(Finding.series_id == series_id)
             .order_by(Run.night, Finding.id))
    if since is not None:
        query = query.where(Run.night >= since)
    if until is not None:
        query = query.where(Run.night <= until)
    return list(session.scalars(query).unique())


def findings_for_run(session: Session, run_id: int) -> list[Finding]:
    return list(session.scalars(sa.select(Finding).where(Finding.run_id == run_id)
                                .order_by(Finding.kind, Finding.model, Finding.id)).unique())
