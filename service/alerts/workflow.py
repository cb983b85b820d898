"""What follows a finding, tied in one place: the steps after a bisection result, and the nightly post.

- Detection stores findings; a model's performance regression becomes a candidate with a confirm request
  (service.alerts.confirmation.queue_confirmations, called by the detector as it stores them).
- The bisect job posts a result (``POST /api/v1/bisections/{id}/result`` calls :func:`record_bisection_result`):
  a confirm request's verdict decides its candidate (confirmation.record_confirmation): confirmed files the issue
  (service.alerts.issues) and requests the bisection; a bisection's verdict is commented on the regression's issue.
- ``perfdash report --post`` (:func:`post_report`): the posts earlier runs could not make, the night's report
  comment, and the issues of the night's regressions and of any confirmed since.

GitHub failures never fail a step: a post that does not get through stays in the ledger (service.github.publisher)
and the next ``perfdash report --post`` retries it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import date

import sqlalchemy as sa
from sqlalchemy.orm import Session

from perfdash.bisection import BisectionResult
from perfdash.verdicts import ConfirmationState
from service.alerts.bisections import record_result
from service.alerts.confirmation import record_confirmation
from service.alerts.issues import comment_culprit, file_issues, issue_finding_ids
from service.github.client import GitHubClient, GitHubConfig, refusal
from service.github.models import GithubPost
from service.github.publisher import publish, retry_unposted
from service.models import BisectionRequest, Finding
from service.settings import Settings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResultOutcome:
    bisection: BisectionRequest  # the request, done, its result stored
    posts: list[GithubPost]  # the GitHub posts this result made (attempted now), in ledger order


def record_bisection_result(session: Session, settings: Settings, bisection_id: int,
                            result: BisectionResult) -> ResultOutcome:
    """Store a bisection's (or a confirm request's) result and act on it; committed. LookupError: no such request."""
    row = record_result(session, bisection_id, result)
    confirmed = record_confirmation(session, row, result)
    session.commit()
    if row.purpose == "confirm":
        return ResultOutcome(row, _file_confirmed(session, settings, confirmed))
    return ResultOutcome(row, _comment_culprit(session, settings, row))


def _short_client(config: GitHubConfig) -> GitHubClient:
    # A short retry budget: the bisect job is waiting on this answer; what does not get through is retried later.
    return GitHubClient(config, max_attempts=3, max_wait_s=10.0)


def _file_confirmed(session: Session, settings: Settings, confirmed: list[Finding]) -> list[GithubPost]:
    """The issue of a regression that its A/B re-measurement reproduced."""
    config = GitHubConfig.from_settings(settings)
    wanted = set(issue_finding_ids(session, finding_ids=[f.id for f in confirmed])) if confirmed else set()
    if not wanted:
        return []
    if config is None:
        logger.warning("issue of finding(s) %s: %s", sorted(wanted), refusal(settings))
        return []
    before = _ledger_attempts(session, sorted(wanted))
    filed = [f.id for f in confirmed if f.id in wanted]
    with _short_client(config) as client:
        for finding_id, post in zip(filed, file_issues(session, client, filed, settings.dashboard_url), strict=True):
            if post.status != "posted":
                logger.warning("issue of finding %s not posted yet: %s", finding_id, post.last_error)
    return _posts_made(session, sorted(wanted), before)


def _comment_culprit(session: Session, settings: Settings, row: BisectionRequest) -> list[GithubPost]:
    """The bisection's verdict on the regression's issue (and the issue, when this comment files it)."""
    config = GitHubConfig.from_settings(settings)
    if row.finding_id is None:
        return []
    if config is None:
        logger.warning("culprit of bisection %s: %s", row.id, refusal(settings))
        return []
    before = _ledger_attempts(session, [row.finding_id])
    with _short_client(config) as client:
        post = comment_culprit(session, client, row, settings.dashboard_url)
    session.commit()
    made = _posts_made(session, [row.finding_id], before)
    if post is not None and post.status != "posted":
        logger.warning("culprit of bisection %s not posted yet: %s", row.id, post.last_error)
    return made


def _ledger_attempts(session: Session, finding_ids: list[int]) -> dict[int, int]:
    """How many times each GitHub ledger row of these findings was attempted: compared after posting, it says which
    posts this result made (a row already posted is returned untouched, and is no post)."""
    rows = session.scalars(sa.select(GithubPost).where(GithubPost.finding_id.in_(finding_ids)))
    return {row.id: row.attempts for row in rows}


def _posts_made(session: Session, finding_ids: list[int], before: dict[int, int]) -> list[GithubPost]:
    rows = session.scalars(sa.select(GithubPost).where(GithubPost.finding_id.in_(finding_ids))
                           .order_by(GithubPost.id))
    return [post for post in rows if before.get(post.id) != post.attempts]


@dataclass
class ReportPosting:
    """What ``perfdash report --post`` got through: the report's ledger row, the posts left for the next run, or why
    nothing could be posted (the settings)."""

    report: GithubPost | None = None
    failed: list[GithubPost] = field(default_factory=list)
    refusal: str | None = None


def post_report(session: Session, settings: Settings, *, night: date, scope_key: str, body: str,
                run_ids: list[int]) -> ReportPosting:
    """Retry what earlier runs could not post, post the night's report (one comment per night and scope, edited in
    place when it changed), and file the issues of the night's regressions and of any confirmed since."""
    config = GitHubConfig.from_settings(settings)
    if config is None or settings.report_issue is None:
        return ReportPosting(refusal=refusal(settings))
    failed = []
    with GitHubClient(config) as client:
        for row in retry_unposted(session, client):
            session.commit()
            if row.status != "posted":
                failed.append(row)
        report = publish(session, client, kind="report", key=f"{night.isoformat()}:{scope_key}", body=body,
                         issue_number=settings.report_issue)
        session.commit()
        failed += [report] if report.status != "posted" else []
        # tonight's regressions, and any confirmed since (by an A/B re-measurement) whose issue is not filed yet
        confirmed = list(session.scalars(sa.select(Finding.id)
                                         .where(Finding.confirmation == ConfirmationState.CONFIRMED)))
        wanted = issue_finding_ids(session, run_ids) + issue_finding_ids(session, finding_ids=confirmed)
        failed += [row for row in file_issues(session, client, dict.fromkeys(wanted), settings.dashboard_url)
                   if row.status != "posted"]
    return ReportPosting(report=report, failed=failed)
