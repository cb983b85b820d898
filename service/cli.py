"""`perfdash db|ingest|summary|serve`: the service's subcommands. Registration imports nothing heavy."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from service.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    db = subparsers.add_parser("db", help="database schema (Alembic migrations)")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    upgrade = db_sub.add_parser("upgrade", help="migrate DATABASE_URL to a revision (default: head)")
    upgrade.add_argument("revision", nargs="?", default="head")
    upgrade.add_argument("--wait", type=float, default=0, metavar="SECONDS",
                         help="wait up to SECONDS for the database to accept connections first (a container started "
                              "beside its database; default: no wait)")
    upgrade.set_defaults(handler=_db_upgrade, reads_settings=True)
    downgrade = db_sub.add_parser("downgrade", help="migrate DATABASE_URL down to a revision (e.g. base)")
    downgrade.add_argument("revision")
    downgrade.set_defaults(handler=_db_downgrade, reads_settings=True)
    current = db_sub.add_parser("current", help="print the revision(s) DATABASE_URL is at")
    current.set_defaults(handler=_db_current, reads_settings=True)
    backup = db_sub.add_parser(
        "backup", help="dump DATABASE_URL (Postgres) into FILE with pg_dump, custom format",
        description="A consistent snapshot of the whole database (schema, revision, rows) while the service runs. "
                    "Restore it with `perfdash db restore FILE` into an empty database (docs/operations.md).")
    backup.add_argument("file", type=Path, metavar="FILE")
    backup.set_defaults(handler=_db_backup, reads_settings=True)
    restore = db_sub.add_parser(
        "restore", help="restore a `perfdash db backup` FILE into DATABASE_URL, which must be empty (pg_restore)",
        description="In one transaction: all of it or nothing. Then `perfdash db upgrade` brings a backup of an "
                    "older perfdash to this version's schema.")
    restore.add_argument("file", type=Path, metavar="FILE")
    restore.set_defaults(handler=_db_restore, reads_settings=True)
    compact = db_sub.add_parser(
        "compact-samples", help="drop the raw timings of old runs' results (PERFDASH_SAMPLES_KEEP_DAYS / _RUNS)",
        description="A result's raw timings (eager_ms, compiled_ms) are dropped once its run is older than "
                    "PERFDASH_SAMPLES_KEEP_DAYS days and not among the latest PERFDASH_SAMPLES_KEEP_RUNS runs of its "
                    "configuration; medians, speedups, confidence intervals and activation peaks stay. Neither set "
                    "(nor given here): nothing is dropped. Run it after each nightly (cron, the Jenkins job).")
    compact.add_argument("--keep-days", type=int, help="override PERFDASH_SAMPLES_KEEP_DAYS")
    compact.add_argument("--keep-runs", type=int, help="override PERFDASH_SAMPLES_KEEP_RUNS")
    compact.add_argument("--batch-runs", type=int, default=20, help="runs per transaction (default 20)")
    compact.add_argument("--limit-runs", type=int, help="at most this many runs in this pass")
    compact.set_defaults(handler=_db_compact_samples, reads_settings=True)

    ingest = subparsers.add_parser(
        "ingest", help="store result CSVs (PyTorch's or perfdash's) in DATABASE_URL, or post them to a service",
        description="Without --url the files go straight into DATABASE_URL; with --url they are posted to the "
                    "service (retried; spooled to PERFDASH_SPOOL_DIR when the service is unavailable and posted "
                    "first on the next invocation; an upload the service refuses is moved to the spool's rejected/ "
                    "folder and never retried; a server whose TLS certificate does not verify gets nothing, and "
                    "nothing is spooled). Exit status with --url: 5 a certificate did not verify, 1 something "
                    "refused, 4 something neither posted nor spooled, 3 something spooled, 0 all stored.")
    ingest.add_argument("paths", nargs="+", metavar="PATH", help="CSV files or directories holding them")
    ingest.add_argument("--url", help="service base URL, e.g. http://perfdash:8000")
    ingest.add_argument("--token", help="ingest token; shows in the process list: prefer --token-file or "
                                        "PERFDASH_TOKEN (default: PERFDASH_TOKEN, PERFDASH_TOKEN_FILE, then the "
                                        "first of PERFDASH_INGEST_TOKENS)")
    ingest.add_argument("--token-file", type=Path, help="file holding the ingest token (--url; default "
                                                        "$PERFDASH_TOKEN_FILE)")
    ingest.add_argument("--ca-bundle", type=Path, help="PEM file of the CA that signed the service's certificate "
                                                       "(--url https://; default $PERFDASH_CA_BUNDLE, else the "
                                                       "system's trust store)")
    ingest.add_argument("--machine", help="without a manifest: the machine (CPU model or GPU name)")
    ingest.add_argument("--commit", help="without a manifest: the torch git commit")
    ingest.add_argument("--timestamp", type=datetime.fromisoformat,
                        help="without a manifest: when the run started, ISO 8601 (default: none, the run is "
                             "keyed by its content and dated when stored)")
    ingest.add_argument("--torch-version", help="without a manifest: torch version")
    ingest.add_argument("--retries", type=int, default=4, help="attempts per upload before spooling it (--url)")
    ingest.add_argument("--max-server-errors", type=int, default=3,
                        help="5xx answers one upload may get, over all invocations, before it counts as refused "
                             "(--url)")
    naming = ingest.add_argument_group(
        "naming a run by hand", "for result files the harness named when run by hand (speedup_inductor.csv, "
        "accuracy_inductor.csv, any --output name): the run they belong to")
    naming.add_argument("--suite", help="torchbench, huggingface, timm_models or hf_vision")
    naming.add_argument("--backend", help="backend, with its variant if any (inductor_no_cudagraphs)")
    naming.add_argument("--dtype", help="float32, bfloat16, float16 or amp")
    naming.add_argument("--mode", help="inference or training")
    naming.add_argument("--device", help="cpu or cuda (default: cpu)")
    # with --url only the upload client runs (the runner images have no service settings to read)
    ingest.set_defaults(handler=_ingest, reads_settings=lambda args: not args.url)

    export = subparsers.add_parser(
        "export", help="write stored runs as PyTorch's benchmark-database JSON records (ingest reads them back)")
    export.add_argument("--format", choices=("pytorch-json",), required=True)
    export.add_argument("--run", type=int, action="append", help="a run id (repeatable; default: the latest night)")
    export.add_argument("--night", type=lambda s: datetime.fromisoformat(s).date(), help="YYYY-MM-DD, every run")
    export.add_argument("--output-dir", default=".", help="where to write {stem}_performance.json and "
                        "{stem}_accuracy.json (one run-ID folder per run when there are several)")
    export.set_defaults(handler=_export, reads_settings=True)

    summary = subparsers.add_parser("summary", help="print a night's summary (PyTorch executive-summary tables)")
    summary.add_argument("--run", type=int, help="one run (default: the latest night)")
    summary.add_argument("--night", type=lambda s: datetime.fromisoformat(s).date(), help="YYYY-MM-DD")
    for axis in ("suite", "backend", "dtype", "mode", "device"):
        summary.add_argument(f"--{axis}")
    summary.add_argument("--format", choices=("table", "markdown", "json"), default="table")
    summary.set_defaults(handler=_summary, reads_settings=True)

    serve = subparsers.add_parser("serve", help="run the service (uvicorn)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument("--no-upgrade", action="store_true", help="do not migrate DATABASE_URL to head first")
    serve.add_argument("--wait", type=float, default=0, metavar="SECONDS",
                       help="wait up to SECONDS for the database to accept connections first (default: no wait)")
    serve.set_defaults(handler=_serve, reads_settings=True)


def _db_upgrade(args: argparse.Namespace) -> int:
    from service.db import wait_until_reachable
    from service.migrate import upgrade

    if args.wait > 0 and not wait_until_reachable(args.settings.database_url, args.wait):
        print(f"error: perfdash db upgrade: the database did not accept connections within {args.wait:g} s",
              file=sys.stderr)
        return 1
    upgrade(args.settings.database_url, args.revision)
    return 0


def _db_downgrade(args: argparse.Namespace) -> int:
    from service.migrate import downgrade

    downgrade(args.settings.database_url, args.revision)
    return 0


def _db_current(args: argparse.Namespace) -> int:
    from service.migrate import current_heads

    print(" ".join(sorted(current_heads(args.settings.database_url))) or "(empty: run `perfdash db upgrade`)")
    return 0


def _db_backup(args: argparse.Namespace) -> int:
    from service.backup import BackupError, backup

    try:
        size = backup(args.settings.database_url, args.file)
    except BackupError as exc:
        print(f"error: perfdash db backup: {exc}", file=sys.stderr)
        return 1
    print(f"backed up into {args.file} ({size:,} bytes)")
    return 0


def _db_restore(args: argparse.Namespace) -> int:
    from service.backup import BackupError, restore

    try:
        restore(args.settings.database_url, args.file)
    except BackupError as exc:
        print(f"error: perfdash db restore: {exc}", file=sys.stderr)
        return 1
    print(f"restored {args.file}; now run `perfdash db upgrade` if it was taken by an older perfdash")
    return 0


def _db_compact_samples(args: argparse.Namespace) -> int:
    from service.db import make_engine, make_session_factory
    from service.retention import SamplesRetention, compact_samples

    settings = args.settings
    policy = SamplesRetention(
        keep_days=args.keep_days if args.keep_days is not None else settings.samples_keep_days,
        keep_runs=args.keep_runs if args.keep_runs is not None else settings.samples_keep_runs)
    if not policy.enabled:
        print("no retention set (PERFDASH_SAMPLES_KEEP_DAYS, PERFDASH_SAMPLES_KEEP_RUNS): raw samples are kept")
        return 0
    engine = make_engine(settings.database_url)
    try:
        done = compact_samples(make_session_factory(engine), policy, batch_runs=args.batch_runs,
                               limit_runs=args.limit_runs,
                               progress=lambda n, total, results: print(f"  {n}/{total} runs, {results:,} results",
                                                                        file=sys.stderr, flush=True))
    finally:
        engine.dispose()
    print(f"compacted the raw samples of {done.runs} runs ({done.results:,} results) in {done.seconds:.1f} s")
    return 0


def _ingest(args: argparse.Namespace) -> int:
    if args.url:  # the runner images post: only the upload client, nothing of the service
        from perfdash.post_cli import post_results

        return post_results(args)
    from service.ingest_cli import run_ingest

    return run_ingest(args, args.settings)


def _export(args: argparse.Namespace) -> int:
    from service.export_cli import run_export

    return run_export(args, args.settings)


def _summary(args: argparse.Namespace) -> int:
    from service.summary_cli import run_summary

    return run_summary(args, args.settings)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from perfdash import logs
    from service.app import create_app
    from service.db import wait_until_reachable
    from service.migrate import upgrade

    settings = args.settings
    logs.configure(settings.log_options)  # the service's format from its first line on (the app's startup again)
    tls = tls_options(settings)
    if isinstance(tls, str):
        print(f"error: perfdash serve: {tls}", file=sys.stderr)
        return 2
    if args.wait > 0 and not wait_until_reachable(settings.database_url, args.wait):
        print(f"error: perfdash serve: the database did not accept connections within {args.wait:g} s",
              file=sys.stderr)
        return 1
    if not args.no_upgrade:  # replicas starting together migrate one at a time (service.migrate)
        upgrade(settings.database_url)
    # uvicorn's own logging setup stays off (log_config=None): its lines go through perfdash.logs like every other,
    # and its access log, which prints each request's query string (a token sent as ?token= with it), is replaced by
    # service.request_log's line (the path, the status, the request id).
    quiet: dict[str, Any] = {"log_config": None, "access_log": False}
    if args.workers == 1:  # one process: the app gets the settings main() read
        uvicorn.run(create_app(settings), host=args.host, port=args.port, **tls, **quiet)
    else:  # worker processes import the factory by name; each reads the same environment at its startup
        uvicorn.run("service.app:app_from_environment", factory=True, host=args.host, port=args.port,
                    workers=args.workers, **tls, **quiet)
    return 0


class TlsOptions(TypedDict, total=False):
    """uvicorn.run's TLS arguments."""

    ssl_certfile: str
    ssl_keyfile: str


def tls_options(settings: Settings) -> TlsOptions | str:
    """uvicorn's TLS options from PERFDASH_TLS_CERT_FILE and PERFDASH_TLS_KEY_FILE (both, or neither: plain HTTP,
    for a reverse proxy in front or a loopback test), or what is wrong with them."""
    cert, key = settings.tls_cert_file, settings.tls_key_file
    if cert is None and key is None:
        return {}
    if cert is None or key is None:
        return "TLS needs both PERFDASH_TLS_CERT_FILE and PERFDASH_TLS_KEY_FILE"
    for path in (cert, key):
        if not path.is_file():
            return f"cannot read the TLS file {path}"
    return {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}
