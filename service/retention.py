"""Retention of raw samples: drop the raw timings of old runs' results, keep every statistic made from them.

A result's ``samples`` (service/ingest/store.py ``_samples_json``) holds the runner's raw timings, ``eager_ms`` and
``compiled_ms`` (~100 floats, most of the row's bytes at PyTorch's matrix), beside perfdash's activation peaks. What
reads them: the speedup's confidence interval, computed once at ingest into ``speedup_ci_low``/``speedup_ci_high``;
the Model page's activation-peak history (service/queries/history.py, the two peaks, which compaction keeps); the
vision tables (service/web/vision.py: the mean or median of the timings, else the CSV's medians, which the page
then says); the run API with ``samples=true`` (which then returns what is kept). Detection, summaries, Compare,
Releases, Training, `perfdash export` and the A/B (perfbisect keeps its own samples) never read them.

The policy (service/settings.py): a run keeps its raw timings while it is younger than ``samples_keep_days`` OR
among the latest ``samples_keep_runs`` runs of its configuration and partition; with neither set nothing is dropped.
:func:`compact_samples` applies it in batches of runs, one transaction each, and marks each compacted run
(``runs.samples_compacted_at``) so the next pass skips it. Postgres reuses the freed space for the next nights after
(auto)vacuum; the files shrink only with VACUUM FULL.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from service.models import Result, Run
from service.queries.order import run_order

# The keys of a result's samples that compaction drops: the raw timings. Everything else (the activation peaks)
# stays.
RAW_SAMPLE_KEYS = ("eager_ms", "compiled_ms", "process")  # process: each pair's worker (--processes K)


@dataclass(frozen=True, slots=True)
class SamplesRetention:
    keep_days: int | None = None
    keep_runs: int | None = None

    @property
    def enabled(self) -> bool:
        return self.keep_days is not None or self.keep_runs is not None


@dataclass(frozen=True, slots=True)
class Compaction:
    runs: int  # runs compacted
    results: int  # results whose samples were rewritten
    seconds: float


def runs_to_compact(session: Session, policy: SamplesRetention, today: date) -> list[int]:
    """Ids of the runs whose raw timings the policy drops and that still have them, oldest first."""
    if not policy.enabled:
        return []
    stream = (Run.configuration_id, Run.partition_id, Run.total_partitions)
    conditions: list[sa.ColumnElement[bool]] = []
    if policy.keep_days is not None:
        conditions.append(Run.night < today - timedelta(days=policy.keep_days))
    if policy.keep_runs is not None:
        # the rank of each run in its configuration's history, newest first (run order: service/queries/order.py)
        rank = sa.func.row_number().over(partition_by=stream, order_by=run_order(newest_first=True))
        ranked = sa.select(Run.id, rank.label("rank")).subquery()
        conditions.append(Run.id.in_(sa.select(ranked.c.id).where(ranked.c.rank > policy.keep_runs)))
    query = (sa.select(Run.id).where(Run.samples_compacted_at.is_(None), *conditions)
             .order_by(Run.night, Run.id))
    return list(session.scalars(query))


def _compacted(dialect: str) -> sa.ColumnElement:
    """The samples with the raw timings removed; NULL where nothing else was stored."""
    if dialect == "postgresql":
        stripped = sa.cast(Result.samples, postgresql.JSONB).op("-")(
            sa.cast(sa.literal(list(RAW_SAMPLE_KEYS)), postgresql.ARRAY(sa.Text)))
        return sa.cast(sa.func.nullif(stripped, sa.cast(sa.literal("{}"), postgresql.JSONB)), sa.JSON)
    paths = [f"$.{key}" for key in RAW_SAMPLE_KEYS]
    return sa.func.nullif(sa.func.json_remove(Result.samples, *paths), "{}")


def compact_runs(session: Session, run_ids: list[int], now: datetime | None = None) -> int:
    """Drop the raw timings of these runs' results and mark the runs (in the session's transaction); the number
    of results rewritten."""
    if not run_ids:
        return 0
    updated = cast(sa.CursorResult, session.execute(  # an UPDATE's result: it has a rowcount
        sa.update(Result).where(Result.run_id.in_(run_ids), Result.samples.is_not(None))
        .values(samples=_compacted(session.get_bind().dialect.name)).execution_options(synchronize_session=False)))
    session.execute(sa.update(Run).where(Run.id.in_(run_ids)).values(samples_compacted_at=now or datetime.now(UTC))
                    .execution_options(synchronize_session=False))
    return updated.rowcount or 0


def compact_samples(session_factory: Callable[[], Session], policy: SamplesRetention, *, today: date | None = None,
                    batch_runs: int = 20, limit_runs: int | None = None,
                    progress: Callable[[int, int, int], None] | None = None) -> Compaction:
    """Apply ``policy``: the runs it selects, ``batch_runs`` per transaction (a night of PyTorch's matrix is 276
    runs, ~50,000 results), at most ``limit_runs`` in this pass. ``progress(done, total, results)`` after each
    batch."""
    started = time.perf_counter()
    with session_factory() as session:
        run_ids = runs_to_compact(session, policy, today or datetime.now(UTC).date())
    if limit_runs is not None:
        run_ids = run_ids[:limit_runs]
    results = 0
    for at in range(0, len(run_ids), batch_runs):
        batch = run_ids[at:at + batch_runs]
        with session_factory() as session, session.begin():
            results += compact_runs(session, batch)
        if progress is not None:
            progress(at + len(batch), len(run_ids), results)
    return Compaction(runs=len(run_ids), results=results, seconds=time.perf_counter() - started)
