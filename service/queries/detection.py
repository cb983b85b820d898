"""The reads of detection, confirmation and the report: a run's results, the history of its series and of its suite
summary cut at the run, which configurations stopped reporting. The order of runs is service.queries.order's.

Missing data is not stored: a dashboard that stays green because nothing arrived is the failure users fear most, so
the morning report says which configurations reported the night before and not tonight; the answer depends only on
which runs exist and changes by itself when a late run arrives (a suite whose model count dropped is a stored
finding: see detector.MODELS_DROP)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.models import Configuration, Finding, Result, Run, RunSummary
from service.queries.order import earlier, latest_night, latest_of_each, latest_run_ids, run_order, same_stream, up_to


def runs_to_detect(session: Session, *, all_runs: bool = False) -> list[int]:
    """Every run oldest first (a backfill), or the latest run of each configuration."""
    if all_runs:
        return list(session.scalars(sa.select(Run.id).order_by(*run_order())))
    return sorted(latest_run_ids(session).values())


def results_by_series(session: Session, run_id: int) -> dict[int, Result]:
    return {r.series_id: r for r in session.scalars(sa.select(Result).where(Result.run_id == run_id))}


def result_count(session: Session, run_id: int) -> int:
    return session.scalar(sa.select(sa.func.count()).select_from(Result).where(Result.run_id == run_id)) or 0


def passing_series(session: Session, run_id: int) -> dict[int, str]:
    """series id -> model name of the run's passing results."""
    return dict(session.execute(sa.select(Result.series_id, Result.name)
                                .where(Result.run_id == run_id, Result.passed)).all())


def series_history(session: Session, run: Run, series_ids: Sequence[int] | None, columns: Sequence[Any],
                   *, last_runs: int | None = None) -> sa.Result:
    """Rows (series_id, run id, *columns) of the passing results of ``series_ids`` in the runs up to and including
    ``run`` (only the ``last_runs`` latest runs when given), oldest first. The runs' nights and commits are
    :func:`run_marks`'s: once a run, not once a row (~20,000 rows for every run of a night; issue 31)."""
    query = (sa.select(Result.series_id, Result.run_id, *columns)
             .join(Run, Run.id == Result.run_id).where(*up_to(run), Result.passed))
    if series_ids is not None:
        query = query.where(Result.series_id.in_(list(series_ids)))
    if last_runs is not None:
        query = query.where(Result.run_id.in_(list(session.scalars(_recent_runs(run, last_runs)))))
    # Core rows, not ORM ones: the ORM's row handling doubled their cost (issue 31). The session's pending changes
    # are flushed first, as its own execute would.
    session.flush()
    return session.connection().execute(query.order_by(*run_order()))


def _recent_runs(run: Run, last_runs: int) -> sa.Select:
    return sa.select(Run.id).where(*up_to(run)).order_by(*run_order(newest_first=True)).limit(last_runs)


def run_marks(session: Session, run: Run, *, last_runs: int | None = None) -> dict[int, tuple[date, str | None]]:
    """run id -> (night, torch commit) of the runs up to and including ``run`` (its ``last_runs`` latest)."""
    query = (_recent_runs(run, last_runs) if last_runs is not None else sa.select(Run.id).where(*up_to(run)))
    query = query.add_columns(Run.night, Run.torch_git_commit)
    return {run_id: (night, commit) for run_id, night, commit in session.execute(query)}


def suite_geomean_history(session: Session, run: Run) -> list[tuple[int, date, str | None, float | None]]:
    """(run id, night, commit, clipped geomean speedup) of the runs up to and including ``run``, oldest first."""
    return [(run_id, night, commit, geomean) for run_id, night, commit, geomean in session.execute(
        sa.select(Run.id, Run.night, Run.torch_git_commit, RunSummary.geomean_speedup)
        .join(RunSummary, RunSummary.run_id == Run.id).where(*up_to(run)).order_by(*run_order()))]


def has_later_run(session: Session, run: Run) -> bool:
    """Whether the configuration (and partition) of ``run`` has run again since."""
    return session.scalar(sa.select(Run.id).where(same_stream(Run, run), sa.not_(earlier(Run, run, or_same=True)))
                          .limit(1)) is not None


def series_commits(session: Session, series_id: int) -> list[tuple[int, str]]:
    """(run id, commit) of every run where the series passed and the commit is known, oldest first."""
    return [(run_id, commit) for run_id, commit in session.execute(
        sa.select(Run.id, Run.torch_git_commit).join(Result, Result.run_id == Run.id)
        .where(Result.series_id == series_id, Result.passed, Run.torch_git_commit.is_not(None))
        .order_by(*run_order())) if commit is not None]  # the query has none: narrows the type


def night_of_run(session: Session, run_id: int) -> date | None:
    return session.scalar(sa.select(Run.night).where(Run.id == run_id))


def runs_of_night(session: Session, night: date) -> list[Run]:
    """What a night shows: the latest run of each configuration and partition that night, in run order."""
    return latest_of_each(session.scalars(sa.select(Run).where(Run.night == night)).unique().all())


def result_rows_of(session: Session, run_id: int) -> list[Result]:
    return list(session.scalars(sa.select(Result).where(Result.run_id == run_id).order_by(Result.name)))


def open_findings_of(session: Session, run_ids: Sequence[int]) -> list[Finding]:
    """Findings of the runs not acknowledged, in the order they were found."""
    return list(session.scalars(sa.select(Finding).where(Finding.run_id.in_(list(run_ids)),
                                                         Finding.acknowledged_at.is_(None))
                                .order_by(Finding.id)).unique())


@dataclass(frozen=True, slots=True)
class MissingConfiguration:
    configuration_id: int
    suite: str
    backend: str
    description: str  # dtype, mode, device, threads, machine
    last_night: date  # the night it last reported
    last_run_id: int


def missing_configurations(session: Session, night: date) -> list[MissingConfiguration]:
    """Configurations with a run on the last night before ``night`` that had any run, and none on ``night``."""
    previous_night = latest_night(session, before=night)
    if previous_night is None:
        return []
    tonight = sa.select(Run.configuration_id).where(Run.night == night)
    rows = session.execute(
        sa.select(Configuration, sa.func.max(Run.id)).join(Run, Run.configuration_id == Configuration.id)
        .where(Run.night == previous_night, Configuration.id.not_in(tonight))
        .group_by(Configuration.id).order_by(Configuration.suite, Configuration.id)).unique().all()
    return [MissingConfiguration(
        configuration_id=c.id, suite=c.suite, backend=c.backend_variant,
        description=f"{c.dtype}, {c.mode}, {c.device}, {c.thread_config}, {c.machine.fingerprint}",
        last_night=previous_night, last_run_id=run_id) for c, run_id in rows]
