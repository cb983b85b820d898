"""Findings as API shapes, bisection requests (shapes from perfdash.bisection), and the queries the routers and pages
use (no FastAPI here)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from perfdash.axes import AXIS
from perfdash.bisection import (
    REQUEST_AXES,
    BisectionFields,
    BisectionIn,
    BisectionOut,
    BisectionPurpose,
    BisectionResult,
)
from perfdash.metric_registry import BISECT_METRICS, better_of, min_effect_of
from service.detection.models import BisectionRequest, Finding
from service.models import Configuration, Run


class FindingOut(BaseModel):
    id: int
    kind: str
    category: str
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

    @classmethod
    def from_row(cls, row: Finding) -> FindingOut:
        return cls(
            id=row.id, kind=row.kind, category=row.category, configuration_id=row.configuration_id,
            series_id=row.series_id, run_id=row.run_id, night=row.run.night, suite=row.configuration.suite,
            backend=row.configuration.backend_variant, model=row.model, metric=row.metric, old_status=row.old_status,
            new_status=row.new_status, old_value=row.old_value, new_value=row.new_value, change_pct=row.change_pct,
            p_value=row.p_value, good_commit=row.good_commit, bad_commit=row.bad_commit,
            change_point_run_id=row.change_point.run_id if row.change_point else None, summary=row.summary,
            confirmation=row.confirmation, confirmation_result=row.confirmation_result,
            acknowledged=row.acknowledged, acknowledged_at=row.acknowledged_at, acknowledged_by=row.acknowledged_by,
            ack_note=row.ack_note, created_at=row.created_at)


class AcknowledgeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: str = Field(min_length=1, max_length=10_000)
    author: str | None = Field(None, max_length=200)


def list_findings(session: Session, *, run_id: int | None = None, configuration_id: int | None = None,
                  series_id: int | None = None, category: str | None = None, kind: str | None = None,
                  acknowledged: bool | None = None, since: date | None = None, limit: int = 200,
                  offset: int = 0) -> list[FindingOut]:
    query = sa.select(Finding).join(Finding.run).order_by(Run.night.desc(), Finding.id.desc())
    for column, value in ((Finding.run_id, run_id), (Finding.configuration_id, configuration_id),
                          (Finding.series_id, series_id), (Finding.category, category), (Finding.kind, kind)):
        if value is not None:
            query = query.where(column == value)
    if acknowledged is not None:
        query = query.where(Finding.acknowledged_at.is_not(None) if acknowledged else Finding.acknowledged_at.is_(None))
    if since is not None:
        query = query.where(Run.night >= since)
    return [FindingOut.from_row(f) for f in session.scalars(query.limit(limit).offset(offset)).unique()]


def get_finding(session: Session, finding_id: int) -> FindingOut | None:
    row = session.get(Finding, finding_id)
    return FindingOut.from_row(row) if row is not None else None


# ---------------------------------------------------------------------------------------------------------------------
# Bisection requests (the contract's models live in perfdash.bisection; the bisect tool imports the same ones)


class BisectionError(ValueError):
    """A request that cannot be made (422)."""


def _direction(metric: str) -> str:
    return better_of(metric).value


# A confirm request's threshold, as a share of the metric's minimum effect. The change point already showed the change
# is not significantly smaller than the minimum effect; the A/B asks whether the torch builds differ by about that
# much. At the full minimum effect a real step of exactly that size would fail half its A/Bs (its measured median
# change falls below 5 % as often as above); at 0.6 noise still cannot pass (within-run CV 0.76 %: a 3 % change
# is a 7-sigma event for ten runs a side) and bench/detection.py --alerts issues 5 % steps.
CONFIRM_THRESHOLD_SHARE = 0.6


def _threshold(metric: str, purpose: str = "bisect") -> float:
    share = CONFIRM_THRESHOLD_SHARE if purpose == "confirm" else 1.0
    return round(100.0 * min_effect_of(metric) * share, 6)


def request_bisection(session: Session, body: BisectionIn,
                      purpose: BisectionPurpose = "bisect") -> tuple[BisectionRequest, bool]:
    """(request, created). One request per finding and purpose: asking again returns the existing one. Flushes.

    ``confirm``: the candidate's A/B re-measurement (service.detection.confirmation), not a search."""
    if body.finding_id is not None:
        existing = session.scalars(sa.select(BisectionRequest).where(
            BisectionRequest.finding_id == body.finding_id, BisectionRequest.purpose == purpose)).first()
        if existing is not None:
            return existing, False
        finding = session.get(Finding, body.finding_id)
        if finding is None:
            raise LookupError(f"no finding {body.finding_id}")
        if finding.series_id is None or finding.series is None or finding.metric not in BISECT_METRICS:
            raise BisectionError(f"finding {finding.id} is not about one model's metric: nothing to bisect")
        if not finding.good_commit or not finding.bad_commit:
            raise BisectionError(f"finding {finding.id} has no commit range (runs without a torch git commit)")
        row = BisectionRequest(
            status="pending", purpose=purpose, finding_id=finding.id, configuration_id=finding.configuration_id,
            model=finding.series.name, batch_size=finding.series.batch_size, metric=finding.metric,
            direction=body.direction.value if body.direction else _direction(finding.metric),
            good_commit=finding.good_commit, bad_commit=finding.bad_commit,
            threshold_pct=body.threshold_pct if body.threshold_pct is not None else _threshold(finding.metric,
                                                                                               purpose))
    else:
        fields = BisectionFields.model_validate(body.model_dump(exclude={"finding_id"}))
        data = fields.model_dump(mode="json", exclude=set(REQUEST_AXES))  # the direction as its string
        data["direction"] = data["direction"] or _direction(fields.metric)
        if data["threshold_pct"] is None:
            data["threshold_pct"] = _threshold(fields.metric)
        row = BisectionRequest(status="pending", purpose=purpose, configuration_id=_configuration_of(session, fields),
                               **data)
    session.add(row)
    session.flush()
    session.refresh(row)
    return row, True


