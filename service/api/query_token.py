"""A token in the URL is refused, and kept out of the access log.

A URL is written down everywhere: uvicorn's access log, a proxy's, the browser's history. So a request whose query
string carries a token-like parameter (``?token=``, ``?access_token=``, RFC 6750's query form) is answered 400,
saying to send it in the ``Authorization: Bearer`` header, whatever the route; it is never compared with the
configured tokens. The parameter's value is masked in the request's own scope before anything else sees it: uvicorn
writes its access-log line from that same scope (as its ProxyHeadersMiddleware rewrites ``client`` in place), so the
line says ``token=***``.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.errors import send_json

SECRET_PARAMETERS = frozenset({"token", "access_token"})
MASK = "***"


def masked_query(query: bytes) -> bytes | None:
    """The query string with every secret parameter's value masked, or None when it holds none."""
    text = query.decode("latin-1")
    pairs = parse_qsl(text, keep_blank_values=True)
    if not any(name.lower() in SECRET_PARAMETERS for name, _value in pairs):
        return None
    return urlencode([(name, MASK if name.lower() in SECRET_PARAMETERS else value) for name, value in pairs],
                     safe="*").encode("latin-1", errors="replace")


class RefuseTokenInQuery:
    """Pure ASGI middleware, outermost of the app's own: 400 for a token in the query string, its value masked."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope.get("query_string"):
            await self.app(scope, receive, send)
            return
        masked = masked_query(scope["query_string"])
        if masked is None:
            await self.app(scope, receive, send)
            return
        scope["query_string"] = masked  # in place: the access log reads this scope
        await send_json(send, 400, "a token in the URL is refused (URLs are logged): send it in the header "
                                   "'Authorization: Bearer <token>'")
