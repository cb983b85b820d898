"""Runs: list and filter, one run with its results, the configurations that exist, the results a table shows.

List pages get :class:`RunLite` (no JSON columns, no per-model warnings: decoding those dominated the pages); the
API gets :class:`~service.queries.schemas.RunOut`. Both come from one selection (:func:`runs_select`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from perfdash.metrics import SuiteSummary
from service.models import Configuration, Machine, Result, Run, RunSummary, backend_variant
from service.queries.filters import ConfigFilter, RunFilter
from service.queries.order import earlier, latest_nights, latest_of_each, run_order
from service.queries.schemas import (
    RESULT_COLUMNS,
    ConfigurationOut,
    MachineOut,
    ResultOut,
    RunDetail,
    RunOut,
    SummaryOut,
)


def has_runs(session: Session) -> bool:
    return session.scalar(sa.select(Run.id).limit(1)) is not None


def runs_select(filters: RunFilter, *columns: sa.SQLColumnExpression | type[Run], limit: int,
                offset: int = 0) -> sa.Select:
    """``columns`` (default the Run entity) of the runs matching ``filters``, newest first."""
    query = sa.select(*(columns or (Run,)))
    if filters.config.clauses():  # every run has a configuration: the join only filters (a probe per run read)
        query = query.join(Configuration, Configuration.id == Run.configuration_id)
    return query.where(*filters.clauses()).order_by(*run_order(newest_first=True)).limit(limit).offset(offset)


def list_runs(session: Session, filters: RunFilter = RunFilter(), *, limit: int = 100, offset: int = 0,
              after: Run | None = None) -> list[RunOut]:
    """Runs matching ``filters``, newest first; summaries carry warnings_count, not the warnings. ``after``: only the
    runs that come after this one in that order (keyset pagination: the last run of a page gives the next page, which
    costs the same however deep, where an offset reads and drops every row before it)."""
    return runs_out_counting_warnings(session, _page_of(sa.select(Run), filters, limit, offset, after))


def _page_of(query: sa.Select, filters: RunFilter, limit: int, offset: int, after: Run | None = None) -> sa.Select:
    """``query`` (of Run's columns) for one page of the runs matching ``filters``, newest first: a deferred join, the
    page's ids first (the order's keys only), then those runs. Selecting the columns and joining each run's summary
    before the offset read and dropped every skipped run's summary: at an offset of 10,000, 41,600 buffers and 27 ms
    of Postgres at 30M results (issue 31)."""
    page = runs_select(filters, Run.id, limit=limit, offset=offset)
    if after is not None:
        page = page.where(earlier(Run, after))
    ids = page.subquery()
    return query.join(ids, ids.c.id == Run.id).order_by(*run_order(newest_first=True))


# The number of a stored summary's warnings, stored at ingest (run_summaries.warnings_count); counted from the JSON
# only for a row stored without it. Lists show the count: decoding a night's warnings (~60 a run at PyTorch's matrix)
# was most of a list's time (issue 31).
def warnings_count(summary: Any = RunSummary) -> sa.ColumnElement[int]:
    """The number of ``summary``'s warnings (RunSummary or an alias of it)."""
    return sa.func.coalesce(summary.warnings_count, sa.func.json_array_length(summary.warnings))


WARNINGS_COUNT = warnings_count()


# What a RunOut carries of its run, read as columns: building ORM objects (with their joined configuration and
# machine) and then validating each model apart was most of a list's CPU (issue 31: 276 runs a night).
_RUN_OUT_COLUMNS = (Run.id, Run.run_key, Run.night, Run.started_at, Run.ended_at, Run.torch_version,
                    Run.torch_git_commit, Run.suite_versions, Run.host, Run.jenkins_url, Run.source, Run.partition_id,
                    Run.total_partitions, Run.ingested_at, Run.configuration_id)


