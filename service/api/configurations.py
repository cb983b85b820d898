"""/api/v1/configurations: the configurations that have runs (the dashboard's filter choices)."""

from __future__ import annotations

from fastapi import APIRouter

from service.db import SessionDep
from service.queries.filters import ConfigFilter
from service.queries.runs import list_configurations
from service.queries.schemas import ConfigurationOut

router = APIRouter(prefix="/api/v1/configurations", tags=["configurations"])


@router.get("", response_model=list[ConfigurationOut], summary="List configurations")
def configurations_list(session: SessionDep, suite: str | None = None, backend: str | None = None,
                        dtype: str | None = None, mode: str | None = None, device: str | None = None,
                        machine: str | None = None) -> list[ConfigurationOut]:
    return list_configurations(session, ConfigFilter(suite=suite, backend=backend, dtype=dtype, mode=mode,
                                                     device=device, machine=machine))
