"""`perfdash ingest PATH...` into DATABASE_URL directly (with --url the files are posted: perfdash.post_cli)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfdash.contract import ContractError
from perfdash.resultfiles import collect, default_timestamp, named_by_flags


def run_ingest(args: argparse.Namespace) -> int:
    from service.settings import Settings

    settings = Settings()
    try:
        groups = named_by_flags(args, collect(args.paths))
    except (FileNotFoundError, ContractError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not groups:
        print("error: no result files found", file=sys.stderr)
        return 2
    return _direct(args, settings, groups)


def _direct(args: argparse.Namespace, settings, groups: dict[Path, dict[str, bytes]]) -> int:
    from service.db import make_engine, make_session_factory
    from service.hooks import post_ingest_hooks
    from service.ingest import IngestConflict, IngestDefaults, bundles_from_files, ingest
    from service.migrate import current_heads, upgrade

    if not current_heads(settings.database_url):  # a fresh database (the embedded SQLite default): create it
        upgrade(settings.database_url)
    bundles = []
    try:
        for directory, files in sorted(groups.items()):
            defaults = IngestDefaults(machine=args.machine, commit=args.commit, torch_version=args.torch_version,
                                      timestamp=args.timestamp or default_timestamp(directory, files))
            bundles += bundles_from_files(files, defaults)
    except ContractError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    engine = make_engine(settings.database_url)
    try:
        with make_session_factory(engine)() as session:
            report = ingest(session, bundles, post_ingest_hooks(settings))
    except IngestConflict as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    for run in report.runs:
        state = "stored" if run.created else "already stored"
        print(f"run {run.run_id} {state}: {run.suite} {run.backend}, {run.models} models")
    for notice in report.notices:
        print(f"note: {notice}")
    for error in report.hook_errors:
        print(f"warning: post-ingest hook failed: {error}", file=sys.stderr)
    return 0
