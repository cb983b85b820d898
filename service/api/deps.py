"""Dependencies shared by routers: the ingest token check."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Response, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from service.db import SettingsDep

_bearer = HTTPBearer(auto_error=False, description="One of PERFDASH_INGEST_TOKENS")


def require_ingest_token(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """401 unless the bearer token is one of the configured ingest tokens (constant-time; tokens are never logged)."""
    presented = credentials.credentials.encode() if credentials is not None else b""
    # Compare against every token so the time taken does not tell which (or whether any) prefix matched.
    matched = False
    for token in settings.ingest_token_list:
        matched |= hmac.compare_digest(presented, token.encode())
    if not presented or not matched:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing or invalid ingest token",
                            headers={"WWW-Authenticate": "Bearer"})


IngestAuth = Depends(require_ingest_token)


def json_response(content: BaseModel | list[BaseModel], status_code: int = 200) -> Response:
    """Serialise a query result once. Returning the model would make FastAPI dump it, re-validate the dump against
    ``response_model`` and dump it again — most of the time of a 3-year history. ``response_model`` stays on the
    route for the OpenAPI document."""
    if isinstance(content, list):
        body = b"[" + b",".join(item.model_dump_json().encode() for item in content) + b"]"
    else:
        body = content.model_dump_json().encode()
    return Response(content=body, status_code=status_code, media_type="application/json")
