"""Who may write: bearer tokens with scopes (service.settings.Scope), and the audit log of every write.

Each write route declares its scope with ``dependencies=[scoped(Scope.X)]``; tests/service/test_scopes.py walks every
route of the app, so a write route without one fails it. A token is compared with every configured token in
constant time (the time does not tell which, or whether any, matched); tokens are never logged.

The check has the route's first commit add an :class:`service.models.AuditEntry`: it is stored with the write, and not
at all when the route fails before it commits, so the log holds the writes that happened. A refused attempt (401, 403)
is stored at once as an entry of its own (``outcome`` "refused": the token's name, or whether one was presented at
all; never what was presented). What a write makes happen elsewhere (the GitHub posts of a bisection's result) is
added by the route with :func:`audit_also`. Reading the log takes the ``admin`` scope (service/api/audit.py).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import Depends, HTTPException, Request, status
from fastapi.params import Depends as DependsParam
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from service.api.deps import SessionDep, SettingsDep
from service.models import AuditEntry
from service.settings import Scope, Settings, TokenSpec

logger = logging.getLogger(__name__)

_bearer = HTTPBearer(auto_error=False, description="A token of PERFDASH_TOKENS (named, with scopes) or of "
                                                   "PERFDASH_INGEST_TOKENS (scope ingest)")

# What every scoped route answers besides its own statuses (for the OpenAPI document).
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "no token, or not a known token"},
    403: {"description": "the token lacks the route's scope (the answer names it)"},
}


@dataclass(frozen=True, slots=True)
class Actor:
    name: str
    scopes: frozenset[Scope]


def _matching(settings: Settings, presented: bytes) -> TokenSpec | None:
    found = None
    for spec in settings.token_specs:  # every one, whatever matched before
        if hmac.compare_digest(presented, spec.token.get_secret_value().encode()) and found is None:
            found = spec
    return found


def authenticate(settings: Settings, credentials: HTTPAuthorizationCredentials | None) -> Actor:
    presented = credentials.credentials.encode() if credentials is not None else b""
    spec = _matching(settings, presented) if presented else None
    if spec is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing or invalid token",
                            headers={"WWW-Authenticate": "Bearer"})
    return Actor(spec.name, spec.scopes)


def _route_template(request: Request) -> str:
    """The URL with each path parameter's segment named back (/api/v1/runs/5 -> /api/v1/runs/{run_id}): the log
    groups by route whatever the ids."""
    names = {str(value): name for name, value in request.path_params.items()}
    return "/".join(f"{{{names[s]}}}" if s in names else s for s in request.url.path.split("/"))


def _peer(request: Request) -> str:
    return (request.client.host if request.client is not None else "")[:64]


def _refuse(request: Request, session: Session, entry: AuditEntry, error: HTTPException) -> HTTPException:
    """Store the refused attempt's entry now (the request ends here, nothing else is in its session) and give back
    the error to raise. A database that cannot take it does not turn the refusal into a 500."""
    entry.outcome, entry.detail = "refused", f"{error.status_code}: {error.detail}"[:500]
    try:
        session.add(entry)
        session.commit()
    except SQLAlchemyError as exc:
        session.rollback()
        logger.warning("refused %s not in the audit log: %s", entry.action, type(exc).__name__)
    return error


def scoped(scope: Scope) -> DependsParam:
    """The dependency of a write route (and of reading the audit log): 401 without a known token, 403 naming
    ``scope`` when the token lacks it, each logged as a refused attempt; otherwise the write's audit entry is added
    to the session."""

    def require(request: Request, settings: SettingsDep, session: SessionDep,
                credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> Iterator[Actor]:
        action = f"{request.method} {_route_template(request)}"
        target = ", ".join(f"{k}={v}" for k, v in sorted(request.path_params.items()))
        entry = AuditEntry(token_name="", scope=str(scope), action=action[:120], target=target[:200], detail="",
                           outcome="done", client=_peer(request))
        try:
            actor = authenticate(settings, credentials)
        except HTTPException as error:
            entry.token_name = "(unknown token)" if credentials is not None else "(no token)"
            raise _refuse(request, session, entry, error) from None
        entry.token_name = actor.name
        if scope not in actor.scopes:
            raise _refuse(request, session, entry, HTTPException(
                status.HTTP_403_FORBIDDEN, f"this token ({actor.name}) lacks the scope '{scope}' that this request "
                                           "needs"))
        request.state.audit = entry

        def record(committing: Session) -> None:
            committing.add(entry)

        # Added by the route's first commit, in the transaction of its write: a route that fails before it commits
        # wrote nothing and leaves no entry (not even flushed by a query's autoflush).
        sa.event.listen(session, "before_commit", record, once=True)
        try:
            yield actor
        finally:
            if sa.event.contains(session, "before_commit", record):
                sa.event.remove(session, "before_commit", record)

    require.required_scope = scope  # type: ignore[attr-defined]  # read by the route walk of the tests
    return Depends(require)


def audit_detail(request: Request, detail: str) -> None:
    """Say what a write did (e.g. the runs an upload created) in its audit entry; call before the commit."""
    entry = getattr(request.state, "audit", None)
    if entry is not None:
        entry.detail = detail[:500]


def audit_also(request: Request, session: Session, action: str, target: str, detail: str) -> None:
    """An entry of its own, under the request's token, for what its write made happen after its commit (a GitHub
    post); added to ``session``, the caller commits."""
    entry = getattr(request.state, "audit", None)
    if entry is None:
        return
    session.add(AuditEntry(token_name=entry.token_name, scope=entry.scope, action=action[:120], target=target[:200],
                           detail=detail[:500], outcome="done", client=entry.client))


IngestScope = scoped(Scope.INGEST)
BisectScope = scoped(Scope.BISECT)
AdminScope = scoped(Scope.ADMIN)
