"""`perfdash summary`: a night's summary from DATABASE_URL as a table, PyTorch-style markdown, or JSON."""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from perfdash.axes import SummaryScope, summary_group
from perfdash.metric_registry import SUMMARY_METRICS
from perfdash.metrics import SuiteSummary
from service.queries.summary import NightSummary, SummaryRow

if TYPE_CHECKING:
    from service.settings import Settings


def _groups(summary: NightSummary) -> dict[str, list[SummaryRow]]:
    """The night's rows by their group (perfdash.axes.SummaryScope.CLI), each under its section title, in order."""
    groups: dict[tuple[tuple[str, Any], ...], list[SummaryRow]] = defaultdict(list)
    for row in summary.rows:
        groups[summary_group(row.run.configuration, SummaryScope.CLI)].append(row)
    return {_section(rows[0]): rows for rows in groups.values()}


def _section(row: SummaryRow) -> str:
    """A group's title: its values of the axes that split the CLI's summary and its machine."""
    c = row.run.configuration
    parts = [c.device, c.dtype, c.mode, c.thread_config, f"compile mode {c.compile_mode}", c.machine.fingerprint]
    if c.batch_size_override is not None:
        parts.append(f"batch size {c.batch_size_override}")
    if c.dynamic_shapes:
        parts.append("dynamic shapes")
    return ", ".join(parts)


def tables(summary: NightSummary) -> list[tuple[str, list[tuple[str, list[str], list[list[str]]]]]]:
    """[(section, [(metric title, header, rows)])]: per configuration group, one table per metric with compilers as
    rows and suites as columns, as PyTorch's executive summary."""
    out = []
    for section, rows in _groups(summary).items():
        suites = list(dict.fromkeys(r.run.configuration.suite for r in rows))
        compilers = list(dict.fromkeys(r.run.configuration.backend_variant for r in rows))
        cell = {(r.run.configuration.backend_variant, r.run.configuration.suite): r for r in rows}
        metric_tables = []
        for metric in SUMMARY_METRICS:
            body = []
            for compiler in compilers:
                values = []
                for suite in suites:
                    found = cell.get((compiler, suite))
                    summary_out = found.run.summary if found else None
                    values.append(SuiteSummary.of(summary_out).text_of(metric) if summary_out else "")
                body.append([compiler, *values])
            metric_tables.append((metric.pytorch_title, ["Compiler", *suites], body))
        out.append((section, metric_tables))
    return out


def markdown(summary: NightSummary) -> str:
    if summary.night is None:
        return "No runs.\n"
    lines = [f"## Executive Summary — {summary.night.isoformat()} ##", ""]
    for section, metric_tables in tables(summary):
        lines += [f"### {section}", ""]
        for title, header, body in metric_tables:
            lines += [title, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            lines += ["| " + " | ".join(row) + " |" for row in body]
            lines.append("")
    return "\n".join(lines)


def _print_table(summary: NightSummary) -> None:
    """One compact table per configuration group: a row per suite x compiler, the previous night beside."""
    from rich.console import Console
    from rich.table import Table

    # Piped output (a log, a CI step) gets the full width instead of an 80-column squeeze.
    console = Console() if sys.stdout.isatty() else Console(width=160)
    if summary.night is None:
        console.print("No runs.")
        return
    for section, rows in _groups(summary).items():
        table = Table(title=f"{summary.night.isoformat()}: {section}", title_justify="left")
        for name in ("Suite", "Compiler", "Run", "Torch", "Passrate", "Geomean", "Unclipped", "Compile s", "Memory",
                     "Previous passrate", "Previous geomean"):
            table.add_column(name, justify="left" if name in ("Suite", "Compiler", "Torch") else "right",
                             no_wrap=name == "Torch")
        for row in rows:
            now, before = row.run.summary, row.previous.summary if row.previous else None
            table.add_row(row.run.configuration.suite, row.run.configuration.backend_variant, str(row.run.id),
                          _torch(row),
                          *((now.passrate_text, now.geomean_speedup_text, now.geomean_speedup_unclipped_text,
                             now.compile_time_text, now.compression_text) if now else ("",) * 5),
                          before.passrate_text if before else "-", before.geomean_speedup_text if before else "-")
        console.print(table)


def _torch(row: SummaryRow) -> str:
    """The run's torch; ``old -> new`` when the previous run measured another (a release-to-release comparison)."""
    now = row.run.torch_version or "?"
    before = row.previous.torch_version if row.previous else None
    return f"{before} -> {now}" if before and before != now else now


def run_summary(args: argparse.Namespace, settings: Settings) -> int:
    from service.db import session_scope
    from service.migrate import current_heads
    from service.queries.filters import ConfigFilter
    from service.queries.summary import night_summary, run_summary

    if not current_heads(settings.database_url):
        print("error: the database has no schema yet; run `perfdash db upgrade` (or ingest something)",
              file=sys.stderr)
        return 1
    with session_scope(settings) as session:
        if args.run is not None:
            summary = run_summary(session, args.run)
            if summary is None:
                print(f"error: no run {args.run}", file=sys.stderr)
                return 1
        else:
            filters = ConfigFilter(suite=args.suite, backend=args.backend, dtype=args.dtype, mode=args.mode,
                                   device=args.device)
            summary = night_summary(session, filters, args.night, with_warnings=True)  # JSON output lists them
    if args.format == "json":
        print(summary.model_dump_json(indent=2))
    elif args.format == "markdown":
        print(markdown(summary))
    else:
        _print_table(summary)
    return 0
