"""`perfdash ingest PATH...`: into DATABASE_URL directly, or posted to a service with --url."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections import defaultdict
from pathlib import Path

from perfdash.contract import ContractError

_PATTERNS = ("*.csv", "*_manifest.json", "*_samples.jsonl")


def collect(paths: list[str]) -> dict[Path, dict[str, bytes]]:
    """Result files grouped by directory (one directory may hold several runs; two directories may hold files of
    the same name, which are different runs)."""
    found: dict[Path, dict[str, bytes]] = defaultdict(dict)
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted({f for pattern in _PATTERNS for f in path.rglob(pattern) if f.is_file()})
        elif path.is_file():
            files = [path]
        else:
            raise FileNotFoundError(f"{raw}: no such file or directory")
        for file in files:
            found[file.parent.resolve()][file.name] = file.read_bytes()
    return dict(found)


def run_ingest(args: argparse.Namespace) -> int:
    from service.settings import Settings

    settings = Settings()
    try:
        groups = collect(args.paths)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not groups:
        print("error: no result files found", file=sys.stderr)
        return 2
    if args.url:
        return _post(args, settings, groups)
    return _direct(args, settings, groups)


def _direct(args: argparse.Namespace, settings, groups: dict[Path, dict[str, bytes]]) -> int:
    from sqlalchemy import exc as sa_exc

    from service.db import InputRejected, make_engine, make_session_factory
    from service.hooks import post_ingest_hooks
    from service.ingest import IngestConflict, IngestDefaults, bundles_from_files, database_unavailable, ingest
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
    engine = make_engine(settings.database_url)
    try:
        with make_session_factory(engine)() as session:
            report = ingest(session, bundles, post_ingest_hooks(settings))
    except (IngestConflict, InputRejected) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except sa_exc.SQLAlchemyError as exc:
        # the database's own message quotes SQL and values: one line saying what kind of failure it was
        what = "unavailable" if database_unavailable(exc) else f"refused the upload ({type(exc).__name__})"
        print(f"error: database {what}; nothing was stored", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    for run in report.runs:
        state = "stored" if run.created else "already stored"
        print(f"run {run.run_id} {state}: {run.suite} {run.backend}, {run.models} models")
    for error in report.hook_errors:
        print(f"warning: post-ingest hook failed: {error}", file=sys.stderr)
    return 0


def _post(args: argparse.Namespace, settings, groups: dict[Path, dict[str, bytes]]) -> int:
    import httpx

    from service.client import Rejected, Upload, load_spooled, post_upload, reject_spooled, spool, spooled

    token = args.token or next(iter(settings.ingest_token_list), "")
    if not token:
        print("error: --url needs --token (or PERFDASH_INGEST_TOKENS)", file=sys.stderr)
        return 2
    status = 0
    # Older uploads first, so the service sees nights in order.
    for entry in spooled(settings.spool_dir):
        try:
            _report(post_upload(args.url, token, load_spooled(entry), attempts=args.retries), f"spooled {entry.name}")
            shutil.rmtree(entry)
        except Rejected as exc:
            print(f"error: spooled upload {entry.name} refused ({exc}); moved to {reject_spooled(entry)}",
                  file=sys.stderr)
            status = 1
        except (httpx.HTTPError, OSError) as exc:
            print(f"warning: service still unreachable ({exc}); {entry.name} stays spooled", file=sys.stderr)
            break
    for directory, files in sorted(groups.items()):
        form = {k: v for k, v in {
            "machine": args.machine, "commit": args.commit, "torch_version": args.torch_version,
            "timestamp": args.timestamp.isoformat() if args.timestamp else None}.items() if v}
        upload = Upload(files=files, form=form)
        try:
            _report(post_upload(args.url, token, upload, attempts=args.retries), str(directory))
        except Rejected as exc:
            print(f"error: {directory}: {exc}", file=sys.stderr)
            status = 1
        except httpx.HTTPError as exc:
            where = spool(settings.spool_dir, upload)
            print(f"warning: service unreachable ({exc}); spooled to {where}, retried on the next ingest",
                  file=sys.stderr)
            status = status or 3
    return status


def _report(body: dict, what: str) -> None:
    for run in body.get("runs", []):
        state = "stored" if run["created"] else "already stored"
        print(f"{what}: run {run['run_id']} {state}: {run['suite']} {run['backend']}, {run['models']} models")
    for error in body.get("hook_errors", []):
        print(f"warning: post-ingest hook failed: {error}", file=sys.stderr)
