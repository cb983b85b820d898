"""The audit log: every write through the API and every refused attempt (service.models.AuditEntry), newest first."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict
from sqlalchemy.orm import Session

from service.models import AuditEntry


class AuditOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    at: datetime
    token_name: str
    scope: str
    action: str
    target: str
    detail: str
    outcome: str  # done | refused
    client: str


def list_audit(session: Session, *, token_name: str | None = None, action: str | None = None,
               since: date | None = None, until: date | None = None, outcome: str | None = None,
               limit: int = 100, offset: int = 0) -> list[AuditOut]:
    query = sa.select(AuditEntry).order_by(AuditEntry.id.desc())
    if outcome:
        query = query.where(AuditEntry.outcome == outcome)
    if token_name:
        query = query.where(AuditEntry.token_name == token_name)
    if action:
        query = query.where(AuditEntry.action.contains(action, autoescape=True))
    # days are UTC days, as nights are
    if since is not None:
        query = query.where(AuditEntry.at >= datetime.combine(since, time(), UTC))
    if until is not None and until < date.max:
        query = query.where(AuditEntry.at < datetime.combine(until + timedelta(days=1), time(), UTC))
    return [AuditOut.model_validate(row) for row in session.scalars(query.limit(limit).offset(offset))]
