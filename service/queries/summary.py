"""Summaries: a night's per suite x backend (one row per configuration) with each run's previous run, and the
home page's latest run of every configuration with its previous run.

"Night" is the UTC date a run started and only groups runs; the previous run is the one service.queries.order
defines (same configuration and partition, started earlier, possibly the same night). When a configuration ran
twice in one night, the later run is the one a summary shows.
"""

from __future__ import annotations

from datetime import date

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.orm import Session

from service.models import Configuration, Run
from service.queries.filters import ConfigFilter
from service.queries.order import latest_night, latest_of_each, latest_run_ids, previous_run_ids
from service.queries.runs import RunLite, lite_runs, runs_out_counting_warnings
from service.queries.schemas import RunOut


class SummaryRow(BaseModel):
    run: RunOut  # carries its configuration and stored summary (its warnings only when asked for)
    previous: RunOut | None  # summary without the warnings list (warnings_count only)


class NightSummary(BaseModel):
    night: date | None  # None: no run matches
    rows: list[SummaryRow]


def _rows(session: Session, run_ids: list[int], *, with_warnings: bool) -> list[SummaryRow]:
    """Rows of the given runs with their previous runs, found in a fixed number of statements whatever the number of
    runs. Every summary carries ``warnings_count`` (stored at ingest); the runs' own warnings are decoded only
    ``with_warnings``: at PyTorch's matrix a night is 276 runs with ~60 warnings each, ~1.2 MB of the answer's 2 MB
    and most of its time (issue 31), where a summary shows their number and the run's own endpoint
    (/api/v1/summary/runs/{id}, /api/v1/runs/{id}) lists them."""
    pairs = previous_run_ids(session, run_ids)
    wanted = [p for p in pairs.values() if p is not None]
    counted = runs_out_counting_warnings(
        session, sa.select(Run).where(Run.id.in_(wanted + ([] if with_warnings else run_ids))))
    by_id = {r.id: r for r in counted}
    if with_warnings:
        made = {r.configuration.id: r.configuration for r in counted}
        for run in session.scalars(sa.select(Run).where(Run.id.in_(run_ids))).unique():
            by_id[run.id] = RunOut.from_row(run, configuration=made.get(run.configuration_id))
    # model_construct: both are RunOut, validated as they were made; nothing is left to check
    return [SummaryRow.model_construct(run=by_id[run_id], previous=by_id.get(pairs.get(run_id)))  # type: ignore[arg-type]
            for run_id in run_ids]


def night_run_ids(session: Session, filters: ConfigFilter, night: date) -> list[int]:
    """The runs a night's summary shows: the latest run of each matching configuration and partition that night,
    picked from their keys alone (no summary, no JSON read)."""
    rows = session.execute(
        sa.select(Run.id, Run.night, Run.started_at, Run.configuration_id, Run.partition_id, Run.total_partitions)
        .join(Configuration, Configuration.id == Run.configuration_id).where(Run.night == night, *filters.clauses())
    ).all()
    return [r.id for r in latest_of_each(rows)]


def night_summary(session: Session, filters: ConfigFilter = ConfigFilter(), night: date | None = None, *,
                  with_warnings: bool = False) -> NightSummary:
    """Summaries of every configuration matching ``filters`` on ``night`` (default: the latest night that has one);
    each summary's warnings listed only ``with_warnings`` (their number always)."""
    night = night or latest_night(session, filters)
    if night is None:
        return NightSummary(night=None, rows=[])
    rows = _rows(session, night_run_ids(session, filters, night), with_warnings=with_warnings)
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
    return NightSummary(night=night, rows=_rows(session, [run_id], with_warnings=True))


def latest_runs_with_base(session: Session, filters: ConfigFilter = ConfigFilter()
                          ) -> list[tuple[RunLite, RunLite | None]]:
    """For every configuration matching ``filters``: its latest run and that run's previous run, or None (the home
    page). Two indexed probes per configuration, whatever the history length."""
    latest = list(latest_run_ids(session, filters).values())
    base = previous_run_ids(session, latest)
    runs = lite_runs(session, latest + [b for b in base.values() if b is not None])
    return [(runs[run_id], runs[base[run_id]] if base.get(run_id) is not None else None) for run_id in latest]
