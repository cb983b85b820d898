"""/api/v1/configurations: the configurations that have runs (the dashboard's filter choices)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import ConfigFilterDep, SessionDep
from service.queries.runs import list_configurations
from service.queries.schemas import ConfigurationOut

router = APIRouter(prefix="/api/v1/configurations", tags=["configurations"])


@router.get("", response_model=list[ConfigurationOut], summary="List configurations")
def configurations_list(session: SessionDep, filters: ConfigFilterDep) -> list[ConfigurationOut]:
    return list_configurations(session, filters)
