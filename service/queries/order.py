"""Which run comes before which: the one definition of "latest", "previous" and "a later run wins".

A series' points are runs (configuration + commit + start time). Runs are ordered by their start time; the night
(the UTC date a run started) comes first in the order only because it is indexed (ix_runs_configuration_night) and
agrees with the start time, and the id breaks ties. A run without a start time (none are stored so since ingest
dates every run) counts as the first of its night. Two runs on one night are two points: the later one is what a
summary shows, the earlier one is its previous run.

The previous run of a run is the latest earlier run of the same configuration and the same partition (a sharded
suite's partitions are separate runs of disjoint models: a partition compares only with itself).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from datetime import date
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy.orm import Session, aliased

from service.models import Configuration, Run
from service.queries.filters import ConfigFilter

RunLike = Any  # the Run entity or an alias of it


def run_order(run: RunLike = Run, *, newest_first: bool = False) -> tuple[sa.ColumnElement[Any], ...]:
    """ORDER BY terms of the run order (oldest first unless ``newest_first``)."""
    if newest_first:
        return run.night.desc(), run.started_at.desc().nulls_last(), run.id.desc()
    return run.night, run.started_at.asc().nulls_first(), run.id


def _key(run: RunLike | Run) -> tuple[Any, Any, Any]:
    """(night, started_at, id) as SQL expressions: an entity's columns, or a loaded run's values as literals."""
    if isinstance(run, Run):
        return (sa.literal(run.night, sa.Date), sa.literal(run.started_at, sa.DateTime(timezone=True)),
                sa.literal(run.id, sa.Integer))
    return run.night, run.started_at, run.id


def earlier(a: RunLike, b: RunLike | Run, *, or_same: bool = False) -> sa.ColumnElement[bool]:
    """``a`` comes before ``b`` in the run order (or is ``b``, with ``or_same``)."""
    a_night, a_start, a_id = _key(a)
    b_night, b_start, b_id = _key(b)
    same_start = sa.or_(a_start == b_start, sa.and_(a_start.is_(None), b_start.is_(None)))
    id_clause = a_id <= b_id if or_same else a_id < b_id
    within_night = sa.or_(sa.and_(a_start.is_(None), b_start.is_not(None)), a_start < b_start,
                          sa.and_(same_start, id_clause))
    # the plain night condition first: it is what the (configuration_id, night) index can use
    return sa.and_(a_night <= b_night, sa.or_(a_night < b_night, within_night))


def same_stream(a: RunLike, b: RunLike | Run) -> sa.ColumnElement[bool]:
    """Runs that are points of one another's history: same configuration, same partition."""
    return sa.and_(a.configuration_id == b.configuration_id, a.partition_id == b.partition_id,
                   a.total_partitions == b.total_partitions)


def up_to(run: Run) -> list[sa.ColumnElement[bool]]:
    """Every run of ``run``'s configuration and partition up to and including it (a history cut at ``run``)."""
    return [same_stream(Run, run), earlier(Run, run, or_same=True)]


def _previous(before: RunLike, run: RunLike | Run) -> sa.Select:
    """The previous run of ``run`` as ``before`` (Run, or an alias of it to correlate with an outer Run): the one
    definition of "previous"."""
    return (sa.select(before).where(same_stream(before, run), earlier(before, run))
            .order_by(*run_order(before, newest_first=True)).limit(1))


def previous_run_id(outer: RunLike) -> sa.ScalarSelect[int]:
    """Correlated subquery: the id of the previous run of the run ``outer`` (NULL for the first)."""
    before = aliased(Run)
    return _previous(before, outer).with_only_columns(before.id).correlate(outer).scalar_subquery()


class _RunParameters:
    """A run's stream and order columns as bound parameters, for a statement about "this run" built once."""

    configuration_id = sa.bindparam("configuration_id", type_=sa.Integer)
    partition_id = sa.bindparam("partition_id", type_=sa.Integer)
    total_partitions = sa.bindparam("total_partitions", type_=sa.Integer)
    night = sa.bindparam("night", type_=sa.Date)
    started_at = sa.bindparam("started_at", type_=sa.DateTime(timezone=True))
    id = sa.bindparam("id", type_=sa.Integer)

    @staticmethod
    def values(run: Run) -> dict[str, Any]:
        return {"configuration_id": run.configuration_id, "partition_id": run.partition_id,
                "total_partitions": run.total_partitions, "night": run.night, "started_at": run.started_at,
                "id": run.id}


