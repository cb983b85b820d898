"""`perfdash db backup FILE` and `perfdash db restore FILE`: Postgres' own pg_dump and pg_restore underneath, in
pg_dump's custom format (compressed, restorable table by table, read by pg_restore only).

The backup is the whole database (schema, Alembic's revision, every row), taken in one snapshot while the service
keeps serving. A restore goes into an empty database (created by the operator, or the compose file's fresh volume),
in one transaction: it either lands whole or leaves the database empty. A backup of an older revision is brought
to this code's schema afterwards by `perfdash db upgrade` (docs/operations.md: backup, restore, upgrade).

No SQLite: its database is one file, copied with the service stopped (or `sqlite3 perfdash.db .backup FILE`).
The password never goes on a command line (other users see those): libpq reads it from PGPASSWORD.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

# What a custom-format archive starts with (pg_dump's magic bytes).
CUSTOM_FORMAT_MAGIC = b"PGDMP"


class BackupError(RuntimeError):
    """What stopped a backup or a restore, in words an operator can act on."""


@dataclass(frozen=True, slots=True)
class LibpqTarget:
    """A SQLAlchemy Postgres URL as libpq takes it: a connection URI without the password, and the password apart."""

    uri: str
    password: str | None
    shown: str  # the URL with its password hidden, for messages

    @classmethod
    def from_url(cls, database_url: str) -> LibpqTarget:
        try:
            url = sa.make_url(database_url)
        except sa.exc.ArgumentError:
            raise BackupError("DATABASE_URL is not a database URL") from None
        if url.get_backend_name() != "postgresql":
            raise BackupError(f"{url.get_backend_name()} database ({url.render_as_string(hide_password=True)}): "
                              "backup and restore are for Postgres (pg_dump, pg_restore); an SQLite database is one "
                              "file: stop the service and copy it, or run `sqlite3 FILE .backup COPY`")
        bare = url.set(drivername="postgresql", password=None)
        return cls(uri=bare.render_as_string(hide_password=False),
                   password=None if url.password is None else str(url.password),
                   shown=url.render_as_string(hide_password=True))

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.password is not None:
            env["PGPASSWORD"] = self.password
        return env


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BackupError(f"{name} not found on PATH: install Postgres' client tools (Debian: postgresql-client, of "
                          "the server's major version or newer)")
    return found


def _run(command: list[str], target: LibpqTarget, what: str) -> None:
    done = subprocess.run(command, env=target.env(), capture_output=True, text=True)
    if done.returncode != 0:
        said = done.stderr.strip()
        if target.password:
            said = said.replace(target.password, "***")
        raise BackupError(f"{what} of {target.shown} failed (exit {done.returncode}): {said[-2000:]}")


def backup(database_url: str, file: Path) -> int:
    """Dump the database into ``file`` (custom format), written beside it and renamed into place when complete, so
    ``file`` is never a half-written archive; returns its size in bytes."""
    target = LibpqTarget.from_url(database_url)
    pg_dump = _tool("pg_dump")
    partial = file.with_name(file.name + ".partial")
    try:
        _run([pg_dump, "--format=custom", "--no-owner", "--no-privileges", f"--file={partial}",
              f"--dbname={target.uri}"], target, "pg_dump")
        partial.replace(file)
    finally:
        partial.unlink(missing_ok=True)
    return file.stat().st_size


def restore(database_url: str, file: Path) -> None:
    """Restore ``file`` (a `perfdash db backup`) into the database, which must be empty, in one transaction."""
    target = LibpqTarget.from_url(database_url)
    pg_restore = _tool("pg_restore")
    if not file.is_file():
        raise BackupError(f"no backup file {file}")
    with file.open("rb") as archive:
        if archive.read(len(CUSTOM_FORMAT_MAGIC)) != CUSTOM_FORMAT_MAGIC:
            raise BackupError(f"{file} is not a pg_dump custom-format archive (`perfdash db backup` writes one)")
    tables = _tables(database_url)
    if tables:
        raise BackupError(f"{target.shown} is not empty ({len(tables)} tables, e.g. {sorted(tables)[0]}): restore "
                          "into a new, empty database (createdb), then point DATABASE_URL at it")
    _run([pg_restore, "--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction",
          f"--dbname={target.uri}", str(file)], target, "pg_restore")


def _tables(database_url: str) -> list[str]:
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool, connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as connection:
            return sa.inspect(connection).get_table_names()
    except sa.exc.OperationalError as exc:
        reason = " ".join(str(getattr(exc, "orig", exc)).split())[:300]
        raise BackupError(f"cannot connect to {engine.url.render_as_string(hide_password=True)}: {reason}") from None
    finally:
        engine.dispose()
