"""`perfdash ingest PATH...` into DATABASE_URL directly (with --url the files are posted: perfdash.post_cli)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from perfdash.contract import ContractError
from perfdash.resultfiles import collect, named_by_flags

if TYPE_CHECKING:
    from service.settings import Settings


def run_ingest(args: argparse.Namespace, settings: Settings) -> int:
    try:
        groups = named_by_flags(args, collect(args.paths))
    except (FileNotFoundError, ContractError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not groups:
        print("error: no result files found", file=sys.stderr)
        return 2
    return _direct(args, settings, groups)


def _direct(args: argparse.Namespace, settings: Settings, groups: dict[Path, dict[str, bytes]]) -> int:
    from sqlalchemy import exc as sa_exc

    from service.db import InputRejected, database_unavailable, session_scope
    from service.hooks import post_ingest_hooks
    from service.ingest.files import IngestDefaults, bundles_from_files
    from service.ingest.store import IngestConflict
    from service.ingest.upload import ingest
    from service.migrate import current_heads, head_revision, upgrade

    try:
        heads = current_heads(settings.database_url)
        if not heads:  # a fresh database (the embedded SQLite default): create it
            upgrade(settings.database_url)
        elif heads != {head_revision()}:
            print(f"error: the database is at revision {', '.join(sorted(heads))}, this perfdash needs "
                  f"{head_revision()}: run `perfdash db upgrade` first; nothing was stored", file=sys.stderr)
            return 1
    except sa_exc.SQLAlchemyError as exc:
        print(f"error: database unavailable ({type(exc).__name__}); nothing was stored", file=sys.stderr)
        return 1
    bundles = []
    try:
        defaults = IngestDefaults(machine=args.machine, commit=args.commit, torch_version=args.torch_version,
                                  timestamp=args.timestamp)
    except ContractError as exc:
        print(f"error: --{(exc.file or '').replace('_', '-')}: {exc.message}", file=sys.stderr)
        return 1
    for directory, files in sorted(groups.items()):
        # without --timestamp (and a manifest) a run is keyed by its content, never by file times: a copy of the
        # same files is the same run
        try:
            bundles += bundles_from_files(files, defaults)
        except ContractError as exc:
            where = directory / exc.file if exc.file in files else exc.file
            print(f"error: {ContractError(exc.message, file=where, line=exc.line, column=exc.column)}",
                  file=sys.stderr)
            return 1
    try:
        with session_scope(settings) as session:
            report = ingest(session, bundles, post_ingest_hooks(settings))
    except (IngestConflict, InputRejected) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except sa_exc.SQLAlchemyError as exc:
        # the database's own message quotes SQL and values: one line saying what kind of failure it was
        what = "unavailable" if database_unavailable(exc) else f"refused the upload ({type(exc).__name__})"
        print(f"error: database {what}; nothing was stored", file=sys.stderr)
        return 1
    for run in report.runs:
        state = "stored" if run.created else "already stored"
        print(f"run {run.run_id} {state}: {run.suite} {run.backend}, {run.models} models")
    for notice in report.notices:
        print(f"note: {notice}")
    for error in report.hook_errors:
        print(f"warning: post-ingest hook failed: {error}", file=sys.stderr)
    return 0