_MACHINE_OUT_COLUMNS = tuple(getattr(Machine, name) for name in MachineOut.model_fields)
_CONFIGURATION_OUT_COLUMNS = tuple(getattr(Configuration, name) for name in ConfigurationOut.model_fields
                                   if name not in ("machine", "backend_variant"))


# A ConfigurationOut's columns with its machine's, as configuration_outs_of reads them.
CONFIGURATION_OUT_COLUMNS = (*_CONFIGURATION_OUT_COLUMNS, *_MACHINE_OUT_COLUMNS)


def configuration_outs(session: Session, ids: Iterable[int]) -> dict[int, ConfigurationOut]:
    """ConfigurationOut of the given configurations, by id (one statement of columns; configurations of one machine
    share its MachineOut)."""
    wanted = list(set(ids))
    if not wanted:
        return {}
    return configuration_outs_of(session.execute(sa.select(*CONFIGURATION_OUT_COLUMNS)
                                                  .join(Machine, Machine.id == Configuration.machine_id)
                                                  .where(Configuration.id.in_(wanted))))


def configuration_outs_of(rows: Iterable[Sequence]) -> dict[int, ConfigurationOut]:
    """ConfigurationOut by id from rows of CONFIGURATION_OUT_COLUMNS' values (a configuration's first row counts;
    configurations of one machine share its MachineOut)."""
    at = len(_CONFIGURATION_OUT_COLUMNS)
    config_keys, machine_keys = [c.key for c in _CONFIGURATION_OUT_COLUMNS], [c.key for c in _MACHINE_OUT_COLUMNS]
    machines: dict[int, MachineOut] = {}
    out: dict[int, ConfigurationOut] = {}
    for row in rows:
        if row[0] in out:  # the first column is the configuration's id
            continue
        machine = dict(zip(machine_keys, row[at:], strict=True))
        made = machines.get(machine["id"]) or machines.setdefault(machine["id"], MachineOut.model_validate(machine))
        values = dict(zip(config_keys, row[:at], strict=True))
        values["backend_variant"] = backend_variant(values["backend"], values["variant"])
        values["machine"] = made
        out[values["id"]] = ConfigurationOut.model_validate(values)
    return out


def runs_out_counting_warnings(session: Session, query: sa.Select) -> list[RunOut]:
    """The runs ``query`` selects (a select of the Run entity: its joins, conditions, order and limit are kept) as
    RunOut whose summaries carry warnings_count, the warnings themselves not loaded; runs of one configuration share
    its ConfigurationOut."""
    query = (query.with_only_columns(*_RUN_OUT_COLUMNS, *SUMMARY_COLUMNS, WARNINGS_COUNT, maintain_column_froms=False)
             .outerjoin(RunSummary, RunSummary.run_id == Run.id))
    rows = session.execute(query).all()
    made = configuration_outs(session, (row.configuration_id for row in rows))
    at = len(_RUN_OUT_COLUMNS)
    return [run_out(row[:at], row[at:], made[row.configuration_id]) for row in rows]


RUN_OUT_COLUMNS = _RUN_OUT_COLUMNS  # the run's columns run_out takes, in its order (configuration_id last)
RUN_OUT_KEYS = tuple(c.key for c in _RUN_OUT_COLUMNS[:-1])


def run_out(run: Sequence, summary: Sequence, configuration: ConfigurationOut, *,
            warnings: list[dict[str, str]] | None = None, with_warnings: bool = False) -> RunOut:
    """A RunOut from a row's values: ``run`` those of RUN_OUT_COLUMNS (configuration_id last, or left off),
    ``summary`` SUMMARY_COLUMNS then the warnings' count (all None: no summary). ``with_warnings``: the summary
    lists ``warnings`` and counts them instead (as SummaryOut.from_row does)."""
    passed, total, geomean, unclipped, compile_s, ratio, count = summary
    if passed is None:
        summary_out = None
    elif with_warnings:
        summary_out = SummaryOut.values(passed, total, geomean, unclipped, compile_s, ratio, warnings)
    else:
        summary_out = SummaryOut.values(passed, total, geomean, unclipped, compile_s, ratio, None,
                                        with_warnings=False, warnings_count=count or 0)
    values = dict(zip(RUN_OUT_KEYS, run, strict=False))
    values["configuration"] = configuration
    values["summary"] = summary_out
    return RunOut.model_validate(values)


