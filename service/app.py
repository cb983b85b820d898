"""The FastAPI application factory. The engine and hooks are made in the lifespan (startup), not at import. What
an error answers is service/api/handlers.py, the OpenAPI document service/api/contract.py, the health routes
service/api/health.py.

Settings come from the caller (``perfdash serve`` hands it those ``perfdash.cli.main`` read; tests build their own).
Only :func:`app_from_environment`, uvicorn's factory for worker processes, reads them from the environment itself.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI

from perfdash import logs

# not `annotations`: the name of this module's `from __future__` feature
from service.api import annotations as annotations_api
from service.api import (
    audit,
    bisections,
    compare,
    configurations,
    findings,
    health,
    history,
    runs,
    summary,
)
from service.api import noise as noise_api
from service.api import releases as releases_api
from service.api import training as training_api
from service.api.contract import AllowHeader, install_openapi
from service.api.docs import install as install_api_docs
from service.api.errors import ErrorBoundary, RejectNulBytes
from service.api.handlers import install_error_handlers
from service.api.limits import BodySizeLimit
from service.api.query_token import RefuseTokenInQuery
from service.db import make_engine, make_session_factory
from service.ingest.hooks import PostIngestHook
from service.prometheus import ServiceMetrics
from service.prometheus import router as metrics_router
from service.queries.noise import FiguresCache
from service.request_log import RequestLog
from service.settings import Settings
from service.web import install as install_web

# allocations between young collections while the app runs (Python's default: 700)
YOUNG_COLLECTION_THRESHOLD = 10_000


def app_from_environment(post_ingest_hooks: Sequence[PostIngestHook] | None = None) -> FastAPI:
    """The app with the settings of the environment: uvicorn's factory where worker processes import the app by name
    (``perfdash serve --workers N``; ``uvicorn service.app:app_from_environment --factory``), each at its startup.
    The one place the app reads the environment. A worker process logs in the service's format from here on, before
    uvicorn's own first lines ("Started server process"), not only from the app's startup."""
    settings = Settings()
    logs.configure(settings.log_options)
    return create_app(settings, post_ingest_hooks)


def _lifespan(settings: Settings, post_ingest_hooks: Sequence[PostIngestHook] | None
              ) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's startup and shutdown: the engine, the session factory, the post-ingest hooks, the collector."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from service.hooks import post_ingest_hooks as default_hooks

        logs.configure(settings.log_options)  # again in each of uvicorn's worker processes (app_from_environment)
        engine = make_engine(settings.database_url, echo=settings.sql_echo)
        app.state.settings = settings
        app.state.engine = engine
        app.state.session_factory = make_session_factory(engine)
        # and after them, the summary's noise figures of the new runs (this app's own cache: warmed off the page)
        app.state.post_ingest_hooks = [*(post_ingest_hooks if post_ingest_hooks is not None
                                         else default_hooks(settings)), app.state.noise_cache.after_ingest]
        # What exists now (modules, routes, schemas: a few hundred thousand objects) lives as long as the app. Left
        # in the collector's oldest generation, every full collection walks it again, and a request that builds a
        # 3-year history stalled by ~90 ms each time one ran (bench/api_latency.py: suite history p95 122 ms, 23 ms
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

    return lifespan


def create_app(settings: Settings, post_ingest_hooks: Sequence[PostIngestHook] | None = None) -> FastAPI:
    """Build the app with ``settings``; ``post_ingest_hooks`` default to :func:`service.hooks.post_ingest_hooks`."""
    # /docs and /redoc are service.api.docs' (offline, with a policy of their own), not FastAPI's (from a CDN)
    app = FastAPI(title="perfdash", version="1", lifespan=_lifespan(settings, post_ingest_hooks),
                  docs_url=None, redoc_url=None,
                  description="Nightly performance of torch.compile: runs, summaries, history, comparisons.")
    app.add_middleware(BodySizeLimit)
    app.add_middleware(AllowHeader)
    app.add_middleware(RejectNulBytes)
    app.add_middleware(ErrorBoundary)  # outside the others, so it sees every other one's exception
    app.add_middleware(RefuseTokenInQuery)  # a token in the URL is refused, and masked before anything reads it
    # Outermost: the request id is set before anything logs, and every answer (ErrorBoundary's 500 and a refused
    # token in the URL too) is logged and counted; it logs the path, never the query.
    app.add_middleware(RequestLog)
    app.state.metrics = ServiceMetrics.create()
    app.state.noise_cache = FiguresCache()  # the summary's noise flag, read again per new run (queries/noise.py)
    for module in (runs, summary, history, noise_api, compare, configurations, annotations_api, findings, bisections,
                   releases_api, training_api, audit):
        app.include_router(module.router)
    install_web(app)  # HTML pages and /static (service/web)
    app.include_router(health.router)
    install_api_docs(app)
    app.include_router(metrics_router)
    install_error_handlers(app)
    install_openapi(app, runs.openapi_components())
    return app
