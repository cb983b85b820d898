"""/api/v1/releases: torch versions, and what changed between two of them across configurations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response, status

from service.api.deps import ConfigFilterDep, SessionDep, json_response
from service.queries.releases import DEFAULT_LIMIT, LATEST, ReleaseComparison, compare_versions, versions

router = APIRouter(prefix="/api/v1/releases", tags=["releases"])


Limit = Annotated[int, Query(ge=1, le=100_000, description="model rows returned, by impact; counts cover all")]


@router.get("/versions", response_model=list[str], summary="Torch versions with runs, newest first")
def list_versions(session: SessionDep, filters: ConfigFilterDep) -> list[str]:
    return versions(session, filters)


@router.get("/compare", response_model=ReleaseComparison,
            summary="Per configuration and model: changes between the last runs of two torch versions",
            responses={404: {"description": "no runs of a version in this selection"}})
def compare(session: SessionDep, filters: ConfigFilterDep,
            base: Annotated[str, Query(min_length=1, max_length=64, description="torch version, e.g. 2.5.0")],
            new: Annotated[str, Query(min_length=1, max_length=64,
                                      description=f"torch version, or {LATEST!r}: each configuration's latest run")],
            limit: Limit = DEFAULT_LIMIT, include_unchanged: bool = False) -> Response:
    known = set(versions(session, filters))
    missing = [v for v in (base, new) if v != LATEST and v not in known]
    if missing:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no runs of torch {', '.join(missing)} in this selection")
    return json_response(compare_versions(session, base, new, filters, limit=limit,
                                          include_unchanged=include_unchanged))
