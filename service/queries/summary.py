"""Summaries: a night's per suite x backend (one row per configuration) with each run's previous run, and the
home page's latest run of every configuration with its previous run.

"Night" is the UTC date a run started and only groups runs; the previous run is the one service.queries.order
defines (same configuration and partition, started earlier, possibly the same night). When a configuration ran
twice in one night, the later run is the one a summary shows.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.orm import Session, aliased

from service.models import Configuration, Machine, Run, RunSummary
from service.queries.filters import ConfigFilter
from service.queries.order import latest_night, latest_of_each, latest_run_ids, previous_run_id, previous_run_ids
from service.queries.runs import (
    CONFIGURATION_OUT_COLUMNS,
    RUN_OUT_COLUMNS,
    SUMMARY_COLUMNS,
    RunLite,
    configuration_outs_of,
    lite_runs,
    run_out,
    warnings_count,
)
from service.queries.schemas import RunOut


class SummaryRow(BaseModel):
    run: RunOut  # carries its configuration and stored summary (its warnings only when asked for)
    previous: RunOut | None  # summary without the warnings list (warnings_count only)


class NightSummary(BaseModel):
    night: date | None  # None: no run matches
    rows: list[SummaryRow]


@dataclass(frozen=True, slots=True)
class _Candidate:
    """A run the statement found, with what latest_of_each orders it by."""

    id: int
    configuration_id: int
    partition_id: int
    total_partitions: int
    night: date
    started_at: datetime | None
    row: sa.Row


_AT = {column.key: at for at, column in enumerate(RUN_OUT_COLUMNS)}  # the run's values come first in a row
_CANDIDATE_KEYS = ("id", "configuration_id", "partition_id", "total_partitions", "night", "started_at")


@dataclass(frozen=True)
class _Columns:
    """What the statement of :func:`_rows` reads, and where each part's values are in a row: the run, its summary
    (SUMMARY_COLUMNS then the warnings' count, or the warnings ``with_warnings``), the configuration with its machine,
    the previous run, its summary."""

    before: Any  # the aliases of Run and RunSummary for the previous run
    before_summary: Any
    columns: tuple[sa.ColumnElement, ...]
    run: slice
    summary: slice
    configuration: slice
    previous: slice
    previous_summary: slice


@functools.cache
def _columns(with_warnings: bool) -> _Columns:
    before = aliased(Run)
    before_summary = aliased(RunSummary)
    warnings_column = RunSummary.warnings if with_warnings else warnings_count(RunSummary)
    parts = [RUN_OUT_COLUMNS, (*SUMMARY_COLUMNS, warnings_column), CONFIGURATION_OUT_COLUMNS,
             tuple(getattr(before, c.key) for c in RUN_OUT_COLUMNS[:-1]),
             (*(getattr(before_summary, c.key) for c in SUMMARY_COLUMNS), warnings_count(before_summary))]
    slices, at = [], 0
    for part in parts:
        slices.append(slice(at, at + len(part)))
        at += len(part)
    return _Columns(before, before_summary, tuple(column for part in parts for column in part), *slices)


@functools.lru_cache(maxsize=64)
def _statement(with_warnings: bool, filters: ConfigFilter | None) -> sa.Select:
    """The runs of the night given as ``night`` whose configurations match ``filters`` (None: the run given as
    ``run_id``) with its configuration and machine and its previous run (order.previous_run_id),
    both with their summaries, as columns of one statement: no ORM objects, no list of ids sent back. Reading the
    runs, their previous runs and the configurations as four statements (two with a list of 276 or 552 ids), then
    validating each part, was most of a night summary's time (issue 31).

    The runs with their previous runs' ids come from a subquery the planner keeps whole (OFFSET 0): joined on that
    plain column, each previous run is one primary-key probe, where a join on the correlated subquery itself let
    Postgres hash the whole runs table (16 ms of 17 at 3M results). Built once for each filter (building it was a
    tenth of the summary's CPU)."""
    columns = _columns(with_warnings)
    where = ([Run.id == sa.bindparam("run_id", type_=sa.Integer)] if filters is None
             else [Run.night == sa.bindparam("night", type_=sa.Date), *filters.clauses()])
    own = columns.columns[:columns.previous.start]  # the run's, its summary's, its configuration's
    found = (sa.select(*(column.label(f"c{at}") for at, column in enumerate(own)),
                       previous_run_id(Run).label("previous_id"))
             .join(Configuration, Configuration.id == Run.configuration_id)
             .join(Machine, Machine.id == Configuration.machine_id)
             .outerjoin(RunSummary, RunSummary.run_id == Run.id)
             .where(*where).offset(0).subquery())
    before, before_summary = columns.before, columns.before_summary
    return (sa.select(*(found.c[f"c{at}"] for at in range(len(own))), *columns.columns[columns.previous.start:])
            .select_from(found)
            .outerjoin(before, before.id == found.c.previous_id)
            .outerjoin(before_summary, before_summary.run_id == before.id))


def _rows(session: Session, filters: ConfigFilter | None, parameters: dict[str, Any], *,
          with_warnings: bool) -> list[SummaryRow]:
    """Rows of the runs of a night (``filters``; parameter ``night``) or of one run (None; parameter ``run_id``) with
    their previous runs, in one statement whatever the number of runs; of a night only the latest run of each
    configuration and partition (order.latest_of_each), in its order. Every summary carries ``warnings_count``
    (stored at ingest); the runs' own warnings are decoded only ``with_warnings``: at PyTorch's matrix a night is 276
    runs with ~60 warnings each, ~1.2 MB of the answer's 2 MB and most of its time (issue 31), where a summary shows
    their number and the run's own endpoint (/api/v1/summary/runs/{id}, /api/v1/runs/{id}) lists them."""
    columns = _columns(with_warnings)
    run, summary, configuration = columns.run, columns.summary, columns.configuration
    previous, previous_summary = columns.previous, columns.previous_summary
    found = session.execute(_statement(with_warnings, filters), parameters).all()
    if filters is not None:
        found = [c.row for c in latest_of_each(
            _Candidate(**{key: row[_AT[key]] for key in _CANDIDATE_KEYS}, row=row) for row in found)]
    made = configuration_outs_of(row[configuration] for row in found)
    out = []
    for row in found:
        made_configuration = made[row[_AT["configuration_id"]]]
        values = row[summary]
        run_out_ = (run_out(row[run], (*values[:-1], None), made_configuration, warnings=values[-1],
                            with_warnings=True) if with_warnings
                    else run_out(row[run], values, made_configuration))
        previous_run = (None if row[previous.start] is None
                        else run_out(row[previous], row[previous_summary], made_configuration))
        # model_construct: both are RunOut, validated as they were made; nothing is left to check
        out.append(SummaryRow.model_construct(run=run_out_, previous=previous_run))
    return out


def night_summary(session: Session, filters: ConfigFilter = ConfigFilter(), night: date | None = None, *,
                  with_warnings: bool = False) -> NightSummary:
    """Summaries of every configuration matching ``filters`` on ``night`` (default: the latest night that has one);
    each summary's warnings listed only ``with_warnings`` (their number always)."""
    night = night or latest_night(session, filters)
    if night is None:
        return NightSummary(night=None, rows=[])
    rows = _rows(session, filters, {"night": night}, with_warnings=with_warnings)
    rows.sort(key=lambda r: (r.run.configuration.suite, r.run.configuration.backend_variant,
                             r.run.configuration.device, r.run.configuration.dtype, r.run.configuration.mode,
                             r.run.configuration.id))
    return NightSummary.model_construct(night=night, rows=rows)


def run_summary(session: Session, run_id: int) -> NightSummary | None:
    """The summary of one run, its warnings listed, with its previous run, in the same shape as
    :func:`night_summary`."""
    night = session.scalar(sa.select(Run.night).where(Run.id == run_id))
    if night is None:
        return None
    return NightSummary(night=night, rows=_rows(session, None, {"run_id": run_id}, with_warnings=True))


def latest_runs_with_base(session: Session, filters: ConfigFilter = ConfigFilter()
                          ) -> list[tuple[RunLite, RunLite | None]]:
    """For every configuration matching ``filters``: its latest run and that run's previous run, or None (the home
    page). Two indexed probes per configuration, whatever the history length."""
    latest = list(latest_run_ids(session, filters).values())
    base = previous_run_ids(session, latest)
    runs = lite_runs(session, latest + [b for b in base.values() if b is not None])
    return [(runs[run_id], runs[b] if (b := base.get(run_id)) is not None else None) for run_id in latest]