# The numbers of a RunSummary as the reads return them: perfdash.metrics' SuiteSummary itself, so pages read its
# metric values and texts without building another object per point.
SummaryNumbers = SuiteSummary


SUMMARY_COLUMNS = (RunSummary.passed, RunSummary.total, RunSummary.geomean_speedup,
                   RunSummary.geomean_speedup_unclipped, RunSummary.mean_compile_time_s,
                   RunSummary.mean_compression_ratio)


@dataclass(frozen=True, slots=True)
class RunLite:
    """What list pages show of a run."""

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


_LITE_COLUMNS = (Run.id, Run.night, Run.torch_git_commit, Run.torch_version, Run.host, Run.jenkins_url,
                 Run.partition_id, Run.total_partitions, Run.configuration_id)


def _lite_runs(session: Session, query: sa.Select, with_versions: bool = False) -> list[RunLite]:
    """Rows of ``query`` (_LITE_COLUMNS [+ suite_versions], then SUMMARY_COLUMNS) as RunLite."""
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


def lite_runs(session: Session, run_ids: Sequence[int]) -> dict[int, RunLite]:
    """The given runs as RunLite, by id."""
    if not run_ids:
        return {}
    query = (sa.select(*_LITE_COLUMNS, *SUMMARY_COLUMNS).outerjoin(RunSummary, RunSummary.run_id == Run.id)
             .where(Run.id.in_(list(run_ids))))
    return {run.id: run for run in _lite_runs(session, query)}


def list_run_rows(session: Session, filters: RunFilter, *, limit: int, offset: int = 0) -> list[RunLite]:
    """Runs matching ``filters``, newest first, as the Runs page lists them."""
    query = sa.select(*_LITE_COLUMNS, Run.suite_versions, *SUMMARY_COLUMNS).select_from(Run)
    query = _page_of(query, filters, limit, offset).outerjoin(RunSummary, RunSummary.run_id == Run.id)
    return _lite_runs(session, query, with_versions=True)


@dataclass(frozen=True, slots=True)
class RunChoice:
    id: int
    night: date
    torch_git_commit: str | None


def run_choices(session: Session, configuration_id: int, limit: int = 400) -> list[RunChoice]:
    """Runs of a configuration for the Compare form's selects, newest first."""
    query = runs_select(RunFilter(ConfigFilter(configuration_id=configuration_id)), Run.id, Run.night,
                        Run.torch_git_commit, limit=limit)
    return [RunChoice(*row) for row in session.connection().execute(query)]  # plain rows, as results_of


def run_by_commit(session: Session, configuration_id: int, commit: str) -> Run | None:
    """The latest run of a configuration whose torch commit starts with ``commit`` (a short hash works)."""
    commit = commit.strip().lower()
    if not commit:
        return None
    filters = RunFilter(ConfigFilter(configuration_id=configuration_id), commit=commit)
    return session.scalars(runs_select(filters, limit=1)).first()


def results_of(session: Session, run_id: int, *, with_samples: bool = False) -> list[ResultOut]:
    """A run's results by model name; raw samples only when asked (they are most of a row's bytes)."""
    columns = [getattr(Result, name) for name in RESULT_COLUMNS] + ([Result.samples] if with_samples else [])
    # columns only: the session's connection returns plain rows, without the ORM's result machinery
    rows = session.connection().execute(sa.select(*columns).where(Result.run_id == run_id)
                                        .order_by(Result.name)).mappings()
    return [ResultOut.from_values(dict(row)) for row in rows]


