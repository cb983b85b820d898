"""/api/v1/findings: what detection found (status changes, change points, suite drops); acknowledge one with a note."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Query, status

from service.api.auth import AUTH_RESPONSES, AdminScope
from service.api.deps import IsoDate, SessionDep
from service.queries.filters import MAX_OFFSET
from service.queries.findings import AcknowledgeIn, FindingOut, get_finding, list_findings

router = APIRouter(prefix="/api/v1/findings", tags=["findings"])


@router.get("", response_model=list[FindingOut], summary="List findings, newest run first")
def findings_list(session: SessionDep, run_id: int | None = None, configuration_id: int | None = None,
                  series_id: int | None = None, category: str | None = None, kind: str | None = None,
                  acknowledged: bool | None = None, since: IsoDate | None = None,
                  limit: int = Query(200, ge=1, le=1000),
                  offset: int = Query(0, ge=0, le=MAX_OFFSET)) -> list[FindingOut]:
    return list_findings(session, run_id=run_id, configuration_id=configuration_id, series_id=series_id,
                         category=category, kind=kind, acknowledged=acknowledged, since=since, limit=limit,
                         offset=offset)


@router.get("/{finding_id}", response_model=FindingOut, summary="One finding")
def findings_get(session: SessionDep, finding_id: int) -> FindingOut:
    found = get_finding(session, finding_id)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no finding {finding_id}")
    return found


@router.post("/{finding_id}/acknowledge", response_model=FindingOut, dependencies=[AdminScope],
             summary="Acknowledge a finding with a note (it then stays quiet; the note is also an annotation; "
                     "scope admin)",
             responses={**AUTH_RESPONSES, 404: {"description": "no such finding"}})
def findings_acknowledge(session: SessionDep, finding_id: int, body: AcknowledgeIn) -> FindingOut:
    from service.detection.detector import acknowledge

    try:
        acknowledge(session, finding_id, body.note, body.author)
    except LookupError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    session.commit()
    out = get_finding(session, finding_id)
    assert out is not None
    return out
