"""Runs: list and filter, one run with its results, the configurations that exist."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.models import Configuration, Result, Run
from service.queries.filters import ConfigFilter, RunFilter
from service.queries.schemas import ConfigurationOut, ResultOut, RunDetail, RunOut


def list_runs(session: Session, filters: RunFilter = RunFilter(), *, limit: int = 100, offset: int = 0) -> list[RunOut]:
    """Runs matching ``filters``, newest night first."""
    query = (sa.select(Run).join(Run.configuration).where(*filters.clauses())
             .order_by(Run.night.desc(), Run.id.desc()).limit(limit).offset(offset))
    return [RunOut.from_row(r) for r in session.scalars(query).unique()]


def get_run(session: Session, run_id: int, *, with_samples: bool = False) -> RunDetail | None:
    run = session.get(Run, run_id)
    if run is None:
        return None
    results = session.scalars(sa.select(Result).where(Result.run_id == run_id).order_by(Result.name))
    return RunDetail(**RunOut.from_row(run).model_dump(),
                     results=[ResultOut.from_row(r, with_samples=with_samples) for r in results])


def list_configurations(session: Session, filters: ConfigFilter = ConfigFilter()) -> list[ConfigurationOut]:
    query = (sa.select(Configuration).where(*filters.clauses())
             .order_by(Configuration.suite, Configuration.backend, Configuration.variant, Configuration.device,
                       Configuration.dtype, Configuration.mode, Configuration.id))
    return [ConfigurationOut.from_row(c) for c in session.scalars(query).unique()]
