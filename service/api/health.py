"""Health routes (not in the OpenAPI document): liveness of the process, readiness of the database."""

from __future__ import annotations

import sqlalchemy as sa
from fastapi import APIRouter, Request, status
from fastapi.responses import JSONResponse
from sqlalchemy import exc as sa_exc

from service.api.errors import RETRY_AFTER_S

router = APIRouter(include_in_schema=False)


@router.get("/healthz/live")
def liveness() -> dict[str, str]:
    """The process answers (restart it if not); says nothing about the database."""
    return {"status": "ok"}


@router.get("/healthz/ready")
@router.get("/healthz")
def readiness(request: Request) -> JSONResponse:
    """Ready to serve: the database answers (a load balancer or compose stops sending traffic if not)."""
    try:
        with request.app.state.engine.connect() as connection:
            connection.execute(sa.text("SELECT 1"))
    except sa_exc.SQLAlchemyError:
        return JSONResponse(status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
                            headers={"Retry-After": str(RETRY_AFTER_S)},
                            content={"status": "unavailable", "database": "unreachable"})
    return JSONResponse({"status": "ok", "database": "ok"})
