"""What the service answers when a request cannot be served: never a traceback, never SQL text, never a reset.

Starlette's outermost error middleware sends a 500 and then re-raises the exception for the server to log; uvicorn
answers a re-raised exception by closing the connection, so a client's next request on that keep-alive connection
failed too. :class:`ErrorBoundary` sits inside it and ends every request with a response instead: 503 + Retry-After
when the database cannot be reached (a load balancer or `perfdash ingest --url` retries), 500 otherwise, the detail
logged on the server only. :class:`RejectNulBytes` refuses a path or query string with a NUL byte (Postgres text
cannot hold one) before any handler sees it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from urllib.parse import unquote_to_bytes

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.db import database_unavailable

logger = logging.getLogger(__name__)

RETRY_AFTER_S = 5


def ascii_json(status: int, content: object, headers: Mapping[str, str] | None = None) -> Response:
    """A JSON response that any text can go into: non-ASCII (lone surrogates included) is escaped."""
    body = json.dumps(content, ensure_ascii=True, default=str).encode()
    return Response(content=body, status_code=status, headers=dict(headers or {}), media_type="application/json")


async def send_json(send: Send, status: int, detail: object, headers: dict[str, str] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class ErrorBoundary:
    """Pure ASGI middleware: an exception that escapes the app becomes a JSON 503 or 500, logged, not re-raised."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            unavailable = database_unavailable(exc)
            if unavailable:
                logger.warning("database unavailable during %s %s: %s", scope["method"], scope["path"],
                               type(exc).__name__)
            else:
                logger.exception("unhandled error during %s %s", scope["method"], scope["path"])
            if started:
                return  # the response is under way: nothing better to send than what was sent
            if unavailable:
                await send_json(send, 503, "database unavailable; retry later",
                                {"Retry-After": str(RETRY_AFTER_S)})
            else:
                await send_json(send, 500, "internal error; the server's log has the details")


class RejectNulBytes:
    """Pure ASGI middleware: 400 for a NUL byte in the path or the query string (raw or percent-encoded)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            query = unquote_to_bytes(scope.get("query_string", b"").replace(b"+", b" "))
            if b"\x00" in query or "\x00" in scope["path"]:
                await send_json(send, 400, "NUL byte in the URL")
                return
        await self.app(scope, receive, send)
