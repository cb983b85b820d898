"""The API's documentation pages, served offline: ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), from the files the
``fastapi-offline`` package ships (Swagger UI and ReDoc's standalone bundles), mounted at ``/docs/assets``.

FastAPI's own pages load both from a CDN, which an offline deployment cannot reach; and its Swagger page starts with
an inline script, which a policy without 'unsafe-inline' scripts blocks. Here each page loads only the service's files
(Swagger UI is started by /static/js/swagger-init.js) under a policy of its own, :data:`CONTENT_SECURITY_POLICY`.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from starlette.staticfiles import StaticFiles

ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
ASSETS_PATH = "/docs/assets"
# ReDoc's side menu shows Redocly's logo from their CDN whatever its options say: the bundle is served with that one
# URL replaced by an empty one (the image then fails, and ReDoc hides it), so the page asks nothing of elsewhere.
REDOC_BUNDLE = "redoc.standalone.js"
REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
REDOC_PATH = "/docs/redoc.js"

# What the two pages need and nothing from elsewhere: scripts and styles from the service (Swagger UI and ReDoc also
# set inline styles), the OpenAPI document and "Try it out" requests to the service, SVG icons as data: URLs, and
# ReDoc's search index, which runs in a worker it makes from a blob: URL.
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                           "img-src 'self' data:; font-src 'self'; connect-src 'self'; worker-src 'self' blob:; "
                           "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")

router = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)


def _page(title: str, head: str, body: str) -> HTMLResponse:
    html = (f'<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{escape(title)}</title>\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<link rel="icon" href="data:,">\n'
            f'{head}</head>\n<body>\n{body}</body>\n</html>\n')
    return HTMLResponse(html, headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY})


@router.get("/docs")
def swagger_ui(request: Request) -> HTMLResponse:
    openapi = escape(request.scope.get("root_path", "") + request.app.openapi_url)
    return _page(f"{request.app.title} API · Swagger UI",
                 f'<link rel="stylesheet" href="{ASSETS_PATH}/swagger-ui.css">\n',
                 f'<div id="swagger-ui" data-openapi-url="{openapi}"></div>\n'
                 f'<script src="{ASSETS_PATH}/swagger-ui-bundle.js"></script>\n'
                 '<script src="/static/js/swagger-init.js"></script>\n')


@router.get("/redoc")
def redoc(request: Request) -> HTMLResponse:
    openapi = escape(request.scope.get("root_path", "") + request.app.openapi_url)
    return _page(f"{request.app.title} API · ReDoc", "",
                 f'<redoc spec-url="{openapi}"></redoc>\n<script src="{REDOC_PATH}"></script>\n')


@router.get(REDOC_PATH)
def redoc_bundle(request: Request) -> Response:
    return Response(request.app.state.redoc_bundle, media_type="text/javascript",
                    headers={"Cache-Control": "public, max-age=3600"})


def install(app: FastAPI) -> None:
    """The two pages and their assets; the app must be made with ``docs_url=None, redoc_url=None``."""
    app.state.redoc_bundle = (ASSETS_DIR / REDOC_BUNDLE).read_bytes().replace(REDOC_LOGO, b"data:,")
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS_DIR), name="api-docs-assets")
    app.include_router(router)
