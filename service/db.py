"""Engine and sessions. Built by create_app()'s lifespan or a CLI handler from Settings — never at import."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

import sqlalchemy as sa
from fastapi import Depends, Request
from sqlalchemy.orm import Session, sessionmaker

from service.settings import Settings


def make_engine(url: str, *, echo: bool = False) -> sa.Engine:
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, echo=echo, connect_args={"check_same_thread": False})
        # SQLite ignores foreign keys unless asked, per connection.
        sa.event.listen(engine, "connect", lambda conn, _record: conn.execute("PRAGMA foreign_keys=ON"))
        return engine
    return sa.create_engine(url, echo=echo, pool_pre_ping=True)


def make_session_factory(engine: sa.Engine) -> sessionmaker[Session]:
    return sessionmaker(bind=engine, expire_on_commit=False)


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    """One session per request; routers commit explicitly, anything uncommitted is rolled back on close."""
    with request.app.state.session_factory() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
