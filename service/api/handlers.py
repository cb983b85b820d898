"""The app's exception handlers: what an error becomes as an answer (installed by service/app.py:create_app).

Every body is ``{"detail": ...}`` as service/api/contract.py documents it. FastAPI's own handlers echo the input and
encode with ensure_ascii=False: a lone surrogate in a body (JSON's "\\ud800") then fails to encode and the 422 became a
500; the validation and HTTP handlers here answer the same, without the input, in ASCII.
"""

from __future__ import annotations

from fastapi import FastAPI, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException

from perfdash.contract import ContractError
from service.api.errors import RETRY_AFTER_S, ascii_json
from service.db import InputRejected, database_unavailable
from service.ingest.store import IngestConflict


async def contract_error(_request: Request, exc: ContractError) -> Response:
    # ASCII: a file name or field may hold any text the upload carried
    return ascii_json(status.HTTP_422_UNPROCESSABLE_CONTENT, {"detail": {
        "message": exc.message, "file": exc.file, "line": exc.line, "column": exc.column, "error": str(exc)}})


async def validation_error(_request: Request, exc: RequestValidationError) -> Response:
    errors = [{k: e.get(k) for k in ("loc", "msg", "type")} for e in exc.errors()]
    return ascii_json(status.HTTP_422_UNPROCESSABLE_CONTENT, {"detail": errors})


async def http_error(_request: Request, exc: StarletteHTTPException) -> Response:
    if exc.status_code < 200 or exc.status_code in (204, 205, 304):  # statuses that carry no body
        return Response(status_code=exc.status_code, headers=exc.headers)
    return ascii_json(exc.status_code, {"detail": exc.detail}, exc.headers)


async def conflict(_request: Request, exc: IngestConflict) -> JSONResponse:
    return JSONResponse(status_code=status.HTTP_409_CONFLICT, content={"detail": str(exc)})


def _rejected(message: str) -> JSONResponse:
    return JSONResponse(status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
                        content={"detail": {"message": message, "file": None, "line": None, "column": None}})


async def input_rejected(_request: Request, exc: InputRejected) -> JSONResponse:
    return _rejected(str(exc))


async def statement_error(_request: Request, exc: sa_exc.StatementError) -> Response:
    # The contract checks what it can name a line for; this is the backstop (e.g. a value longer than its
    # column). The database's own message quotes SQL and values, so it stays in the log.
    if isinstance(exc.orig, InputRejected):
        return _rejected(str(exc.orig))
    if isinstance(exc, sa_exc.DataError):
        return _rejected("a value does not fit the database (too long or out of range)")
    if database_unavailable(exc):
        return JSONResponse(status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
                            headers={"Retry-After": str(RETRY_AFTER_S)},
                            content={"detail": "database unavailable; retry later"})
    raise exc


async def integrity_error(_request: Request, _exc: sa_exc.IntegrityError) -> JSONResponse:
    # two uploads creating the same run, machine or series at once: the loser rolled back; a retry finds the
    # winner's rows (503 + Retry-After, so `perfdash ingest --url` retries it like any transient failure)
    return JSONResponse(status_code=status.HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": "1"},
                        content={"detail": "a concurrent upload stored the same rows; retry"})


HANDLERS = ((ContractError, contract_error), (RequestValidationError, validation_error),
            (StarletteHTTPException, http_error), (IngestConflict, conflict), (InputRejected, input_rejected),
            (sa_exc.StatementError, statement_error), (sa_exc.IntegrityError, integrity_error))


def install_error_handlers(app: FastAPI) -> None:
    for exception, handler in HANDLERS:
        # the ignore: starlette types a handler as taking any Exception; each of these takes its own kind only
        app.add_exception_handler(exception, handler)  # type: ignore[arg-type]
