"""/api/v1/bisections: bisection requests (one per finding and purpose) and their results, as agreed with the bisect
client.

What a result sets off (a confirm request's verdict decides its candidate: confirmed files its issue and requests the
bisection; a bisection's verdict is commented on the regression's GitHub issue) is service.alerts.workflow's; a
failure to post stays in the ledger and is retried by the next `perfdash report --post`, never failing the request.
Each GitHub post a result makes is in the audit log under the bisect token's name (action ``GITHUB <kind>``).
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response, status

from perfdash.bisection import BisectionIn, BisectionOut, BisectionResult, BisectionStatus
from service.alerts.bisections import BisectionError, request_bisection
from service.alerts.workflow import record_bisection_result
from service.api.auth import AUTH_RESPONSES, BisectScope, audit_also
from service.api.deps import SessionDep, SettingsDep
from service.models import BisectionRequest
from service.queries.findings import bisection_out, list_bisections

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
    try:
        outcome = record_bisection_result(session, settings, bisection_id, body)
    except LookupError as exc:
        raise HTTPException(404, str(exc)) from None
    if outcome.posts:  # each GitHub post the result made, under the token's name (the posts were committed)
        for post in outcome.posts:
            audit_also(request, session, f"GITHUB {post.kind}", f"bisection_id={bisection_id}, {post.key}",
                       f"{post.status}: {post.html_url or post.last_error or ''}")
        session.commit()
    return bisection_out(outcome.bisection)
