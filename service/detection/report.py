"""The nightly report: markdown in the layout of PyTorch's dashboard comment, rendered from templates/report.md.j2.

A report covers one *scope* of one night: the runs that share the values of the axes that split the report
(perfdash.axes.SummaryScope.REPORT: dtype, mode, device, thread config, compile mode, dynamic shapes, batch-size
override) and machine (one table column per suite, one row per backend), exactly what PyTorch's comment shows under
one title. (The dashboard's home page groups more coarsely, SummaryScope.PAGE; the two are different groupings,
hence different names.) Numbers come from the stored run summaries (computed at ingest with perfdash.metrics) and the
stored findings.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import jinja2
from markupsafe import Markup
from sqlalchemy.orm import Session

from perfdash import verdicts
from perfdash.axes import SummaryScope, summary_group
from perfdash.code_change import describe
from perfdash.metric_registry import RESULT_METRICS, SUMMARY_METRICS, ResultMetric, shown_metrics
from perfdash.metrics import SuiteSummary
from perfdash.verdicts import REGRESSION, ConfirmationState, category
from service.github import safe
from service.models import Configuration, Finding, Run, RunSummary
from service.queries.detection import (
    MissingConfiguration,
    missing_configurations,
    open_findings_of,
    result_rows_of,
    results_by_series,
    runs_of_night,
)
from service.queries.generated_code import same_code_gauge
from service.queries.order import previous_run

TEMPLATES = Path(__file__).resolve().parent.parent.parent / "templates"
TEMPLATE = "report.md.j2"


@dataclass(frozen=True, slots=True)
class Cell:
    text: str
    delta: str  # change against the previous run, "" when there is none


@dataclass(frozen=True, slots=True)
class MetricTable:
    title: str
    suites: list[str]
    rows: list[tuple[str, list[Cell]]]  # (compiler, one cell per suite)


@dataclass(frozen=True, slots=True)
class ReportModelRow:
    name: str
    batch_size: int
    accuracy: str
    speedup: str
    previous_speedup: str
    change: str
    values: dict[str, float | None]  # every metric of perfdash.metric_registry by name, as measured


@dataclass(frozen=True, slots=True)
class SuiteDetail:
    suite: str
    compiler: str
    run_id: int
    models: list[ReportModelRow]
    metrics: tuple[ResultMetric, ...]  # the table's columns after the speedup


@dataclass
class ReportContext:
    title: str
    night: date
    scope: str  # the scope's label
    scope_key: str
    machine: str
    hosts: list[str]
    torch_version: str | None
    commit: str | None
    previous_commit: str | None
    suite_versions: dict[str, str]
    commands: list[str]
    jenkins_urls: list[str]
    dashboard_url: str | None
    run_ids: list[int]
    tables: list[MetricTable] = field(default_factory=list)
    warnings: list[tuple[str, str, str]] = field(default_factory=list)  # (suite, model, reason)
    regressions: list[Finding] = field(default_factory=list)  # confirmed (or needing no confirmation)
    suspected: list[Finding] = field(default_factory=list)  # candidates awaiting (or failing) their A/B
    not_reproduced: list[Finding] = field(default_factory=list)
    improvements: list[Finding] = field(default_factory=list)
    new_failures: list[Finding] = field(default_factory=list)
    fixed: list[Finding] = field(default_factory=list)
    environment: list[Finding] = field(default_factory=list)  # environment changes: one finding each
    models_dropped: list[Finding] = field(default_factory=list)
    # same code, same environment, different time (perfdash.code_change): no issue; and the gauge, all
    # such events of these configurations so far
    machine_changes: list[Finding] = field(default_factory=list)
    noise_changes: list[Finding] = field(default_factory=list)  # a spread that jumped, the median held: no issue
    same_code_count: int = 0
    missing: list[MissingConfiguration] = field(default_factory=list)
    details: list[SuiteDetail] = field(default_factory=list)

    @property
    def marker(self) -> str:
        """A hidden HTML comment in the body: finds our own comment again if the ledger lost track of it."""
        return f"<!-- perfdash:report:{self.night.isoformat()}:{self.scope_key} -->"


# The order the report's group was hashed in when the scope keys already posted were made (the ledger's keys, the
# comments' markers): a key must not change, so the parts keep it; an axis that comes to split the report goes last.
_SCOPE_KEY_ORDER = ("dtype", "mode", "device", "thread_config", "compile_mode", "dynamic_shapes", "batch_size",
                    "machine")


def report_scope_key(configuration: Configuration) -> str:
    """The report's group of a configuration (perfdash.axes.SummaryScope.REPORT and the machine), hashed."""
    group = dict(summary_group(configuration, SummaryScope.REPORT))
    parts = [str(group.pop(name)) for name in _SCOPE_KEY_ORDER] + [str(value) for value in group.values()]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]


