"""/api/v1/bisections: bisection requests (one per finding and purpose) and their results, as agreed with the bisect
client.

A result that names a culprit is commented on the regression's GitHub issue at once when GitHub is configured; a
failure to post stays in the ledger and is retried by the next `perfdash report --post`, never failing the request.
Each GitHub post a result makes is in the audit log under the bisect token's name (action ``GITHUB <kind>``).
The result of a ``confirm`` request (a candidate's A/B re-measurement) decides the candidate
(service.detection.confirmation): confirmed files its issue and requests the bisection, not reproduced closes it.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, HTTPException, Request, Response, status
from sqlalchemy.orm import Session

from perfdash.bisection import BisectionIn, BisectionOut, BisectionResult, BisectionStatus
from service.api.auth import AUTH_RESPONSES, BisectScope, audit_also
from service.api.deps import SessionDep, SettingsDep
from service.detection.queries import BisectionError, record_result, request_bisection
from service.github.models import GithubPost
from service.models import BisectionRequest, Finding
from service.queries.findings import bisection_out, list_bisections
from service.settings import Settings

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/api/v1/bisections", tags=["bisections"])


@router.post("", response_model=BisectionOut, status_code=status.HTTP_201_CREATED, dependencies=[BisectScope],
             summary="Request a bisection (201), or get the finding's existing request (200; scope bisect)",
             responses={**AUTH_RESPONSES, 200: {"description": "the finding's existing request"},
                        404: {"description": "no such finding, or no stored run of the configuration"},
                        409: {"description": "the finding cannot be bisected: not one model's metric, or no commit "
                                             "range"}})
def bisections_create(session: SessionDep, body: BisectionIn, response: Response) -> BisectionOut:
    from pydantic import ValidationError

    try:
        row, created = request_bisection(session, body)
    except LookupError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    except BisectionError as exc:
        # A finding that is there but cannot be bisected is its state, not a malformed request: the same body is
        # right for another finding (409). Explicit fields that cannot make a request are the body's fault (422).
        raise HTTPException(409 if body.finding_id is not None else 422, str(exc)) from None
    except ValidationError as exc:
        raise HTTPException(422, exc.errors(include_url=False)) from None
    session.commit()
    if not created:
        response.status_code = status.HTTP_200_OK
    return bisection_out(row)


@router.get("", response_model=list[BisectionOut], summary="List bisection requests")
def bisections_list(session: SessionDep,
                    status: BisectionStatus | None = None) -> list[BisectionOut]:
    return list_bisections(session, status)


@router.get("/{bisection_id}", response_model=BisectionOut, summary="One bisection request")
def bisections_get(session: SessionDep, bisection_id: int) -> BisectionOut:
    row = session.get(BisectionRequest, bisection_id)
    if row is None:
        raise HTTPException(404, f"no bisection {bisection_id}")
    return bisection_out(row)


@router.post("/{bisection_id}/result", response_model=BisectionOut, dependencies=[BisectScope],
             summary="Report a bisection's result: marks it done and comments the culprit on the regression's issue "
                     "(scope bisect)", responses={**AUTH_RESPONSES, 404: {"description": "no such bisection"}})
def bisections_result(request: Request, session: SessionDep, settings: SettingsDep, bisection_id: int,
                      body: BisectionResult) -> BisectionOut:
    from service.detection.confirmation import record_confirmation

    try:
        row = record_result(session, bisection_id, body)
    except LookupError as exc:
        raise HTTPException(404, str(exc)) from None
    confirmed = record_confirmation(session, row, body)
    session.commit()
    if row.purpose == "confirm":
        _file_confirmed(request, session, settings, confirmed)
    else:
        _comment_on_github(request, session, settings, row)
    return bisection_out(row)


def _ledger_attempts(session: Session, finding_ids: list[int]) -> dict[int, int]:
    """How many times each GitHub ledger row of these findings was attempted: compared after posting, it says which
    posts this request made (a row already posted is returned untouched, and is no post)."""
    import sqlalchemy as sa

    rows = session.scalars(sa.select(GithubPost).where(GithubPost.finding_id.in_(finding_ids)))
    return {row.id: row.attempts for row in rows}


def _audit_posts(request: Request, session: Session, finding_ids: list[int], before: dict[int, int],
                 bisection_id: int) -> None:
    """Each GitHub post this request made, in the audit log under its token's name (committed here; the ledger rows
    were committed by the publisher's callers)."""
    import sqlalchemy as sa

    rows = session.scalars(sa.select(GithubPost).where(GithubPost.finding_id.in_(finding_ids))
                           .order_by(GithubPost.id))
    for post in rows:
        if before.get(post.id) != post.attempts:
            audit_also(request, session, f"GITHUB {post.kind}", f"bisection_id={bisection_id}, {post.key}",
                       f"{post.status}: {post.html_url or post.last_error or ''}")
    session.commit()


def _file_confirmed(request: Request, session: Session, settings: Settings, confirmed: list[Finding]) -> None:
    """The issue of a regression that its A/B re-measurement reproduced (what does not get through is retried by the
    next `perfdash report --post`)."""
    from service.github.client import GitHubClient, GitHubConfig, refusal
    from service.github.publisher import file_issue, issue_finding_ids

    config = GitHubConfig.from_settings(settings)
    wanted = set(issue_finding_ids(session, finding_ids=[f.id for f in confirmed])) if confirmed else set()
    if not wanted:
        return
    if config is None:
        logger.warning("issue of finding(s) %s: %s", sorted(wanted), refusal(settings))
        return
    before = _ledger_attempts(session, sorted(wanted))
    with GitHubClient(config, max_attempts=3, max_wait_s=10.0) as client:
        for finding in confirmed:
            if finding.id in wanted:
                post = file_issue(session, client, finding, settings.dashboard_url)
                session.commit()
                if post.status != "posted":
                    logger.warning("issue of finding %s not posted yet: %s", finding.id, post.last_error)
    _audit_posts(request, session, sorted(wanted), before, int(request.path_params["bisection_id"]))


def _comment_on_github(request: Request, session: Session, settings: Settings, row: BisectionRequest) -> None:
    from service.github.client import GitHubClient, GitHubConfig, refusal
    from service.github.publisher import comment_culprit

    config = GitHubConfig.from_settings(settings)
    if row.finding_id is None:
        return
    if config is None:
        logger.warning("culprit of bisection %s: %s", row.id, refusal(settings))
        return
    before = _ledger_attempts(session, [row.finding_id])
    # A short retry budget: the bisect job is waiting on this answer; what does not get through is retried later.
    with GitHubClient(config, max_attempts=3, max_wait_s=10.0) as client:
        post = comment_culprit(session, client, row, settings.dashboard_url)
    session.commit()
    # the culprit comment, and the regression's issue when this comment filed it
    _audit_posts(request, session, [row.finding_id], before, row.id)
    if post is not None and post.status != "posted":
        logger.warning("culprit of bisection %s not posted yet: %s", row.id, post.last_error)

