"""Runs: list and filter, one run with its results, the configurations that exist."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.models import Configuration, Result, Run
from service.queries.filters import ConfigFilter, RunFilter
from service.queries.schemas import RESULT_COLUMNS, ConfigurationOut, ResultOut, RunDetail, RunOut


def list_runs(session: Session, filters: RunFilter = RunFilter(), *, limit: int = 100, offset: int = 0) -> list[RunOut]:
    """Runs matching ``filters``, newest night first; summaries carry warnings_count, not the warnings."""
    query = (sa.select(Run).join(Run.configuration).where(*filters.clauses())
             .order_by(Run.night.desc(), Run.id.desc()).limit(limit).offset(offset))
    return [RunOut.from_row(r, with_warnings=False) for r in session.scalars(query).unique()]


def results_of(session: Session, run_id: int, *, with_samples: bool = False) -> list[ResultOut]:
    """A run's results by model name; raw samples only when asked (they are most of a row's bytes)."""
    columns = [getattr(Result, name) for name in RESULT_COLUMNS] + ([Result.samples] if with_samples else [])
    rows = session.execute(sa.select(*columns).where(Result.run_id == run_id).order_by(Result.name)).mappings()
    return [ResultOut.from_values(dict(row)) for row in rows]


def get_run(session: Session, run_id: int, *, with_samples: bool = False) -> RunDetail | None:
    run = session.get(Run, run_id)
    if run is None:
        return None
    return RunDetail(**dict(RunOut.from_row(run)), results=results_of(session, run_id, with_samples=with_samples))


def list_configurations(session: Session, filters: ConfigFilter = ConfigFilter()) -> list[ConfigurationOut]:
    query = (sa.select(Configuration).where(*filters.clauses())
             .order_by(Configuration.suite, Configuration.backend, Configuration.variant, Configuration.device,
                       Configuration.dtype, Configuration.mode, Configuration.id))
    return [ConfigurationOut.from_row(c) for c in session.scalars(query).unique()]
