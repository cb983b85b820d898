"""Queries of the Vision page (the hf_vision suite): its configurations, their latest night, compiled-latency history.

Each is one or two indexed statements, like service/web/queries.py; nothing here formats.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.models import Configuration, Result, Run

SUITE = "hf_vision"


def vision_configurations(session: Session) -> list[Configuration]:
    """Every configuration of the hf_vision suite that has at least one run, in a stable order."""
    has_run = sa.exists().where(Run.configuration_id == Configuration.id)
    return list(session.scalars(sa.select(Configuration).where(Configuration.suite == SUITE, has_run)
                                .order_by(Configuration.device, Configuration.id)))


@dataclass(frozen=True, slots=True)
class LatestResults:
    night: date
    run_ids: tuple[int, ...]
    results: tuple[Result, ...]  # one per model row; a later run of the night wins (a re-run, or another partition)


def latest_results(session: Session, configuration_id: int) -> LatestResults | None:
    night = session.scalar(sa.select(sa.func.max(Run.night)).where(Run.configuration_id == configuration_id))
    if night is None:
        return None
    run_ids = tuple(session.scalars(sa.select(Run.id).where(Run.configuration_id == configuration_id,
                                                           Run.night == night).order_by(Run.id)))
    by_name: dict[str, Result] = {}
    for result in session.scalars(sa.select(Result).where(Result.run_id.in_(run_ids)).order_by(Result.run_id)):
        by_name[result.name] = result
    return LatestResults(night=night, run_ids=run_ids, results=tuple(by_name.values()))


@dataclass(frozen=True, slots=True)
class LatencyPoint:
    name: str
    night: date
    run_id: int
    compiled_ms: float | None  # the CSV's abs_latency (median compiled latency); None for a failure row
    passed: bool


def compiled_latency_history(session: Session, configuration_id: int, since: date) -> list[LatencyPoint]:
    """Every model row's compiled latency per night since ``since`` (the last run of a night wins), oldest first."""
    rows: Any = session.execute(
        sa.select(Result.name, Run.night, Run.id, Result.abs_latency, Result.speedup, Result.passed)
        .join(Run, Run.id == Result.run_id)
        .where(Run.configuration_id == configuration_id, Run.night >= since)
        .order_by(Run.night, Run.id))
    latest: dict[tuple[str, date], LatencyPoint] = {}
    for name, night, run_id, abs_latency, speedup, passed in rows:
        measured = abs_latency if abs_latency and speedup else None
        latest[(name, night)] = LatencyPoint(name=name, night=night, run_id=run_id, compiled_ms=measured,
                                             passed=bool(passed))
    return sorted(latest.values(), key=lambda p: (p.night, p.run_id))
