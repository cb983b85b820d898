"""/api/v1/summary: a night's summary per suite x backend, with each configuration's previous night."""

from __future__ import annotations

from datetime import date
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response, status

from service.api.deps import json_response
from service.db import SessionDep
from service.queries.filters import ConfigFilter
from service.queries.summary import NightSummary, night_summary, run_summary

router = APIRouter(prefix="/api/v1/summary", tags=["summary"])


@router.get("", response_model=NightSummary, summary="Summary of a night (default: the latest) and configuration")
def summary_get(
    session: SessionDep,
    night: Annotated[date | None, Query(description="UTC date the runs started; default the latest")] = None,
    suite: str | None = None,
    backend: str | None = None,
    compile_mode: str | None = None,
    dtype: str | None = None,
    mode: str | None = None,
    device: str | None = None,
    thread_config: str | None = None,
    machine: str | None = None,
) -> Response:
    filters = ConfigFilter(suite=suite, backend=backend, compile_mode=compile_mode, dtype=dtype, mode=mode,
                           device=device, thread_config=thread_config, machine=machine)
    return json_response(night_summary(session, filters, night))


@router.get("/runs/{run_id}", response_model=NightSummary, summary="Summary of one run with its previous night")
def summary_of_run(session: SessionDep, run_id: int) -> Response:
    found = run_summary(session, run_id)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no run {run_id}")
    return json_response(found)
