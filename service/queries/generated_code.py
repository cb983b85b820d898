"""Reads of the generated code stored per model and run (service.models.GeneratedCode): one side of a code
comparison, the kernel table of a run, the code diff between two runs, and the "same code, different time" gauge."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.orm import Session

from perfdash.code_change import CodeSide
from perfdash.generated_code import unpack_source
from perfdash.verdicts import MACHINE_CHANGE
from service.models import ChangePointRow, Finding, GeneratedCode

MAX_DIFF_LINES = 2000  # lines of a code diff shown; the rest is cut (the sources themselves are capped at ingest)


def stored_code(session: Session, run_id: int, name: str) -> GeneratedCode | None:
    return session.get(GeneratedCode, (run_id, name))


def code_side(session: Session, run_id: int, name: str) -> CodeSide | None:
    row = session.execute(sa.select(GeneratedCode.digest, GeneratedCode.kernel_digests, GeneratedCode.kernel_times)
                          .where(GeneratedCode.run_id == run_id, GeneratedCode.name == name)).first()
    if row is None:
        return None
    digest, kernels, times = row
    return CodeSide(digest=digest, kernels={str(k): str(d) for k, d in kernels},
                    times={str(t[0]): float(t[1]) for t in times})


def digests_by_run(session: Session, run_ids: Iterable[int], name: str) -> dict[int, str]:
    """run id -> code digest of one model (runs without a fingerprint left out): the model page's markers."""
    ids = list(run_ids)
    if not ids:
        return {}
    rows = session.execute(sa.select(GeneratedCode.run_id, GeneratedCode.digest)
                           .where(GeneratedCode.run_id.in_(ids), GeneratedCode.name == name))
    return {run_id: digest for run_id, digest in rows}


def code_digests(session: Session, run_ids: Iterable[int], names: Iterable[str]) -> dict[str, dict[int, str]]:
    """model -> run id -> code digest, for several models over several runs at once (runs without a fingerprint
    left out): detection's noise rule, which compares only runs of one generated code."""
    ids, models = list(run_ids), list(names)
    if not ids or not models:
        return {}
    out: dict[str, dict[int, str]] = {}
    for run_id, name, digest in session.execute(
            sa.select(GeneratedCode.run_id, GeneratedCode.name, GeneratedCode.digest)
            .where(GeneratedCode.run_id.in_(ids), GeneratedCode.name.in_(models))):
        out.setdefault(name, {})[run_id] = digest
    return out


def code_diff(session: Session, old_run: int, new_run: int, name: str) -> str | None:
    """The unified diff of the model's normalised generated code between two runs; None when either lacks it."""
    sources = session.execute(sa.select(GeneratedCode.run_id, GeneratedCode.source)
                              .where(GeneratedCode.run_id.in_((old_run, new_run)), GeneratedCode.name == name))
    by_run = {run_id: source for run_id, source in sources if source}
    if old_run not in by_run or new_run not in by_run:
        return None
    old, new = (unpack_source(by_run[r]).splitlines(keepends=True) for r in (old_run, new_run))
    lines = list(difflib.unified_diff(old, new, f"run {old_run}", f"run {new_run}", n=3))
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"... {len(lines) - MAX_DIFF_LINES} more lines cut\n"]
    return "".join(lines)


def same_code_gauge(session: Session, configuration_ids: Iterable[int] | None = None) -> dict[int, int]:
    """configuration id -> how many times a model's time moved with its generated code and environment unchanged
    (machine-change findings, one per model and change night: its speedup and latency findings are one event)."""
    events = (sa.select(Finding.configuration_id, Finding.series_id, ChangePointRow.run_id)
              .join(Finding.change_point)
              .where(Finding.category == MACHINE_CHANGE.name, Finding.series_id.is_not(None)).distinct())
    if configuration_ids is not None:
        events = events.where(Finding.configuration_id.in_(list(configuration_ids)))
    sub = events.subquery()
    rows = session.execute(sa.select(sub.c.configuration_id, sa.func.count()).group_by(sub.c.configuration_id))
    return {configuration_id: count for configuration_id, count in rows}
