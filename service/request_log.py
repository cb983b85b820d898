"""Each request's id, its one log line and its metrics.

:class:`RequestLog` (pure ASGI, the outermost middleware) takes the client's ``X-Request-ID`` when it is a plain token
(else makes one), sets it for everything the request logs (perfdash.logs.REQUEST_ID: the handlers, the threads they
use, the detection workers an upload starts), answers it in the ``X-Request-ID`` header, and logs one line when the
response is sent: method, path, status, milliseconds. The line names the path and never the query string (a token
sent as ``?token=`` would be in it); uvicorn's own access log, which prints it, is off (service.cli). The same
moment counts the request in the app's metrics (service.prometheus.ServiceMetrics.observe_request).
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from perfdash.logs import REQUEST_ID
from service.prometheus import app_route

logger = logging.getLogger("service.requests")

HEADER = "X-Request-ID"
# What a client's id may be: what proxies and load balancers make (UUIDs, hex, base64url), nothing that could break a
# log line or a header.
CLIENT_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# Probes (a load balancer, Prometheus) every few seconds: their lines at DEBUG, not among the requests people make.
QUIET_PATHS = ("/healthz", "/metrics")


def request_id(scope: Scope) -> str:
    """The client's ``X-Request-ID`` if it is a plain token, else a new one."""
    given = dict(scope["headers"]).get(HEADER.lower().encode(), b"").decode("latin-1")
    return given if CLIENT_ID.fullmatch(given) else uuid.uuid4().hex


class RequestLog:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id(scope)
        token = REQUEST_ID.set(rid)
        own_route = app_route(scope)  # before routing: a mount rewrites the scope's paths
        started = time.perf_counter()
        status = 500  # what the client gets if nothing is sent (the server's error middleware answers)

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message)[HEADER] = rid
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            path = scope["path"]
            quiet = path.startswith(QUIET_PATHS)
            seconds = time.perf_counter() - started
            scope["app"].state.metrics.observe_request(scope, status, seconds, own_route)
            ms = seconds * 1000
            logger.log(logging.DEBUG if quiet else logging.INFO, "%s %s %d %.1f ms", scope["method"], path, status,
                       ms, extra={"method": scope["method"], "path": path, "status": status,
                                  "duration_ms": round(ms, 1)})
            REQUEST_ID.reset(token)
