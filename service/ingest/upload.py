"""One upload from end to end: its runs stored in one transaction (service.ingest.store), committed, then the
post-ingest hooks (service.ingest.hooks). The API and `perfdash ingest` both call :func:`ingest`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from service.db import database_unavailable
from service.ingest.bundle import RunBundle
from service.ingest.hooks import PostIngestHook, pending_hook_runs, run_hooks
from service.ingest.store import IngestedRun, store_runs


@dataclass(frozen=True, slots=True)
class IngestReport:
    runs: tuple[IngestedRun, ...]
    hook_errors: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()
    hook_runs: int = 0  # runs the post-ingest hooks (detection) ran for: the new ones and earlier pending ones
    hooks_s: float = 0.0  # their wall time (the /metrics endpoint's detection time)


def ingest(session: Session, bundles: Sequence[RunBundle], hooks: Sequence[PostIngestHook] = ()) -> IngestReport:
    """Store every run of an upload in one transaction (all or nothing), commit, then run the post-ingest hooks for
    the new runs and for runs an earlier ingest could not finish (the database went away after its commit)."""
    try:
        stored = tuple(store_runs(session, bundles))
        session.commit()
    except BaseException:
        session.rollback()
        raise
    new = [run.run_id for run in stored if run.created]
    try:
        earlier = [run_id for run_id in pending_hook_runs(session) if run_id not in new]
    except Exception as exc:
        session.rollback()
        if not database_unavailable(exc):
            raise
        earlier = []
    started = time.perf_counter()
    errors = run_hooks(session, [*earlier, *new], hooks)
    return IngestReport(runs=stored, hook_errors=tuple(errors), notices=tuple(n for b in bundles for n in b.notices),
                        hook_runs=len(earlier) + len(new) if hooks else 0, hooks_s=time.perf_counter() - started)
