"""/api/v1/annotations: read notes on configurations, series and nights; add one (bearer token)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status

from service.api.auth import AUTH_RESPONSES, AdminScope
from service.api.deps import IsoDate, SessionDep
from service.queries.annotations import AnnotationIn, AnnotationOut, add_annotation, list_annotations

router = APIRouter(prefix="/api/v1/annotations", tags=["annotations"])


@router.get("", response_model=list[AnnotationOut], summary="List annotations")
def annotations_list(session: SessionDep, configuration_id: int | None = None, series_id: int | None = None,
                     since: IsoDate | None = None, until: IsoDate | None = None) -> list[AnnotationOut]:
    return list_annotations(session, configuration_id=configuration_id, series_id=series_id, since=since,
                            until=until)


@router.post("", response_model=AnnotationOut, status_code=status.HTTP_201_CREATED, dependencies=[AdminScope],
             summary="Add an annotation (scope admin)",
             responses={**AUTH_RESPONSES, 404: {"description": "no such configuration or series"}})
def annotations_create(session: SessionDep, note: AnnotationIn) -> AnnotationOut:
    try:
        out = add_annotation(session, note)
    except LookupError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    session.commit()
    return out
