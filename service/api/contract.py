"""The API keeps its OpenAPI contract (issue 29; bench/contract.py runs schemathesis with every check against it).

- :func:`document_errors`: every status the service can answer is in the document, with its body. Any request may
  meet a 400 (a NUL byte in the URL, service/api/errors.py:RejectNulBytes; a body that is not JSON), a 422 (invalid
  parameters or body: ``{"detail": ...}``, a list of errors or one message, service/api/handlers.py) and a 503
  (the database is unavailable, with Retry-After); an operation on one resource (a path parameter) a 404; a write a
  413 (service/api/limits.py).
- :class:`AllowHeader`: a 405's ``Allow`` lists every method of the path. FastAPI's included routers answer a method
  mismatch from the first route that matched the path, so ``OPTIONS /api/v1/runs/{id}`` said ``Allow: GET`` though
  DELETE is there too.
- The bounds the database sets: no NUL in a parameter or in any free string or key of a body (NO_NUL).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import iter_route_contexts
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ERROR_SCHEMA = {
    "title": "Error",
    "type": "object",
    "required": ["detail"],
    "properties": {"detail": {"description": "a message, a list of errors (loc, msg, type) or an object naming the "
                                             "file, line and column of an upload's fault"}},
}
_ERROR_REF = {"$ref": "#/components/schemas/Error"}
_COMMON = {"400": "a NUL byte in the URL, or a body that cannot be parsed",
           "422": "invalid parameters or body",
           "503": "the database is unavailable; retry after Retry-After seconds"}
_WRITES = {"post", "put", "patch", "delete"}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ERROR_REF}}}


# What the database can hold: text without NUL (RejectNulBytes answers 400 before any handler). (An id beyond 64 bits
# just finds nothing; the offsets that reach SQL say their own maximum.)
NO_NUL = "^[^\\x00]*$"


def _bound_parameter(schema: dict[str, Any]) -> None:
    for option in schema.get("anyOf", [schema]):
        if option.get("type") == "string" and "pattern" not in option and "format" not in option \
                and "enum" not in option and "const" not in option:
            option["pattern"] = NO_NUL


def install_openapi(app: FastAPI, components: Mapping[str, Any]) -> None:
    """The app's OpenAPI document, built once on first request: FastAPI's, with ``components`` (schemas that routes
    reading their body by hand refer to) and every error documented (:func:`document_errors`)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes)
            schema.setdefault("components", {}).setdefault("schemas", {}).update(components)
            app.openapi_schema = document_errors(schema)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend its document


def _bound_strings(node: object) -> None:
    """Every free string of a body schema, and every key of a free-keyed object, says NO_NUL: the models refuse a
    NUL (perfdash.manifest.Manifest, service.ingest.payload.ResultPayload) and the database refuses what they let
    through (service/db.py), so a schema without the pattern called such a body valid."""
    if isinstance(node, list):
        for item in node:
            _bound_strings(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "string" and not {"pattern", "format", "enum", "const"} & node.keys():
        node["pattern"] = NO_NUL
    if node.get("type") == "object" and isinstance(node.get("additionalProperties"), dict) \
            and "propertyNames" not in node:
        node["propertyNames"] = {"pattern": NO_NUL}
    for key in ("properties", "$defs"):
        for child in (node.get(key) or {}).values():
            _bound_strings(child)
    for key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf", "prefixItems", "not"):
        _bound_strings(node.get(key))


def document_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the error answers every operation can give, each with the Error body (FastAPI's own 422 schema said a
    list of errors only; several routes answer one message), and the bounds the database sets on parameters."""
    schema.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for name, component in schema["components"]["schemas"].items():
        if name != "Error":
            _bound_strings(component)
    for path, item in schema.get("paths", {}).items():
        for method, operation in item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            for parameter in operation.get("parameters", []):
                _bound_parameter(parameter.get("schema", {}))
            responses = operation.setdefault("responses", {})
            wanted = dict(_COMMON)
            if "{" in path:
                wanted["404"] = "no such resource"
            if method in _WRITES:
                wanted.update({"401": "no token, or not a known token",
                               "403": "the token lacks the route's scope (the answer names it)",
                               "413": "body larger than the service's limit"})
            for code, description in wanted.items():
                described = responses.get(code, {}).get("description") or description
                responses[code] = _error(described)
            for code, response in responses.items():
                if code.startswith(("4", "5")) and "content" not in response:
                    response["content"] = {"application/json": {"schema": _ERROR_REF}}
    return schema


class AllowHeader:
    """Pure ASGI middleware: a 405 answer's Allow header names every method the path has."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._table: list[tuple[Any, frozenset[str]]] | None = None

    def _methods(self, scope: Scope) -> list[str]:
        if self._table is None:
            table: dict[str, set[str]] = {}
            for context in iter_route_contexts(scope["app"].routes):
                if context.path and context.methods:
                    table.setdefault(context.path, set()).update(context.methods)
            self._table = [(compile_path(path)[0], frozenset(methods)) for path, methods in table.items()]
        path = scope["path"]
        found: set[str] = set()
        for regex, methods in self._table:
            if regex.match(path):
                found |= methods
        return sorted(found)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_allow(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 405:
                methods = self._methods(scope)
                if methods:
                    headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"allow"]
                    headers.append((b"allow", ", ".join(methods).encode()))
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_allow)