def result_rows(session: Session, run_id: int) -> list[Result]:
    """A run's results as ORM rows, by model name (samples deferred)."""
    return list(session.scalars(sa.select(Result).where(Result.run_id == run_id).order_by(Result.name)))


def get_run(session: Session, run_id: int, *, with_samples: bool = False) -> RunDetail | None:
    run = session.get(Run, run_id)
    if run is None:
        return None
    return RunDetail(**dict(RunOut.from_row(run)), results=results_of(session, run_id, with_samples=with_samples))


def run_row(session: Session, run_id: int) -> Run | None:
    return session.get(Run, run_id)


def list_configurations(session: Session, filters: ConfigFilter = ConfigFilter()) -> list[ConfigurationOut]:
    query = (sa.select(Configuration).where(*filters.clauses())
             .order_by(Configuration.suite, Configuration.backend, Configuration.variant, Configuration.device,
                       Configuration.dtype, Configuration.mode, Configuration.id))
    return [ConfigurationOut.from_row(c) for c in session.scalars(query).unique()]


def configurations(session: Session) -> list[Configuration]:
    return list(session.scalars(sa.select(Configuration).order_by(Configuration.id)))


def configurations_with_runs(session: Session, *clauses: sa.ColumnElement[bool]) -> list[Configuration]:
    """Configurations matching ``clauses`` that have at least one run, in a stable order (suite, device, dtype,
    backend)."""
    has_run = sa.exists().where(Run.configuration_id == Configuration.id)
    return list(session.scalars(sa.select(Configuration).where(*clauses, has_run)
                                .order_by(Configuration.suite, Configuration.device, Configuration.dtype,
                                          Configuration.backend, Configuration.variant, Configuration.id)))


def distinct_values(session: Session) -> dict[str, list[str]]:
    """The values each filter can take, for the filter forms."""
    rows = configurations(session)
    return {
        "suite": sorted({c.suite for c in rows}),
        "backend": sorted({c.backend_variant for c in rows}),
        "device": sorted({c.device for c in rows}),
        "dtype": sorted({c.dtype for c in rows}),
        "mode": sorted({c.mode for c in rows}),
        "thread_config": sorted({c.thread_config for c in rows}),
    }


@dataclass(frozen=True, slots=True)
class LatestResults:
    """A configuration's latest night as a table shows it: the latest run of each partition that night."""

    night: date
    run_ids: tuple[int, ...]  # oldest first; the last one is the run a link to the suite page opens
    results: tuple[Result, ...]  # one per model row (partitions hold disjoint models)

    @property
    def run_id(self) -> int:
        return self.run_ids[-1]


def latest_results(session: Session, configuration_ids: Sequence[int]) -> dict[int, LatestResults]:
    """The latest night of each configuration with its results (samples not loaded: tables need medians)."""
    nights = latest_nights(session, configuration_ids)
    if not nights:
        return {}
    runs = session.execute(sa.select(Run.id, Run.configuration_id, Run.partition_id, Run.total_partitions,
                                     Run.night, Run.started_at)
                           .where(sa.tuple_(Run.configuration_id, Run.night).in_(list(nights.items())))).all()
    shown = latest_of_each(runs)
    run_ids: dict[int, list[int]] = {config_id: [] for config_id in nights}
    for run in shown:
        run_ids[run.configuration_id].append(run.id)
    by_config: dict[int, dict[tuple[str, int], Result]] = {config_id: {} for config_id in nights}
    config_of = {run.id: run.configuration_id for run in shown}
    if config_of:
        for result in session.scalars(sa.select(Result).where(Result.run_id.in_(list(config_of)))
                                      .order_by(Result.name)):
            by_config[config_of[result.run_id]][(result.name, result.batch_size)] = result
    return {config_id: LatestResults(night=nights[config_id], run_ids=tuple(run_ids[config_id]),
                                     results=tuple(by_config[config_id].values()))
            for config_id in nights if run_ids[config_id]}
