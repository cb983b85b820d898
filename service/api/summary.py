"""/api/v1/summary: a night's summary per suite x backend (each configuration's latest run that night), with each
run's previous run."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response, status

from service.api.deps import ConfigFilterDep, IsoDate, SessionDep, json_response
from service.queries.summary import NightSummary, night_summary, run_summary

router = APIRouter(prefix="/api/v1/summary", tags=["summary"])


@router.get("", response_model=NightSummary, summary="Summary of a night (default: the latest) and configuration")
def summary_get(
    session: SessionDep,
    filters: ConfigFilterDep,
    night: Annotated[IsoDate | None, Query(description="UTC date the runs started; default the latest")] = None,
) -> Response:
    return json_response(night_summary(session, filters, night))


@router.get("/runs/{run_id}", response_model=NightSummary, summary="Summary of one run with its previous run")
def summary_of_run(session: SessionDep, run_id: int) -> Response:
    found = run_summary(session, run_id)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no run {run_id}")
    return json_response(found)
