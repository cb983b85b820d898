"""/api/v1/audit: the writes made through the API and the refused attempts, by token name (service/api/auth.py
records them). Reading it takes a token of scope admin: it names every token and what each did."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from service.api.auth import AUTH_RESPONSES, AdminScope
from service.api.deps import IsoDate, SessionDep
from service.queries.audit import AuditOut, list_audit
from service.queries.filters import MAX_OFFSET

router = APIRouter(prefix="/api/v1/audit", tags=["audit"])


@router.get("", response_model=list[AuditOut], dependencies=[AdminScope], responses={**AUTH_RESPONSES},
            summary="The audit log of writes and refused attempts, newest first (scope admin)")
def audit_list(session: SessionDep,
               token_name: Annotated[str | None, Query(max_length=64, description="the token's name")] = None,
               action: Annotated[str | None, Query(max_length=120, description="part of the route, e.g. runs")] = None,
               since: Annotated[IsoDate | None, Query(description="first UTC day, inclusive")] = None,
               until: Annotated[IsoDate | None, Query(description="last UTC day, inclusive")] = None,
               outcome: Annotated[Literal["done", "refused"] | None,
                                  Query(description="writes that happened, or refused attempts (401/403)")] = None,
               limit: Annotated[int, Query(ge=1, le=1000)] = 100,
               offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0) -> list[AuditOut]:
    return list_audit(session, token_name=token_name, action=action, since=since, until=until, outcome=outcome,
                      limit=limit, offset=offset)
