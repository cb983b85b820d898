"""The FastAPI application factory. The engine and hooks are made in the lifespan (startup), not at import.

Settings come from the caller (``perfdash serve`` hands it those ``perfdash.cli.main`` read; tests build their own).
Only :func:`app_from_environment`, uvicorn's factory for worker processes, reads them from the environment itself.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import sqlalchemy as sa
from fastapi import FastAPI, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException

from perfdash.contract import ContractError
from service.api import annotations, audit, bisections, compare, configurations, findings, history, runs, summary
from service.api import releases as releases_api
from service.api import training as training_api
from service.api.contract import AllowHeader, document_errors
from service.api.errors import RETRY_AFTER_S, ErrorBoundary, RejectNulBytes, ascii_json
from service.api.limits import BodySizeLimit
from service.db import InputRejected, make_engine, make_session_factory
from service.ingest import IngestConflict, PostIngestHook, database_unavailable
from service.settings import Settings
from service.web import install as install_web

# allocations between young collections while the app runs (Python's default: 700)
YOUNG_COLLECTION_THRESHOLD = 10_000


def app_from_environment(post_ingest_hooks: Sequence[PostIngestHook] | None = None) -> FastAPI:
    """The app with the settings of the environment: uvicorn's factory where worker processes import the app by name
    (``perfdash serve --workers N``; ``uvicorn service.app:app_from_environment --factory``), each at its startup.
    The one place the app reads the environment."""
    return create_app(Settings(), post_ingest_hooks)


def create_app(settings: Settings, post_ingest_hooks: Sequence[PostIngestHook] | None = None) -> FastAPI:
    """Build the app with ``settings``; ``post_ingest_hooks`` default to :func:`service.hooks.post_ingest_hooks`."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from service.hooks import post_ingest_hooks as default_hooks

        engine = make_engine(settings.database_url, echo=settings.sql_echo)
        app.state.settings = settings
        app.state.engine = engine
        app.state.session_factory = make_session_factory(engine)
        app.state.post_ingest_hooks = list(post_ingest_hooks if post_ingest_hooks is not None
                                           else default_hooks(settings))
        # What exists now (modules, routes, schemas: a few hundred thousand objects) lives as long as the app. Left
        # in the collector's oldest generation, every full collection walks it again, and a request that builds a
        # 3-year history stalled by ~90 ms each time one ran (bench/service.py: suite history p95 122 ms, 23 ms
        # frozen). Frozen, full collections only walk what requests made.
        gc.collect()
        gc.freeze()
        # A 3-year Model page makes tens of thousands of objects that die with the request; at Python's default
        # threshold (700) that was ~8 young and ~1 middle collection a request and a full one every ~15: 2.4-3.4 ms
        # of collector time a request (gc.callbacks, bench/README.md). At 10,000: 0.3-2 ms, one collection every few
        # requests.
        thresholds = gc.get_threshold()
        gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *thresholds[1:])
        try:
            yield
        finally:
            engine.dispose()
            gc.set_threshold(*thresholds)
            gc.unfreeze()

    app = FastAPI(title="perfdash", version="1", lifespan=lifespan,
                  description="Nightly performance of torch.compile: runs, summaries, history, comparisons.")
    app.add_middleware(BodySizeLimit)
    app.add_middleware(AllowHeader)
    app.add_middleware(RejectNulBytes)
    app.add_middleware(ErrorBoundary)  # added last: the outermost of ours, so it sees every other one's exception
    for module in (runs, summary, history, compare, configurations, annotations, findings, bisections, releases_api,
                   training_api, audit):
        app.include_router(module.router)
    install_web(app)  # HTML pages and /static (service/web)

    @app.exception_handler(ContractError)
    async def contract_error(_request: Request, exc: ContractError) -> Response:
        # ASCII: a file name or field may hold any text the upload carried
        return ascii_json(status.HTTP_422_UNPROCESSABLE_CONTENT, {"detail": {
            "message": exc.message, "file": exc.file, "line": exc.line, "column": exc.column, "error": str(exc)}})

    # FastAPI's own handlers echo the input and encode with ensure_ascii=False: a lone surrogate in a body (JSON's
    # "\ud800") then fails to encode and the 422 became a 500. These answer the same, without the input, in ASCII.
    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> Response:
        errors = [{k: e.get(k) for k in ("loc", "msg", "type")} for e in exc.errors()]
        return ascii_json(status.HTTP_422_UNPROCESSABLE_CONTENT, {"detail": errors})

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code < 200 or exc.status_code in (204, 205, 304):  # statuses that carry no body
            return Response(status_code=exc.status_code, headers=exc.headers)
        return ascii_json(exc.status_code, {"detail": exc.detail}, exc.headers)

    @app.exception_handler(IngestConflict)
    async def conflict(_request: Request, exc: IngestConflict) -> JSONResponse:
        return JSONResponse(status_code=status.HTTP_409_CONFLICT, content={"detail": str(exc)})

    def rejected(message: str) -> JSONResponse:
        return JSONResponse(status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
                            content={"detail": {"message": message, "file": None, "line": None, "column": None}})

    @app.exception_handler(InputRejected)
    async def input_rejected(_request: Request, exc: InputRejected) -> JSONResponse:
        return rejected(str(exc))

    @app.exception_handler(sa_exc.StatementError)
    async def statement_error(_request: Request, exc: sa_exc.StatementError) -> Response:
        # The contract checks what it can name a line for; this is the backstop (e.g. a value longer than its
        # column). The database's own message quotes SQL and values, so it stays in the log.
        if isinstance(exc.orig, InputRejected):
            return rejected(str(exc.orig))
        if isinstance(exc, sa_exc.DataError):
            return rejected("a value does not fit the database (too long or out of range)")
        if database_unavailable(exc):
            return JSONResponse(status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
                                headers={"Retry-After": str(RETRY_AFTER_S)},
                                content={"detail": "database unavailable; retry later"})
        raise exc

    @app.exception_handler(sa_exc.IntegrityError)
    async def integrity_error(_request: Request, _exc: sa_exc.IntegrityError) -> JSONResponse:
        # two uploads creating the same run, machine or series at once: the loser rolled back; a retry finds the
        # winner's rows (503 + Retry-After, so `perfdash ingest --url` retries it like any transient failure)
        return JSONResponse(status_code=status.HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": "1"},
                            content={"detail": "a concurrent upload stored the same rows; retry"})

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes)
            schema.setdefault("components", {}).setdefault("schemas", {}).update(runs.openapi_components())
            app.openapi_schema = document_errors(schema)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get("/healthz/live", include_in_schema=False)
    def liveness() -> dict[str, str]:
        """The process answers (restart it if not); says nothing about the database."""
        return {"status": "ok"}

    @app.get("/healthz/ready", include_in_schema=False)
    @app.get("/healthz", include_in_schema=False)
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

    return app