def _scope_label(c: Configuration) -> str:
    parts = [c.device, c.mode, c.thread_config, f"compile mode {c.compile_mode}"]
    if c.dynamic_shapes:
        parts.append("dynamic shapes")
    if c.batch_size_override is not None:
        parts.append(f"batch size {c.batch_size_override}")
    return ", ".join(parts)


def _thread_title(c: Configuration) -> str:
    if c.device == "cuda":
        return f"{c.mode} on {c.machine.gpu_name or 'GPU'}"
    if c.threads == 1:
        return "single-thread"
    return "multiple-threads" if c.threads is None else f"{c.threads} threads"


def _summary(session: Session, run: Run) -> SuiteSummary | None:
    # By primary key, not run.summary: a Run loaded before its summary was added would still say None.
    s = session.get(RunSummary, run.id)
    return SuiteSummary.of(s) if s is not None else None


def _delta(now: float | None, before: float | None, fmt: str) -> str:
    if now is None or before is None:
        return ""
    diff = now - before
    return "" if abs(diff) < 1e-12 else format(diff, fmt)


def _details(session: Session, run: Run, previous: Run | None) -> SuiteDetail:
    results = result_rows_of(session, run.id)
    before = results_by_series(session, previous.id) if previous is not None else {}
    rows = []
    for r in results:
        old = before.get(r.series_id)
        old_speedup = old.gated_speedup if old is not None else None
        change = ""
        if old_speedup and r.gated_speedup:
            change = f"{100 * (r.gated_speedup / old_speedup - 1):+.1f}%"
        rows.append(ReportModelRow(
            name=r.name, batch_size=r.batch_size, accuracy=r.accuracy or "-", speedup=f"{r.gated_speedup:.2f}x",
            previous_speedup="-" if old_speedup is None else f"{old_speedup:.2f}x", change=change,
            values={m.name: getattr(r, m.name) for m in RESULT_METRICS}))
    c = run.configuration
    # after the speedup, which the table shows gated and against the previous run
    metrics = tuple(shown_metrics({m.name: [row.values[m.name] for row in rows] for m in RESULT_METRICS})[1:])
    return SuiteDetail(suite=c.suite, compiler=c.backend_variant, run_id=run.id, models=rows, metrics=metrics)


