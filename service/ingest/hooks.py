"""Running the post-ingest hooks (detection, reports): callables ``hook(session, run_id)`` that run after the run has
committed, each in its own transaction; a failing hook is reported, it never undoes the ingest. The app factory and
the CLI take their list from :func:`service.hooks.post_ingest_hooks`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db import database_unavailable
from service.locks import LockSpace, holding
from service.models import Run

logger = logging.getLogger(__name__)

PostIngestHook = Callable[[Session, int], None]


# Runs whose hooks are retried by one ingest: enough for the runs of a night that met a database outage.
PENDING_HOOKS_BATCH = 50


def run_hooks(session: Session, run_ids: Sequence[int], hooks: Sequence[PostIngestHook]) -> list[str]:
    """Run the hooks for each run, each in its own transaction, and clear the run's ``hooks_pending``. A run whose
    hook failed because the database went away stays pending (the next ingest or `perfdash detect` retries it); any
    other failure is reported and not retried.

    Another process (a replica, `perfdash detect`) may be running the hooks of the same runs or of other runs of
    their configurations: the hooks run holding their configurations' locks (service.locks), and only for the runs
    still pending once they are held, so each run's hooks run once and one configuration's runs are never detected
    by two processes at once."""
    if not run_ids:
        return []
    try:
        configurations = set(session.scalars(sa.select(Run.configuration_id).where(Run.id.in_(list(run_ids)))))
        session.commit()  # nothing of ours open while waiting for another process's hooks
        with holding(session.get_bind(), LockSpace.RUN_HOOKS, configurations):
            pending = set(session.scalars(sa.select(Run.id).where(Run.id.in_(list(run_ids)), Run.hooks_pending)))
            session.commit()
            return _run_hooks_held(session, [run_id for run_id in run_ids if run_id in pending], hooks)
    except Exception as exc:
        if not database_unavailable(exc):
            raise
        try:
            session.rollback()
        except sa.exc.SQLAlchemyError:  # the connection is gone; the session starts over on its next use
            session.close()
        logger.warning("post-ingest hooks of runs %s deferred: database unavailable", list(run_ids))
        return [f"hooks on run {run_id}: database unavailable; retried on the next ingest" for run_id in run_ids]


def _run_hooks_held(session: Session, run_ids: Sequence[int], hooks: Sequence[PostIngestHook]) -> list[str]:
    errors: list[str] = []
    # A hook with ``for_runs`` (detection: service.detection.night) takes an upload's runs at once, to spread them
    # over the cores; it commits each run itself and returns one outcome a run (run_id, error, unavailable).
    batched = [hook for hook in hooks if hasattr(hook, "for_runs")] if len(run_ids) > 1 else []
    deferred = {run_id for hook in batched for run_id in _run_batch_hook(session, hook, run_ids, errors)}
    for run_id in run_ids:
        unavailable = run_id in deferred
        for hook in hooks:
            if any(hook is b for b in batched):
                continue
            try:
                hook(session, run_id)
                session.commit()
            except Exception as exc:  # a hook never undoes an ingest; its failure is reported to the client
                name = getattr(hook, "__name__", hook)
                if database_unavailable(exc):  # expected during an outage: retried later, no traceback
                    unavailable = True
                    logger.warning("post-ingest hook %s for run %s deferred: database unavailable", name, run_id)
                    errors.append(f"{name} on run {run_id}: database unavailable; retried on the next ingest")
                else:
                    logger.exception("post-ingest hook %s failed for run %s", name, run_id)
                    # a database error's text quotes SQL and values: the log has it, the client gets its kind
                    reason = f"database error ({type(exc).__name__})" if isinstance(exc, sa.exc.SQLAlchemyError) \
                        else str(exc)
                    errors.append(f"{name} on run {run_id}: {reason}")
                try:
                    session.rollback()
                except sa.exc.SQLAlchemyError:  # the connection is gone; the session starts over on its next use
                    session.close()
        if unavailable:
            continue
        try:
            session.execute(sa.update(Run).where(Run.id == run_id).values(hooks_pending=False))
            session.commit()
        except Exception as exc:
            session.rollback()
            if not database_unavailable(exc):
                raise
    return errors


def _run_batch_hook(session: Session, hook: PostIngestHook, run_ids: Sequence[int], errors: list[str]) -> set[int]:
    """Run a hook's ``for_runs`` over ``run_ids``; its failures go to ``errors``; returns the runs to retry later."""
    name = getattr(hook, "__name__", hook)
    try:
        outcomes = hook.for_runs(session, run_ids)  # type: ignore[attr-defined]  # run_hooks checked it has one
    except Exception as exc:  # the batch as a whole failed (the pool, the database): every run, as one hook would
        try:
            session.rollback()
        except sa.exc.SQLAlchemyError:
            session.close()
        unavailable = database_unavailable(exc)
        if not unavailable:
            logger.exception("post-ingest hook %s failed for runs %s", name, list(run_ids))
        reason = "database unavailable; retried on the next ingest" if unavailable else (
            f"database error ({type(exc).__name__})" if isinstance(exc, sa.exc.SQLAlchemyError) else str(exc))
        errors.extend(f"{name} on run {run_id}: {reason}" for run_id in run_ids)
        return set(run_ids) if unavailable else set()
    deferred = set()
    for outcome in outcomes:
        if outcome.error is None:
            continue
        if outcome.unavailable:
            deferred.add(outcome.run_id)
            logger.warning("post-ingest hook %s for run %s deferred: database unavailable", name, outcome.run_id)
            errors.append(f"{name} on run {outcome.run_id}: database unavailable; retried on the next ingest")
        else:
            errors.append(f"{name} on run {outcome.run_id}: {outcome.error}")
    return deferred


def pending_hook_runs(session: Session, limit: int = PENDING_HOOKS_BATCH) -> list[int]:
    """Runs stored but not yet through their hooks, oldest first."""
    return list(session.scalars(sa.select(Run.id).where(Run.hooks_pending).order_by(Run.id).limit(limit)))
