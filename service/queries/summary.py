"""A night's summary: per suite x backend (one row per configuration) with the previous night of each.

"Night" is the UTC date a run started; the previous night of a run is the previous run of the same configuration
(same machine, same settings). When a configuration ran twice in one night, the later run counts.
"""

from __future__ import annotations

from datetime import date

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.orm import Session, aliased

from service.models import Run
from service.queries.filters import ConfigFilter
from service.queries.schemas import RunOut


class SummaryRow(BaseModel):
    run: RunOut  # carries its configuration and stored summary
    previous: RunOut | None  # summary without the warnings list (warnings_count only)


class NightSummary(BaseModel):
    night: date | None  # None: no run matches
    rows: list[SummaryRow]


def latest_night(session: Session, filters: ConfigFilter = ConfigFilter()) -> date | None:
    clauses = filters.clauses()
    query = sa.select(sa.func.max(Run.night))
    return session.scalar(query.join(Run.configuration).where(*clauses) if clauses else query)


def previous_run(session: Session, run: Run) -> Run | None:
    """The latest run of the same configuration on an earlier night."""
    return session.scalars(sa.select(Run).where(Run.configuration_id == run.configuration_id, Run.night < run.night)
                           .order_by(Run.night.desc(), Run.id.desc()).limit(1)).first()


def _rows(session: Session, runs: list[Run]) -> list[SummaryRow]:
    """Rows with their previous nights, found in one query (a correlated subquery per run, on the
    (configuration_id, night) index) rather than one round trip per configuration."""
    earlier = aliased(Run)
    previous_id = (sa.select(earlier.id)
                   .where(earlier.configuration_id == Run.configuration_id, earlier.night < Run.night)
                   .order_by(earlier.night.desc(), earlier.id.desc()).limit(1).correlate(Run).scalar_subquery())
    pairs = {run_id: prev for run_id, prev in session.execute(sa.select(Run.id, previous_id)
                                                              .where(Run.id.in_([r.id for r in runs])))}
    wanted = [p for p in pairs.values() if p is not None]
    previous = {r.id: r for r in session.scalars(sa.select(Run).where(Run.id.in_(wanted))).unique()} if wanted else {}
    # the previous night comes with its numbers and warnings_count; its warnings are that night's business
    return [SummaryRow(run=RunOut.from_row(r),
                       previous=(RunOut.from_row(previous[pairs[r.id]], with_warnings=False)
                                 if pairs.get(r.id) in previous else None))
            for r in runs]


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
    rows = _rows(session, list(latest.values()))
    rows.sort(key=lambda r: (r.run.configuration.suite, r.run.configuration.backend_variant,
                             r.run.configuration.device, r.run.configuration.dtype, r.run.configuration.mode,
                             r.run.configuration.id))
    return NightSummary(night=night, rows=rows)


def run_summary(session: Session, run_id: int) -> NightSummary | None:
    """The summary of one run, with its previous night, in the same shape as :func:`night_summary`."""
    run = session.get(Run, run_id)
    if run is None:
        return None
    return NightSummary(night=run.night, rows=_rows(session, [run]))
