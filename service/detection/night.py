"""Detection of many runs at once, on every core: an upload of a night's runs (the post-ingest hook), `perfdash
detect` over the latest run of each configuration (a whole night) or over every run (a backfill).

A night of PyTorch's matrix is 276 runs, ~0.3 s of CPU each (issue 31): one core cannot detect it within the
nightly's 60 s, two can. The runs of different configurations are independent: every rule reads and writes only its
own configuration's history, baselines and findings (service.detection.detector: ``up_to``, ``_baselines``, the
suite geomean of the configuration, a finding's key names its run or its change point), so the work is split by
configuration and each configuration's runs stay together, in the order given (oldest first: an incremental search
relies on the earlier runs of its series having been detected), on one worker. Two workers therefore never write
rows of one configuration, which is what keeps the unique constraints (``uq_change_points_identity``, a finding's
``key``, one confirm request per finding) free of races, and what makes the findings the same as a serial pass's.

Each worker is a process (the search is Python and numpy: threads would share one core) with its own engine and
session, and commits each run as the hook does. SQLite (the ``make run`` default) stays serial: one writer at a
time, and a handful of runs.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.orm import Session

from perfdash import logs

logger = logging.getLogger(__name__)

# Below this many runs a pool's start (a process importing the detector, ~1.5 s of CPU) costs more than it saves.
MIN_PARALLEL_RUNS = 8
# Work handed out in this many batches per worker: small enough that the last batches even out the workers' ends,
# large enough that each batch's engine and connection (one per batch) cost nothing beside its runs.
BATCHES_PER_WORKER = 4


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What detection did for one run: the new findings' ids, or why it failed (``unavailable``: the database went
    away, retry later; otherwise the run is not retried, as service.ingest.hooks.run_hooks does for any hook)."""

    run_id: int
    new_findings: tuple[int, ...] = ()
    error: str | None = None
    unavailable: bool = False
    cpu_s: float = 0.0  # the CPU time of the run's detection in the process that detected it (bench/detection_speed)


def default_workers() -> int:
    """The cores this process may use (a container's CPU set, not the host's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def workers_for(bind: sa.Engine | sa.Connection, runs: int, requested: int | None = None) -> int:
    """How many processes detect ``runs`` runs: 1 on SQLite, for a few runs, or when the session is bound to a
    connection of its own (its commits may be savepoints inside a transaction other connections cannot see);
    otherwise ``requested`` or every core."""
    if isinstance(bind, sa.Connection) or bind.dialect.name != "postgresql" or runs < MIN_PARALLEL_RUNS:
        return 1
    return max(1, min(requested or default_workers(), runs))


def streams(session: Session, run_ids: Sequence[int]) -> list[list[int]]:
    """``run_ids`` split by configuration, each part in the order given (the unit one worker detects in order)."""
    from service.models import Run

    configuration_of: dict[int, int] = dict(session.execute(
        sa.select(Run.id, Run.configuration_id).where(Run.id.in_(list(run_ids)))).all())
    parts: dict[int | None, list[int]] = defaultdict(list)
    for run_id in run_ids:
        parts[configuration_of.get(run_id)].append(run_id)  # an unknown run: its own part, reported by detect_run
    return list(parts.values())


def batches(parts: Sequence[Sequence[int]], count: int) -> list[list[int]]:
    """``parts`` dealt into at most ``count`` batches of about equal runs, the largest parts first; a part is never
    split."""
    out: list[list[int]] = [[] for _ in range(min(count, len(parts)))]
    for part in sorted(parts, key=len, reverse=True):
        min(out, key=len).extend(part)
    return [b for b in out if b]


def detect_one(session: Session, run_id: int, incremental: bool, keep: bool = True) -> RunOutcome:
    """detect_run and commit (``keep``; else roll back: a measurement), a failure rolled back and reported (the hook's
    contract: it never raises)."""
    from service.db import database_unavailable
    from service.detection.detector import detect_run

    start = time.process_time()
    try:
        report = detect_run(session, run_id, incremental=incremental)
        session.commit() if keep else session.rollback()
        return RunOutcome(run_id, report.new_findings, cpu_s=time.process_time() - start)
    except Exception as exc:
        unavailable = database_unavailable(exc)
        if not unavailable:
            logger.exception("detection failed for run %s", run_id)
        # a database error's text quotes SQL and values: the log has it, the outcome its kind
        reason = f"database error ({type(exc).__name__})" if isinstance(exc, sa.exc.SQLAlchemyError) else str(exc)
        try:
            session.rollback()
        except sa.exc.SQLAlchemyError:  # the connection is gone; the session starts over on its next use
            session.close()
        return RunOutcome(run_id, error=reason, unavailable=unavailable)


def _detect_batch(url: str, run_ids: Sequence[int], incremental: bool, keep: bool) -> list[RunOutcome]:
    """A worker's share: its own engine and session, each run committed on its own."""
    from service.db import make_engine, make_session_factory

    engine = make_engine(url)
    try:
        with make_session_factory(engine)() as session:
            return [detect_one(session, run_id, incremental, keep) for run_id in run_ids]
    finally:
        engine.dispose()


def detect_runs(session: Session, run_ids: Sequence[int], *, incremental: bool, workers: int | None = None,
                keep: bool = True) -> list[RunOutcome]:
    """Detect each run (committed one by one), the configurations spread over ``workers`` processes (default: every
    core; see :func:`workers_for`). Outcomes in the order of ``run_ids``. The caller's session must have committed
    what the runs need: the workers read through connections of their own. ``keep=False`` rolls each run's detection
    back instead (bench/detection_speed times a night again and again)."""
    bind = session.get_bind()
    count = workers_for(bind, len(run_ids), workers)
    parts = streams(session, run_ids) if count > 1 else []
    if count <= 1 or len(parts) <= 1 or isinstance(bind, sa.Connection):  # a Connection: count is 1 (workers_for)
        return [detect_one(session, run_id, incremental, keep) for run_id in run_ids]
    session.commit()  # nothing of ours open while the workers write (the caller committed what matters)
    url = bind.url.render_as_string(hide_password=False)
    work = batches(parts, count * BATCHES_PER_WORKER)
    # forkserver, not fork: a fork would copy this process's open connections (and the API's threads), and a child
    # closing an inherited socket ends the parent's session on the server
    # (a fresh process: it logs as this one does, with the request's id, only if handed the setup: perfdash.logs)
    with ProcessPoolExecutor(max_workers=min(count, len(work)), mp_context=multiprocessing.get_context("forkserver"),
                             initializer=logs.configure_child, initargs=logs.for_child()) as pool:
        done = {o.run_id: o for f in [pool.submit(_detect_batch, url, b, incremental, keep) for b in work]
                for o in f.result()}
    return [done[run_id] for run_id in run_ids]


@dataclass(frozen=True, slots=True)
class DetectionHook:
    """The post-ingest hook (service.hooks): incremental detection for every newly stored run; an upload of many runs
    (a night's) is detected on ``workers`` processes (service.ingest.hooks.run_hooks calls ``for_runs``)."""

    workers: int | None = None
    __name__ = "detection_hook"  # what run_hooks names in a failure

    def __call__(self, session: Session, run_id: int) -> None:
        from service.detection.detector import detection_hook

        detection_hook(session, run_id)

    def for_runs(self, session: Session, run_ids: Sequence[int]) -> list[RunOutcome]:
        return detect_runs(session, run_ids, incremental=True, workers=self.workers)
