"""Postgres advisory locks: what lets several service processes (replicas, `perfdash ingest`, `perfdash detect`,
`perfdash db upgrade`) share one database without doing one thing twice or tripping over each other's inserts.

Each lock is a pair (space, key) of 32-bit integers, Postgres' two-argument form: the space says what is locked
(:class:`LockSpace`), the key which one (a configuration id, or a stable hash of a text key such as a configuration's
content key). Whoever takes several takes them in one sorted order, so two processes never wait on each other in a
circle. SQLite (the embedded default, one process) takes none: there is nobody to lock out.

- ``INGEST_*``: transaction locks taken by an upload before it reads what is stored
  (service.ingest.store.store_runs): two uploads of the same run store it once, two uploads that bring the same new
  machine, configuration or series create it once. Released by the upload's commit.
- ``RUN_HOOKS``: session locks, one per configuration, held while a process runs the post-ingest hooks
  (detection) of that configuration's runs (service.ingest.hooks.run_hooks): a run is detected once, and the runs of one
  configuration are never detected by two processes at once (detection reads and writes a configuration's history,
  baselines and findings). A process that dies lets go of them with its connection; its runs stay pending.
- ``MIGRATION``: one session lock around `perfdash db upgrade` (service.migrate): replicas that start together
  migrate once, the others wait and find the schema at head.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from enum import IntEnum

import sqlalchemy as sa
from sqlalchemy.orm import Session


class LockSpace(IntEnum):
    """The first argument of every perfdash advisory lock (a value no other application on the database should use:
    0x7064 is "pd")."""

    MIGRATION = 0x70640001
    INGEST_MACHINE = 0x70640002
    INGEST_CONFIGURATION = 0x70640003
    RUN_HOOKS = 0x70640004


def text_key(text: str) -> int:
    """A stable signed 32-bit key for a text (a collision only makes two unrelated uploads wait on each other)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "big", signed=True)


def _is_postgres(bind: sa.Engine | sa.Connection) -> bool:
    return bind.dialect.name == "postgresql"


def lock_for_transaction(session: Session, locks: Iterable[tuple[LockSpace, int]]) -> None:
    """Wait for and take these transaction-scoped locks (released at commit or rollback), in sorted order."""
    bind = session.get_bind()
    if not _is_postgres(bind):
        return
    for space, key in sorted(set(locks)):
        session.execute(sa.select(sa.func.pg_advisory_xact_lock(int(space), key)))


@contextmanager
def holding(bind: sa.Engine | sa.Connection, space: LockSpace, keys: Iterable[int]) -> Iterator[None]:
    """Hold session locks on ``keys`` of ``space`` for the block, on a connection of their own (an Engine's sessions
    give their connection back at every commit); taken in sorted order, waiting for each, released after the
    block. A session bound to one connection (the tests' rolled-back transaction) locks on that connection."""
    wanted = sorted({int(k) for k in keys})
    if not _is_postgres(bind) or not wanted:
        yield
        return
    own = isinstance(bind, sa.Engine)
    connection = bind.connect() if isinstance(bind, sa.Engine) else bind
    try:
        for key in wanted:
            connection.execute(sa.select(sa.func.pg_advisory_lock(int(space), key)))
            if own:
                connection.commit()  # session locks outlive the transaction; no transaction left open beside them
        yield
    finally:
        try:
            for key in wanted:
                connection.execute(sa.select(sa.func.pg_advisory_unlock(int(space), key)))
            if own:
                connection.commit()
        except sa.exc.SQLAlchemyError:
            if own:  # never back into the pool with a lock on it: closing the connection ends its locks
                connection.invalidate()
            raise
        finally:
            if own:
                connection.close()
