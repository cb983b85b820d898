"""Engine and sessions. Built by create_app()'s lifespan or a CLI handler from Settings — never at import. No FastAPI
here: a request's session and settings are service/api/deps.py's (SessionDep, SettingsDep)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

from service.settings import Settings


def database_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database could not be reached (retry later), not that the request was wrong. The one
    home of the database-down answer: the API's 503, the CLI's message, ingest's retry and detection's deferral."""
    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError | sa.exc.TimeoutError)


class InputRejected(ValueError):
    """A value the database cannot store faithfully (a NUL byte in text); raised before the statement is sent."""


def make_engine(url: str, *, echo: bool = False) -> sa.Engine:
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, echo=echo, connect_args={"check_same_thread": False})
        # SQLite ignores foreign keys unless asked, per connection.
        sa.event.listen(engine, "connect", lambda conn, _record: conn.execute("PRAGMA foreign_keys=ON"))
    else:
        # a bounded connect: an unreachable database is a 503 in seconds, not a request hanging on the kernel
        engine = sa.create_engine(url, echo=echo, pool_pre_ping=True, connect_args={"connect_timeout": 5})
    sa.event.listen(engine, "before_cursor_execute", _refuse_nul_bytes)
    return engine


# Text no database here stores faithfully: NUL (Postgres refuses it, psycopg2 with a bare ValueError; SQLite keeps it)
# and lone UTF-16 surrogates (JSON's "\ud800" decodes to one; UTF-8 cannot encode it).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _refuse_nul_bytes(_conn, _cursor, _statement, parameters, _context, _executemany) -> None:
    """Refuse a statement whose text parameters hold a NUL byte or a lone surrogate, on every database, before it is
    sent, whatever code path produced it."""
    rows = parameters if isinstance(parameters, list) else [parameters]
    for row in rows:
        values = row.values() if isinstance(row, dict) else (row or ())
        for value in values:
            if isinstance(value, str) and _UNSTORABLE.search(value):
                raise InputRejected("a text value holds a NUL byte or a lone surrogate")


def make_session_factory(engine: sa.Engine) -> sessionmaker[Session]:
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def session_scope(settings: Settings) -> Iterator[Session]:
    """One engine and one session for a command's whole run (a CLI handler's unit of work), the engine disposed
    after. The caller commits; anything uncommitted is rolled back on close."""
    engine = make_engine(settings.database_url, echo=settings.sql_echo)
    try:
        with make_session_factory(engine)() as session:
            yield session
    finally:
        engine.dispose()


def unavailable_message(exc: BaseException, settings: Settings) -> str | None:
    """One line for a command whose database cannot be reached (down, refusing, unknown host, failing over), naming
    the database without its password; None for any other error."""
    if not database_unavailable(exc):
        return None
    try:
        where = sa.make_url(settings.database_url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        where = "DATABASE_URL"
    origin = getattr(exc, "orig", None) or exc
    reason = " ".join(str(origin).split())[:300]
    if settings.database_url and "@" in settings.database_url:  # never the password, whatever the driver says
        password = sa.make_url(settings.database_url).password
        reason = reason.replace(str(password), "***") if password else reason
    return f"the database {where} cannot be reached ({type(origin).__name__}: {reason}); start it or check " \
           "DATABASE_URL, then run this again"



def wait_until_reachable(database_url: str, seconds: float, interval_s: float = 1.0) -> bool:
    """Whether the database accepted a connection within ``seconds`` (tried every ``interval_s``). For a migration
    started together with its database, where the orchestrator does not wait for the database's health check
    (podman before 4.6, a Kubernetes init container)."""
    engine = make_engine(database_url)
    deadline = time.monotonic() + seconds
    try:
        while True:
            try:
                with engine.connect() as connection:
                    connection.execute(sa.text("SELECT 1"))
                return True
            except sa.exc.SQLAlchemyError as exc:
                if not database_unavailable(exc) or time.monotonic() + interval_s > deadline:
                    return False
                time.sleep(interval_s)
    finally:
        engine.dispose()
