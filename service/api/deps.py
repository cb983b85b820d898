"""Dependencies shared by routers: the ingest token check."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

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
