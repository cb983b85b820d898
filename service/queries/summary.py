"""A night's summary: per suite x backend (one row per configuration) with the previous night of each.

"Night" is the UTC date a run started; the previous night of a run is the previous run of the same configuration
(same machine, same settings). When a configuration ran twice in one night, the later run counts.
"""

from __future__ import annotations

from datetime import date

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.orm import Session

from service.models import Run
from service.queries.filters import ConfigFilter
from service.queries.schemas import RunOut


class SummaryRow(BaseModel):
    run: RunOut  # carries its configuration and stored summary
    previous: RunOut | None


class NightSummary(BaseModel):
    night: date | None  # None: no run matches
    rows: list[SummaryRow]


def latest_night(session: Session, filters: ConfigFilter = ConfigFilter()) -> date | None:
    return session.scalar(sa.select(sa.func.max(Run.night)).join(Run.configuration).where(*filters.clauses()))


def previous_run(session: Session, run: Run) -> Run | None:
    """The latest run of the same configuration on an earlier night."""
    return session.scalars(sa.select(Run).where(Run.configuration_id == run.configuration_id, Run.night < run.night)
                           .order_by(Run.night.desc(), Run.id.desc()).limit(1)).first()


def _row(session: Session, run: Run) -> SummaryRow:
    previous = previous_run(session, run)
    return SummaryRow(run=RunOut.from_row(run), previous=RunOut.from_row(previous) if previous else None)


def night_summary(session: Session, filters: ConfigFilter = ConfigFilter(), night: date | None = None) -> NightSummary:
    """Summaries of every configuration matching ``filters`` on ``night`` (default: the latest night that has one)."""
    night = night or latest_night(session, filters)
    if night is None:
        return NightSummary(night=None, rows=[])
    runs = session.scalars(sa.select(Run).join(Run.configuration).where(Run.night == night, *filters.clauses())
                           .order_by(Run.configuration_id, Run.id)).unique().all()
    latest: dict[int, Run] = {}
    for run in runs:  # ordered by id: a later re-run of a configuration replaces the earlier one
        latest[run.configuration_id] = run
    rows = [_row(session, r) for r in latest.values()]
    rows.sort(key=lambda r: (r.run.configuration.suite, r.run.configuration.backend_variant,
                             r.run.configuration.device, r.run.configuration.dtype, r.run.configuration.mode,
                             r.run.configuration.id))
    return NightSummary(night=night, rows=rows)


def run_summary(session: Session, run_id: int) -> NightSummary | None:
    """The summary of one run, with its previous night, in the same shape as :func:`night_summary`."""
    run = session.get(Run, run_id)
    if run is None:
        return None
    return NightSummary(night=run.night, rows=[_row(session, run)])

