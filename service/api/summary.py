"""/api/v1/summary: a night's summary per suite x backend (each configuration's latest run that night), with each
run's previous run. A night's summaries carry the number of their warnings (``warnings_count``) and list the warnings
themselves only with ``warnings=true``; one run's summary (``/runs/{run_id}``) lists them."""

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
    warnings: Annotated[bool, Query(description="list each run's warnings (the models that failed or fell back) in "
                                                "`summary.warnings`; without it `summary.warnings` is empty and "
                                                "`summary.warnings_count` says how many there are: a night of "
                                                "PyTorch's matrix has thousands")] = False,
) -> Response:
    return json_response(night_summary(session, filters, night, with_warnings=warnings))


@router.get("/runs/{run_id}", response_model=NightSummary,
            summary="Summary of one run, its warnings listed, with its previous run")
def summary_of_run(session: SessionDep, run_id: int) -> Response:
    found = run_summary(session, run_id)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no run {run_id}")
    return json_response(found)
