"""/api/v1/compare: two runs of one configuration, or two commits across configurations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response, status

from service.api.deps import ConfigFilterDep, SessionDep, json_response
from service.queries.compare import DEFAULT_THRESHOLD, NotComparable, RunComparison, compare_commits, compare_runs

router = APIRouter(prefix="/api/v1/compare", tags=["compare"])

Threshold = Annotated[float, Query(gt=0, lt=1, description="relative speedup change that counts, e.g. 0.05")]


@router.get("/runs", response_model=RunComparison, summary="Per-model deltas between two runs",
            responses={404: {"description": "no such run"}})
def compare_two_runs(session: SessionDep, base: int, new: int, threshold: Threshold = DEFAULT_THRESHOLD
                     ) -> Response:
    try:
        found = compare_runs(session, base, new, threshold)
    except NotComparable as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {base} or {new} does not exist")
    return json_response(found)


@router.get("/commits", response_model=list[RunComparison],
            summary="Per configuration with runs at both commits (or prefixes): per-model deltas")
def compare_two_commits(session: SessionDep, filters: ConfigFilterDep, base: str, new: str,
                        threshold: Threshold = DEFAULT_THRESHOLD) -> Response:
    return json_response(compare_commits(session, base, new, filters, threshold))
