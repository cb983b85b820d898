"""The dashboard's HTML pages and their static files. ``install(app)`` is all create_app() needs to call."""

from __future__ import annotations

import time

from fastapi import FastAPI, Request, Response
from starlette.middleware.base import RequestResponseEndpoint
from starlette.staticfiles import StaticFiles

from service.web.templating import STATIC_DIR, build_templates

# Pages load scripts and styles only from the app itself (no CDN, works offline); no inline script can run, so even
# an unescaped stored string could not execute. Inline styles stay allowed: ECharts positions its tooltip with them.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                           "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")


def install(app: FastAPI) -> None:
    from service.web.backends import router as backends_router
    from service.web.bisections import router as bisections_router
    from service.web.pages import router
    from service.web.releases import router as releases_router
    from service.web.training import router as training_router
    from service.web.vision import router as vision_router

    app.state.web_templates = build_templates()
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.include_router(router)
    app.include_router(vision_router)
    app.include_router(backends_router)
    app.include_router(training_router)
    app.include_router(releases_router)
    app.include_router(bisections_router)

    @app.middleware("http")
    async def page_headers(request: Request, call_next: RequestResponseEndpoint) -> Response:
        started = time.perf_counter()
        response = await call_next(request)
        if response.headers.get("content-type", "").startswith("text/html"):
            response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
            # Server time of the page (queries + rendering), shown by browsers' dev tools and read by bench/pages.py.
            response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
        return response
