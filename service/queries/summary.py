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

from service.models import Run
from service.queries.filters import ConfigFilter
from service.queries.order import latest_night, latest_of_each, latest_run_ids, previous_run_ids
from service.queries.runs import RunLite, lite_runs, runs_out_counting_warnings
from service.queries.schemas import RunOut


class SummaryRow(BaseModel):
    run: RunOut  # carries its configuration and stored summary
    previous: RunOut | None  # summary without the warnings list (warnings_count only)


class NightSummary(BaseModel):
    night: date | None  # None: no run matches
    rows: list[SummaryRow]


def _rows(session: Session, runs: list[Run]) -> list[SummaryRow]:
    """Rows with their previous runs, found in one statement rather than one round trip per configuration."""
    pairs = previous_run_ids(session, [r.id for r in runs])
    wanted = [p for p in pairs.values() if p is not None]
    # the previous run comes with its numbers and warnings_count (counted by the database, not decoded); its
    # warnings are that run's business
    previous = {r.id: r for r in runs_out_counting_warnings(session, sa.select(Run).where(Run.id.in_(wanted)))} \
        if wanted else {}
    out = []
    for r in runs:
        before = previous.get(pairs.get(r.id))  # type: ignore[arg-type]
        out.append(SummaryRow(run=RunOut.from_row(r, configuration=before.configuration if before else None),
                              previous=before))
    return out


def night_summary(session: Session, filters: ConfigFilter = ConfigFilter(), night: date | None = None) -> NightSummary:
    """Summaries of every configuration matching ``filters`` on ``night`` (default: the latest night that has one)."""
    night = night or latest_night(session, filters)
    if night is None:
        return NightSummary(night=None, rows=[])
    runs = session.scalars(sa.select(Run).join(Run.configuration).where(Run.night == night, *filters.clauses())
                           ).unique().all()
    rows = _rows(session, latest_of_each(runs))
    rows.sort(key=lambda r: (r.run.configuration.suite, r.run.configuration.backend_variant,
                             r.run.configuration.device, r.run.configuration.dtype, r.run.configuration.mode,
                             r.run.configuration.id))
    return NightSummary(night=night, rows=rows)


def run_summary(session: Session, run_id: int) -> NightSummary | None:
    """The summary of one run, with its previous run, in the same shape as :func:`night_summary`."""
    run = session.get(Run, run_id)
    if run is None:
        return None
    return NightSummary(night=run.night, rows=_rows(session, [run]))


def latest_runs_with_base(session: Session, filters: ConfigFilter = ConfigFilter()
                          ) -> list[tuple[RunLite, RunLite | None]]:
    """For every configuration matching ``filters``: its latest run and that run's previous run, or None (the home
    page). Two indexed probes per configuration, whatever the history length."""
    latest = list(latest_run_ids(session, filters).values())
    base = previous_run_ids(session, latest)
    runs = lite_runs(session, latest + [b for b in base.values() if b is not None])
    return [(runs[run_id], runs[base[run_id]] if base.get(run_id) is not None else None) for run_id in latest]