def _configuration_of(session: Session, fields: BisectionFields) -> int:
    """The stored configuration a request without a finding names (its REQUEST_AXES); of several (one per machine),
    the one that ran last."""
    query = sa.select(Configuration.id).join(Run, Run.configuration_id == Configuration.id)
    for name in REQUEST_AXES:
        column, value = getattr(Configuration, AXIS[name].column), getattr(fields, name)
        query = query.where(column.is_(None) if value is None else column == value)
    found = session.scalar(query.group_by(Configuration.id).order_by(sa.func.max(Run.id).desc()).limit(1))
    if found is None:
        described = ", ".join(f"{name}={getattr(fields, name)!r}" for name in REQUEST_AXES)
        raise BisectionError(f"no stored run has this configuration ({described}): a bisection measures a series "
                             "the dashboard holds")
    return found


def bisection_out(row: BisectionRequest) -> BisectionOut:
    """The request as the API answers it: its configuration's axes sent along, so the bisect tool needs nothing
    else."""
    axes = {name: getattr(row.configuration, AXIS[name].column) for name in REQUEST_AXES}
    return BisectionOut(
        id=row.id, status=row.status, purpose=row.purpose, finding_id=row.finding_id,
        configuration_id=row.configuration_id, model=row.model, batch_size=row.batch_size, metric=row.metric,
        direction=row.direction, good_commit=row.good_commit, bad_commit=row.bad_commit,
        threshold_pct=row.threshold_pct, created_at=row.created_at,
        result=BisectionResult.model_validate(row.result) if row.result is not None else None, **axes)


def list_bisections(session: Session, status: str | None = None, limit: int = 200) -> list[BisectionOut]:
    query = sa.select(BisectionRequest).order_by(BisectionRequest.id).limit(limit)
    if status is not None:
        query = query.where(BisectionRequest.status == status)
    return [bisection_out(b) for b in session.scalars(query)]


def record_result(session: Session, bisection_id: int, result: BisectionResult) -> BisectionRequest:
    row = session.get(BisectionRequest, bisection_id)
    if row is None:
        raise LookupError(f"no bisection {bisection_id}")
    row.result = result.model_dump(mode="json")
    row.status = "done"
    row.updated_at = datetime.now(UTC)
    session.flush()
    return row
