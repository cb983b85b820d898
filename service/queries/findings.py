"""Findings (what detection stored) as API shapes and page rows; bisection requests as the API lists them."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from perfdash.axes import AXIS
from perfdash.bisection import REQUEST_AXES, BisectionOut, BisectionResult
from perfdash.metric_registry import Better
from perfdash.verdicts import FindingCategoryName, Severity
from perfdash.verdicts import category as category_of
from service.models import BisectionRequest, Finding, Run
from service.queries.filters import night_range
from service.queries.noise import FindingNoise, NoiseOut, finding_noise
from service.queries.order import run_order


class FindingOut(BaseModel):
    id: int
    kind: str
    category: FindingCategoryName
    severity: Severity  # the category's (perfdash.verdicts)
    configuration_id: int
    series_id: int | None
    run_id: int
    night: date
    suite: str
    backend: str
    model: str | None
    metric: str | None
    old_status: str | None
    new_status: str | None
    old_value: float | None
    new_value: float | None
    change_pct: float | None
    p_value: float | None
    good_commit: str | None
    bad_commit: str | None
    change_point_run_id: int | None  # the first run of the new level
    summary: str
    confirmation: str  # none | pending (a candidate) | confirmed | not_reproduced | error
    confirmation_result: dict[str, Any] | None
    acknowledged: bool
    acknowledged_at: datetime | None
    acknowledged_by: str | None
    ack_note: str | None
    created_at: datetime
    noise: NoiseOut | None = Field(None, description="a performance finding's series noise before its change (the "
                                                     "runs before the change point); null for other findings")
    sigmas_beyond: float | None = Field(None, description="how many noise scales (robust CV) the change is: "
                                                          "|log(1 + change)| / robust_cv; null without an estimate")

    @classmethod
    def from_row(cls, row: Finding, noise: FindingNoise | None = None) -> FindingOut:
        return cls(
            id=row.id, kind=row.kind, category=FindingCategoryName(row.category),
            severity=category_of(row.category).severity,
            configuration_id=row.configuration_id,
            series_id=row.series_id, run_id=row.run_id, night=row.run.night, suite=row.configuration.suite,
            backend=row.configuration.backend_variant, model=row.model, metric=row.metric, old_status=row.old_status,
            new_status=row.new_status, old_value=row.old_value, new_value=row.new_value, change_pct=row.change_pct,
            p_value=row.p_value, good_commit=row.good_commit, bad_commit=row.bad_commit,
            change_point_run_id=row.change_point.run_id if row.change_point else None, summary=row.summary,
            confirmation=row.confirmation, confirmation_result=row.confirmation_result,
            acknowledged=row.acknowledged, acknowledged_at=row.acknowledged_at, acknowledged_by=row.acknowledged_by,
            ack_note=row.ack_note, created_at=row.created_at, noise=noise.noise if noise else None,
            sigmas_beyond=noise.sigmas_beyond if noise else None)


class AcknowledgeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: str = Field(min_length=1, max_length=10_000)
    author: str | None = Field(None, max_length=200)


def finding_rows(session: Session, *, run_id: int | None = None, configuration_id: int | None = None,
                 series_id: int | None = None, category: str | None = None, kind: str | None = None,
                 acknowledged: bool | None = None, since: date | None = None, until: date | None = None,
                 oldest_first: bool = False, limit: int | None = None, offset: int = 0) -> list[Finding]:
    """Findings as ORM rows (the pages), ordered by the run that showed them (newest first unless ``oldest_first``)."""
    query = (sa.select(Finding).join(Run, Run.id == Finding.run_id)
             .where(*night_range(Run.night, since, until))
             .order_by(*run_order(newest_first=not oldest_first), Finding.id if oldest_first else Finding.id.desc())
             .limit(limit).offset(offset))
    for column, value in ((Finding.run_id, run_id), (Finding.configuration_id, configuration_id),
                          (Finding.series_id, series_id), (Finding.category, category), (Finding.kind, kind)):
        if value is not None:
            query = query.where(column == value)
    if acknowledged is not None:
        query = query.where(Finding.acknowledged_at.is_not(None) if acknowledged else Finding.acknowledged_at.is_(None))
    return list(session.scalars(query).unique())


def list_findings(session: Session, *, run_id: int | None = None, configuration_id: int | None = None,
                  series_id: int | None = None, category: str | None = None, kind: str | None = None,
                  acknowledged: bool | None = None, since: date | None = None, limit: int = 200,
                  offset: int = 0) -> list[FindingOut]:
    """Findings as the API serves them, newest first, each against its series' noise."""
    rows = finding_rows(session, run_id=run_id, configuration_id=configuration_id, series_id=series_id,
                        category=category, kind=kind, acknowledged=acknowledged, since=since, limit=limit,
                        offset=offset)
    noise = finding_noise(session, rows)
    return [FindingOut.from_row(f, noise.get(f.id)) for f in rows]


def get_finding(session: Session, finding_id: int) -> FindingOut | None:
    row = session.get(Finding, finding_id)
    return FindingOut.from_row(row, finding_noise(session, [row]).get(row.id)) if row is not None else None


def bisection_out(row: BisectionRequest) -> BisectionOut:
    """The request as the API answers it: its configuration's axes sent along, so the bisect tool needs nothing
    else."""
    axes = {name: getattr(row.configuration, AXIS[name].stored_column) for name in REQUEST_AXES}
    return BisectionOut(
        id=row.id, status=row.status, purpose=row.purpose, finding_id=row.finding_id,
        configuration_id=row.configuration_id, model=row.model, batch_size=row.batch_size, metric=row.metric,
        direction=Better(row.direction), good_commit=row.good_commit, bad_commit=row.bad_commit,
        threshold_pct=row.threshold_pct, created_at=row.created_at, series_noise_cv=row.series_noise_cv,
        series_noise_runs=row.series_noise_runs,
        result=BisectionResult.model_validate(row.result) if row.result is not None else None, **axes)


def list_bisections(session: Session, status: str | None = None, limit: int = 200) -> list[BisectionOut]:
    query = sa.select(BisectionRequest).order_by(BisectionRequest.id).limit(limit)
    if status is not None:
        query = query.where(BisectionRequest.status == status)
    return [bisection_out(b) for b in session.scalars(query)]

