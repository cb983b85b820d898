"""/api/v1/series and /api/v1/history: find a model's series, its history, and a suite summary's history."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response, status

from service.api.deps import ConfigFilterDep, IsoDate, SessionDep, json_response
from service.queries.history import ModelHistory, SeriesOut, SuiteHistory, find_series, model_history, suite_history

router = APIRouter(prefix="/api/v1", tags=["history"])


@router.get("/series", response_model=list[SeriesOut], summary="Find series by model name and configuration")
def series_find(session: SessionDep, filters: ConfigFilterDep, name: str | None = None) -> Response:
    return json_response(find_series(session, name, filters))


@router.get("/series/{series_id}/history", response_model=ModelHistory, summary="One model's series over nights")
def series_history(session: SessionDep, series_id: int, since: IsoDate | None = None,
                   until: IsoDate | None = None) -> Response:
    found = model_history(session, series_id, since, until)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no series {series_id}")
    return json_response(found)


@router.get("/configurations/{configuration_id}/history", response_model=SuiteHistory,
            summary="A configuration's suite summary over nights")
def configuration_history(session: SessionDep, configuration_id: int, since: IsoDate | None = None,
                          until: IsoDate | None = None) -> Response:
    found = suite_history(session, configuration_id, since, until)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no configuration {configuration_id}")
    return json_response(found)