def build_report(session: Session, run_id: int, dashboard_url: str | None = None) -> ReportContext:
    """The report of the night and scope of ``run_id``: every configuration of that scope on that night."""
    anchor = session.get(Run, run_id)
    if anchor is None:
        raise LookupError(f"no run {run_id}")
    key = report_scope_key(anchor.configuration)
    runs = sorted((r for r in runs_of_night(session, anchor.night) if report_scope_key(r.configuration) == key),
                  key=lambda r: (r.configuration.backend_variant, r.configuration.suite))
    c = anchor.configuration
    previous = {r.id: previous_run(session, r) for r in runs}
    suites = list(dict.fromkeys(r.configuration.suite for r in runs))
    compilers = list(dict.fromkeys(r.configuration.backend_variant for r in runs))
    by_cell = {(r.configuration.backend_variant, r.configuration.suite): r for r in runs}
    tables = []
    for metric in SUMMARY_METRICS:
        rows = []
        for compiler in compilers:
            cells = []
            for suite in suites:
                run = by_cell.get((compiler, suite))
                now = _summary(session, run) if run else None
                prev_run = previous.get(run.id) if run else None
                before = _summary(session, prev_run) if prev_run else None
                if now is None:
                    cells.append(Cell("", ""))
                    continue
                value = metric.value_attr
                cells.append(Cell(now.text_of(metric), _delta(
                    getattr(now, value), getattr(before, value) if before else None, metric.delta_format)))
            rows.append((compiler, cells))
        tables.append(MetricTable(title=metric.pytorch_title, suites=suites, rows=rows))
    summaries = {r.id: session.get(RunSummary, r.id) for r in runs}
    warnings = [(r.configuration.suite, w["name"], w["reason"]) for r in runs if (summary := summaries[r.id])
                for w in summary.warnings]
    findings = open_findings_of(session, [r.id for r in runs])
    context = ReportContext(
        title=f"Performance Dashboard for {c.dtype} precision -- {_thread_title(c)}",
        night=anchor.night, scope=_scope_label(c), scope_key=key, machine=c.machine.fingerprint,
        hosts=sorted({r.host for r in runs if r.host}), torch_version=anchor.torch_version,
        commit=anchor.torch_git_commit,
        previous_commit=next((p.torch_git_commit for p in previous.values() if p is not None), None),
        suite_versions={k: str(v) for r in runs for k, v in r.suite_versions.items()},
        commands=list(dict.fromkeys(r.command for r in runs if r.command)),
        jenkins_urls=list(dict.fromkeys(r.jenkins_url for r in runs if r.jenkins_url)),
        dashboard_url=dashboard_url.rstrip("/") if dashboard_url else None,
        run_ids=[r.id for r in runs], tables=tables, warnings=warnings,
        details=[_details(session, r, previous[r.id]) for r in runs])
    for finding in findings:
        _place(context, finding)
    context.same_code_count = sum(same_code_gauge(session, {r.configuration_id for r in runs}).values())
    context.missing = missing_configurations(session, anchor.night)
    return context


def _place(context: ReportContext, finding: Finding) -> None:
    """File a finding in its category's section (perfdash.verdicts; an unknown category raises UnknownVerdict); a
    regression still awaiting or failing its A/B is suspected, one its A/B did not reproduce is listed apart."""
    section = category(finding.category)
    if section is REGRESSION and ConfirmationState(finding.confirmation).suspected:
        context.suspected.append(finding)
    elif section is REGRESSION and finding.confirmation == ConfirmationState.NOT_REPRODUCED:
        context.not_reproduced.append(finding)
    else:
        getattr(context, section.report_section).append(finding)


def _data(value: object) -> Markup:
    """Every value the template prints: literal text (service.github.safe.inline), unless it is markup already (the
    output of a macro, of the filters below, or ``raw``)."""
    return value if isinstance(value, Markup) else Markup(safe.inline(value))


def _cell(value: object) -> Markup:
    return Markup(safe.inline(value))


def _code(value: object) -> Markup:
    return Markup(safe.code_block(value))


def _raw(value: object) -> Markup:
    # perfdash's own text only: the marker comment, the configured dashboard URL
    return Markup(str(value))


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _value(value: float | None, metric: str | None) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.0f}%" if metric == "passrate" else f"{value:.4g}"


def _short(commit: str | None) -> str:
    return (commit or "?")[:10]


def _ab(finding: Finding) -> str:
    """A candidate's confirmation in a table cell: waiting, or the A/B figures."""
    ab = finding.confirmation_result or {}
    if finding.confirmation == ConfirmationState.PENDING:
        return "awaiting A/B re-measurement"
    parts = [str(ab.get("summary") or finding.confirmation)]
    if ab.get("good_median") is not None and ab.get("bad_median") is not None:
        parts.append(f"good {ab['good_median']:.4g}, bad {ab['bad_median']:.4g}")
    return "; ".join(parts)


def environment() -> jinja2.Environment:
    """Markdown for GitHub: every ``{{ value }}`` is escaped as literal text by ``finalize`` (it cannot mention, link
    or format), the template's own text is not. Autoescape is on only so that a macro's output is Markup (already
    escaped) and is not escaped twice; what it would HTML-escape, ``finalize`` has escaped and marked first."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, finalize=_data,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    env.filters.update(cell=_cell, code=_code, raw=_raw, num=_num, value=_value, short=_short, ab=_ab,
                       code_change=lambda f: describe(f.code_change))
    env.globals["verdicts"] = verdicts  # the finding sections' headings
    return env


def render_report(context: ReportContext) -> str:
    return environment().get_template(TEMPLATE).render(r=context)