@functools.cache
def _previous_of_parameters() -> sa.Select:
    # built once: building the statement was a fifth of previous_run's time
    return _previous(Run, _RunParameters)


def previous_run(session: Session, run: Run) -> Run | None:
    """The latest earlier run of the same configuration and partition."""
    return session.scalars(_previous_of_parameters(), _RunParameters.values(run)).first()


@functools.cache
def _previous_run_ids_statement() -> sa.Select:
    # built once, the ids an expanding parameter: building it was a tenth of a night summary's CPU (issue 31)
    return sa.select(Run.id, previous_run_id(Run)).where(Run.id.in_(sa.bindparam("ids", expanding=True)))


def previous_run_ids(session: Session, run_ids: Sequence[int]) -> dict[int, int | None]:
    """run id -> its previous run's id, in one statement (a correlated subquery per run on the index)."""
    if not run_ids:
        return {}
    return dict(session.execute(_previous_run_ids_statement(), {"ids": list(run_ids)}).all())


def latest_run_ids(session: Session, filters: ConfigFilter = ConfigFilter()) -> dict[int, int]:
    """configuration id -> its latest run's id, for every configuration matching ``filters`` that has a run."""
    newest = aliased(Run)
    latest = (sa.select(newest.id).where(newest.configuration_id == Configuration.id)
              .order_by(*run_order(newest, newest_first=True)).limit(1).correlate(Configuration).scalar_subquery())
    query = sa.select(Configuration.id, latest).where(*filters.clauses())
    return {config_id: run_id for config_id, run_id in session.execute(query) if run_id is not None}


def _last_night_of_configuration(before: date | None = None) -> sa.ScalarSelect[date]:
    """Correlated subquery: the latest night of the outer Configuration (earlier than ``before``), one backward probe
    of ix_runs_configuration_night."""
    query = sa.select(sa.func.max(Run.night)).where(Run.configuration_id == Configuration.id)
    if before is not None:
        query = query.where(Run.night < before)
    return query.correlate(Configuration).scalar_subquery()


def latest_night(session: Session, filters: ConfigFilter = ConfigFilter(), *, before: date | None = None,
                 configuration_ids: Sequence[int] | None = None) -> date | None:
    """The latest night with a run matching ``filters`` (and earlier than ``before``)."""
    clauses = filters.clauses()
    if not clauses and configuration_ids is None:  # ix_runs_night, backwards
        query = sa.select(sa.func.max(Run.night))
        return session.scalar(query.where(Run.night < before) if before is not None else query)
    # the latest of each matching configuration's latest night: one index probe per configuration, where a max over
    # the join read every run of every matching configuration (x20 at 30M results; issue 31)
    if configuration_ids is not None:
        clauses.append(Configuration.id.in_(list(configuration_ids)))
    return session.scalar(sa.select(sa.func.max(_last_night_of_configuration(before))).where(*clauses))


def latest_nights(session: Session, configuration_ids: Sequence[int]) -> dict[int, date]:
    """configuration id -> the latest night it has a run (one index probe per configuration)."""
    if not configuration_ids:
        return {}
    rows = session.execute(sa.select(Configuration.id, _last_night_of_configuration())
                           .where(Configuration.id.in_(list(configuration_ids))))
    return {config_id: night for config_id, night in rows if night is not None}


class _Ordered(Protocol):
    """What latest_of_each reads of a run; read-only, so a frozen dataclass is one."""

    @property
    def id(self) -> int: ...
    @property
    def configuration_id(self) -> int: ...
    @property
    def partition_id(self) -> int: ...
    @property
    def total_partitions(self) -> int: ...
    @property
    def night(self) -> date: ...
    @property
    def started_at(self) -> Any: ...


R = TypeVar("R", bound=_Ordered)


def latest_of_each(runs: Iterable[R]) -> list[R]:
    """The latest run of each configuration and partition among ``runs`` (a later run wins: a re-run replaces what
    a summary or table shows, never what history shows), in run order."""
    def key(r: R) -> tuple[Any, ...]:
        return r.night, r.started_at is not None, r.started_at or 0, r.id

    latest: dict[tuple[int, int, int], R] = {}
    for run in sorted(runs, key=key):
        latest[(run.configuration_id, run.partition_id, run.total_partitions)] = run
    return sorted(latest.values(), key=key)
