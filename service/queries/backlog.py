"""What is waiting on someone else: regression candidates waiting for their A/B re-measurement, bisection and confirm
requests the bisect job has not finished, GitHub posts that did not get through. Read by the /metrics endpoint at
each scrape (service.prometheus), so the figures are the database's, the same from every replica."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import get_args

import sqlalchemy as sa
from sqlalchemy.orm import Session

from perfdash.bisection import BisectionPurpose, BisectionStatus
from perfdash.verdicts import ConfirmationState
from service.github.models import GithubPost
from service.models import BisectionRequest, Finding

OPEN_STATUSES: tuple[str, ...] = tuple(s for s in get_args(BisectionStatus) if s != "done")
POST_KINDS = ("report", "issue", "culprit")  # service.github.publisher's kinds of post
# a post whose last attempt failed: an outage (retried) or GitHub's refusal (a token or permission to fix)
FAILED_POST_STATUSES = ("failed", "refused")


@dataclass(frozen=True, slots=True)
class Backlog:
    confirmations_pending: int
    # (purpose, status) -> requests not done, every pair present (0 when none)
    bisections_open: dict[tuple[str, str], int] = field(default_factory=dict)
    oldest_open_bisection_s: float = 0.0  # age of the oldest request not done (0 when none)
    github_posts_failed: dict[str, int] = field(default_factory=dict)  # kind -> posts whose last attempt failed


def read_backlog(session: Session) -> Backlog:
    pending = session.scalar(sa.select(sa.func.count()).select_from(Finding)
                             .where(Finding.confirmation == ConfirmationState.PENDING))
    bisections = {(p, s): 0 for p in get_args(BisectionPurpose) for s in OPEN_STATUSES}
    oldest: datetime | None = None
    for purpose, status, count, first in session.execute(
            sa.select(BisectionRequest.purpose, BisectionRequest.status, sa.func.count(),
                      sa.func.min(BisectionRequest.created_at))
            .where(BisectionRequest.status.in_(OPEN_STATUSES))
            .group_by(BisectionRequest.purpose, BisectionRequest.status)):
        bisections[(purpose, status)] = count
        oldest = first if oldest is None else min(oldest, first)
    failed = {kind: 0 for kind in POST_KINDS}
    failed.update(session.execute(sa.select(GithubPost.kind, sa.func.count())
                                  .where(GithubPost.status.in_(FAILED_POST_STATUSES))
                                  .group_by(GithubPost.kind)).all())
    # created_at is a timestamptz on Postgres; SQLite's CURRENT_TIMESTAMP is UTC without a zone
    age = 0.0 if oldest is None else max(0.0, (datetime.now(UTC) - (
        oldest if oldest.tzinfo else oldest.replace(tzinfo=UTC))).total_seconds())
    return Backlog(confirmations_pending=pending or 0, bisections_open=bisections, oldest_open_bisection_s=age,
                   github_posts_failed=failed)
