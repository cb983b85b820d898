"""`perfdash detect` and `perfdash report`: detection over the stored history, and the nightly report (optionally
posted to GitHub with one issue per confirmed regression). Registration imports nothing heavy."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for annotations only: registration must not import SQLAlchemy
    from service.alerts.workflow import ReportPosting


def register(subparsers: argparse._SubParsersAction) -> None:
    detect = subparsers.add_parser(
        "detect", help="find status changes and performance change points in DATABASE_URL, store them as findings",
        description="Runs detection for the latest run of every configuration (or --run, or --all runs oldest "
                    "first, for a backfill). Idempotent: what is already stored is not found again. Without --all the "
                    "whole history since each series' last change is searched; with --all each run searches only "
                    "its newest window, as the post-ingest hook does.")
    target = detect.add_mutually_exclusive_group()
    target.add_argument("--run", type=int, help="one run id")
    target.add_argument("--all", action="store_true", help="every stored run, oldest first")
    detect.add_argument("--workers", type=int, help="processes detecting configurations side by side (default: "
                        "PERFDASH_DETECTION_WORKERS, else every core; SQLite: always 1)")
    detect.set_defaults(handler=_detect, reads_settings=True)

    report = subparsers.add_parser(
        "report", help="the nightly report (markdown, PyTorch dashboard-comment layout); --post to GitHub",
        description="Renders the report of the night and configuration scope of --run (default: the latest run). "
                    "--post comments it on PERFDASH_REPORT_ISSUE in GITHUB_REPOSITORY (edited in place if it was "
                    "posted before and changed), files one issue per confirmed regression, and first retries "
                    "whatever earlier runs could not post. Exit 0 also when GitHub is down (kept for the next "
                    "run); 1 when GitHub refused a post (a permission, a wrong issue number).")
    report.add_argument("--run", type=int, help="run id (default: the latest run)")
    report.add_argument("--output", type=Path, help="write the markdown here instead of stdout")
    report.add_argument("--post", action="store_true", help="post to GitHub (GITHUB_TOKEN, GITHUB_REPOSITORY, "
                                                            "PERFDASH_REPORT_ISSUE, GITHUB_API_URL)")
    report.set_defaults(handler=_report, reads_settings=True)


def _detect(args: argparse.Namespace) -> int:
    from service.db import session_scope
    from service.detection.night import detect_runs
    from service.hooks import post_ingest_hooks
    from service.ingest.hooks import pending_hook_runs, run_hooks
    from service.models import Finding, Run
    from service.queries.detection import runs_to_detect

    settings = args.settings
    with session_scope(settings) as session:
        # runs an ingest stored but could not run detection for (the database went away after the commit)
        pending = pending_hook_runs(session, limit=10_000)
        if pending:
            errors = run_hooks(session, pending, post_ingest_hooks(settings))
            print(f"{len(pending)} run(s) whose post-ingest hooks had not run: hooks run")
            for error in errors:
                print(f"warning: post-ingest hook failed: {error}", file=sys.stderr)
        run_ids = [args.run] if args.run is not None else runs_to_detect(session, all_runs=args.all)
        if args.run is not None and session.get(Run, args.run) is None:
            print(f"error: no run {args.run}", file=sys.stderr)
            return 1
        outcomes = detect_runs(session, run_ids, incremental=args.all,
                               workers=args.workers or settings.detection_workers)
        total = 0
        for outcome in outcomes:
            if outcome.error is not None:
                print(f"error: run {outcome.run_id}: {outcome.error}", file=sys.stderr)
            total += len(outcome.new_findings)
            for finding_id in outcome.new_findings:
                finding = session.get(Finding, finding_id)
                assert finding is not None
                print(f"run {outcome.run_id}: #{finding.id} {finding.category}: {finding.configuration.suite} "
                      f"{finding.configuration.backend_variant}: {finding.summary}")
        print(f"{len(run_ids)} run(s) examined, {total} new finding(s)")
    return 1 if any(o.error is not None for o in outcomes) else 0


def _report(args: argparse.Namespace) -> int:
    import sqlalchemy as sa

    from service.alerts.workflow import post_report
    from service.db import session_scope
    from service.detection.report import build_report, render_report
    from service.models import Run
    from service.queries.order import run_order

    settings = args.settings
    with session_scope(settings) as session:
        run_id = args.run or session.scalar(sa.select(Run.id).order_by(*run_order(newest_first=True)).limit(1))
        if run_id is None:
            print("error: no runs stored", file=sys.stderr)
            return 1
        try:
            context = build_report(session, run_id, settings.dashboard_url)
        except LookupError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        body = render_report(context)
        if args.output is not None:
            args.output.write_text(body, encoding="utf-8")
        else:
            sys.stdout.write(body)
        if args.post:
            return _print_posting(post_report(session, settings, night=context.night, scope_key=context.scope_key,
                                              body=body, run_ids=context.run_ids))
    return 0


def _print_posting(posting: ReportPosting) -> int:
    """What `report --post` got through, for the person or the job reading it; exit 1 when it needs a person."""
    if posting.refusal is not None:
        print(f"error: --post: {posting.refusal}", file=sys.stderr)
        return 1
    for row in posting.failed:
        level = "error" if row.status == "refused" else "warning"
        print(f"{level}: GitHub {row.kind} {row.key} not posted, kept for the next run: {row.last_error}",
              file=sys.stderr)
    report = posting.report
    assert report is not None
    print(f"report {'posted' if report.status == 'posted' else 'NOT posted'}: {report.html_url or '-'}",
          file=sys.stderr)
    # An outage is retried by the next run on its own; a refusal (a permission, a wrong issue) needs a person.
    refused = [row for row in posting.failed if row.status == "refused"]
    if refused:
        print(f"error: GitHub refused {len(refused)} post(s): fix the token's permissions or the settings",
              file=sys.stderr)
        return 1
    return 0
