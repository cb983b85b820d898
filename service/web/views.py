"""View models: what each page shows, built from query rows. No SQL, no HTML here; templates only lay these out."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Protocol

from perfdash.axes import SummaryScope, summary_axis_values, summary_group
from perfdash.contract import SUITES, display_status, gated_speedup
from perfdash.metric_registry import DASHBOARD_METRICS, RESULT_METRICS, ResultMetric, SummaryMetric, shown_metrics
from perfdash.metrics import SuiteSummary
from perfdash.verdicts import (
    ADDED,
    COUNTED,
    FIXED,
    NEW_FAILURE,
    REMOVED,
    FindingKind,
    Severity,
    Verdict,
    category,
    verdict,
)
from service.models import Configuration, Finding, RunSummary
from service.queries.compare import RunComparison
from service.queries.history import ModelPoint, SummaryPoint
from service.queries.runs import RunLite, SummaryNumbers
from service.web.format import SummaryCell, number, short_commit

TORCHBENCH_COMMIT_URL = "https://github.com/pytorch/benchmark/commit/{}"


@dataclass(frozen=True, slots=True)
class ModelOrigin:
    """Where a torchbench run's models came from, as its manifest recorded it (suite_versions["torchbench"])."""

    torchbench: bool  # PyTorch's TorchBench; False: the torchvision stand-ins perfdash ran under its names before
    commit: str | None
    recorded: str

    @property
    def url(self) -> str | None:
        return TORCHBENCH_COMMIT_URL.format(self.commit) if self.commit else None


def model_origin(suite: str, versions: Mapping[str, Any] | None) -> ModelOrigin | None:
    """The torchbench suite's origin of its models: a commit of pytorch/benchmark, or what a run of the stand-ins
    recorded (``torchvision 0.29.1 (torchbenchmark not installed)``); None for the other suites."""
    if suite != "torchbench":
        return None
    recorded = str((versions or {}).get("torchbench", ""))
    if re.fullmatch(r"[0-9a-f]{7,40}", recorded):
        return ModelOrigin(True, recorded, recorded)
    return ModelOrigin(False, None, recorded or "nothing recorded")


def suite_summary(summary: RunSummary | SummaryNumbers | None) -> SuiteSummary | None:
    """The stored summary of a run as perfdash.metrics' SuiteSummary (its text formats are the dashboard's)."""
    if summary is None or isinstance(summary, SuiteSummary):
        return summary
    return SuiteSummary.of(summary)


def config_label(config: Configuration) -> str:
    """The row label of a configuration inside its group: backend, variant, and what differs from the default."""
    parts = [config.backend_variant]
    if config.compile_mode != "default":
        parts.append(config.compile_mode)
    if config.dynamic_shapes:
        parts.append("dynamic")
    if config.batch_size_override:
        parts.append(f"bs{config.batch_size_override}")
    return " ".join(parts)


def group_title(config: Configuration) -> str:
    return f"{config.device} · {config.dtype} · {config.mode} · {config.thread_config}"


def suite_order(suites: Iterable[str]) -> list[str]:
    known = [s for s in SUITES if s in suites]
    return known + sorted(set(suites) - set(known))


# --------------------------------------------------------------------------------------------------------------------
# Home


@dataclass(frozen=True, slots=True)
class HomeCell:
    cell: SummaryCell
    run_id: int
    night: date
    stale: bool  # the configuration's latest night is older than its group's


@dataclass(frozen=True, slots=True)
class HomeRow:
    label: str
    cells: list[HomeCell | None]


@dataclass(frozen=True, slots=True)
class HomeTable:
    metric: SummaryMetric
    rows: list[HomeRow]


@dataclass(frozen=True, slots=True)
class HomeGroup:
    title: str
    machine: str
    night: date
    commit: str | None
    suites: list[str]
    tables: list[HomeTable]
    trends_query: dict[str, str]


def _group_order(values: Mapping[str, Any]) -> tuple[object, ...]:
    """GPU first, then mode, dtype and threads, as PyTorch's dashboard lists them; the group's other values (the
    machine) after them."""
    first = ("mode", "dtype", "thread_config")
    return (values["device"] != "cuda", *(values[name] for name in first),
            *(value for name, value in values.items() if name != "device" and name not in first))


def first_group_filter(configs: Sequence[Configuration]) -> dict[str, str] | None:
    """The page's axes (device, dtype, mode, threads) of the first Summary group, when there is more than one group."""
    groups = {tuple(summary_axis_values(c, SummaryScope.PAGE).items()) for c in configs}
    if len(groups) < 2:
        return None
    return dict(min(groups, key=lambda group: _group_order(dict(group))))


def home_groups(latest: Sequence[tuple[RunLite, RunLite | None]]) -> list[HomeGroup]:
    """The executive summary: one group per value of the axes that split the page (perfdash.axes.SummaryScope.PAGE:
    device, dtype, mode, threads) and machine; rows backend (config_label: the other axes), columns suite."""
    grouped: dict[tuple[tuple[str, Any], ...], list[tuple[RunLite, RunLite | None]]] = {}
    for run, base in latest:
        grouped.setdefault(summary_group(run.configuration, SummaryScope.PAGE), []).append((run, base))
    groups = []
    for key in sorted(grouped, key=lambda group: _group_order(dict(group))):
        pairs = grouped[key]
        night = max(run.night for run, _ in pairs)
        latest_run = max((run for run, _ in pairs), key=lambda r: (r.night, r.id))
        suites = suite_order({run.configuration.suite for run, _ in pairs})
        labels = sorted({config_label(run.configuration) for run, _ in pairs})
        by_cell = {(config_label(run.configuration), run.configuration.suite): (run, base) for run, base in pairs}
        tables = []
        for metric in DASHBOARD_METRICS:
            rows = []
            for label in labels:
                cells: list[HomeCell | None] = []
                for suite in suites:
                    pair = by_cell.get((label, suite))
                    new = suite_summary(pair[0].summary) if pair else None
                    if pair is None or new is None:
                        cells.append(None)
                        continue
                    run, base = pair
                    cell = SummaryCell.build(metric, new, suite_summary(base.summary) if base else None)
                    cells.append(HomeCell(cell=cell, run_id=run.id, night=run.night, stale=run.night < night))
                rows.append(HomeRow(label=label, cells=cells))
            tables.append(HomeTable(metric=metric, rows=rows))
        first = pairs[0][0].configuration
        groups.append(HomeGroup(
            title=group_title(first), machine=dict(key)["machine"], night=night, commit=latest_run.torch_git_commit,
            suites=suites, tables=tables, trends_query=summary_axis_values(first, SummaryScope.PAGE),
        ))
    return groups


# --------------------------------------------------------------------------------------------------------------------
# Suite and Compare: one run's models against a base run


@dataclass(frozen=True, slots=True)
class RunModelRow:
    name: str
    series_id: int
    batch_size: int
    status: str
    passed: bool
    speedup: float | None  # gated: None when the model did not pass
    values: dict[str, float | None]  # every metric of perfdash.metric_registry by name, None when the model failed
    graph_breaks: int | None
    warnings: tuple[str, ...]
    error: str | None
    is_new: bool  # not in the base run
    base_status: str | None
    base_speedup: float | None
    delta: float | None  # relative speedup change against the base
    delta_class: str  # better | worse | ""
    speedup_ci: str  # "1.62–1.71x": the 95 % confidence interval of the speedup, "" without raw samples
    tags: tuple[str, ...] = field(default=())  # fail warn new regressed improved newfail fixed: the filter keys

    # Joined here once: Jinja's join filter (escaping each item) was a fifth of a 150-model page's render time.
    @property
    def tags_text(self) -> str:
        return " ".join(self.tags)

    @property
    def warnings_text(self) -> str:
        return "; ".join(self.warnings)


class ResultLike(Protocol):
    """A stored result: an ORM Result or the service's ResultOut."""

    series_id: int
    name: str
    batch_size: int
    accuracy: str | None
    passed: bool
    speedup: float | None
    graph_breaks: int | None
    error: str | None
    speedup_ci_low: float | None
    speedup_ci_high: float | None


def interval_text(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f"{low:.2f}–{high:.2f}x"


def _gated(result: ResultLike | None) -> float | None:
    """The gated speedup for a table cell: None (shown ``-``) where it is 0."""
    return (gated_speedup(result.speedup, result.passed) or None) if result is not None else None


def model_rows(results: Sequence[ResultLike], comparison: RunComparison | None,
               warnings: Sequence[dict[str, str]]) -> list[RunModelRow]:
    """A run's models, tagged with the verdicts of service.queries.compare against the base run (when there is one).

    The regression maths (what counts as a regression, new failure, fix) is the service's; this only lays it out.
    """
    deltas = {m.name: m for m in comparison.models} if comparison is not None else {}
    reasons: dict[str, list[str]] = {}
    for warning in warnings:
        reasons.setdefault(warning.get("name", ""), []).append(warning.get("reason", ""))
    rows = []
    for r in results:
        delta = deltas.get(r.name)
        base = delta.base if delta is not None else None
        tags = []
        if not r.passed:
            tags.append("fail")
        if reasons.get(r.name) and r.passed:
            tags.append("warn")
        judged = verdict(delta.verdict) if delta is not None else None
        if judged is not None and judged.tag:
            tags.append(judged.tag)
        change = delta.speedup_change if delta is not None else None
        # coloured as judged: a move inside the confidence intervals stays uncoloured
        change_css = "" if change is None or judged is None else judged.css
        rows.append(RunModelRow(
            name=r.name, series_id=r.series_id, batch_size=r.batch_size, status=display_status(r.accuracy, r.passed),
            passed=r.passed,
            speedup=_gated(r), values={m.name: getattr(r, m.name) if r.passed else None for m in RESULT_METRICS},
            graph_breaks=r.graph_breaks,
            warnings=tuple(reasons.get(r.name, ())), error=r.error, is_new=judged is ADDED,
            base_status=display_status(base.accuracy, base.passed) if base is not None else None,
            base_speedup=_gated(base), delta=change,
            delta_class=change_css, tags=tuple(tags),
            speedup_ci=interval_text(r.speedup_ci_low, r.speedup_ci_high) if r.passed else "",
        ))
    return rows


@dataclass(frozen=True, slots=True)
class ComparisonSections:
    counted: list[tuple[Verdict, list[RunModelRow]]]  # perfdash.verdicts.COUNTED, in its order: counts and tables
    new_models: list[RunModelRow]
    missing: list[str]  # in the base run, not in the new one
    threshold: float  # Compare's regression is the speedup's alone, beyond this (perfdash.judgement.speedup_only)


def comparison_sections(rows: Sequence[RunModelRow], comparison: RunComparison) -> ComparisonSections:
    def tagged(v: Verdict) -> list[RunModelRow]:
        # the worst first: the largest drop of a bad change, the largest gain of a good one
        sign = -1.0 if v.severity is Severity.BETTER else 1.0
        return sorted((r for r in rows if v.tag in r.tags), key=lambda r: sign * (r.delta or 0.0))

    return ComparisonSections(counted=[(v, tagged(v)) for v in COUNTED], new_models=tagged(ADDED),
                              missing=sorted(m.name for m in comparison.models if m.verdict == REMOVED.name),
                              threshold=comparison.threshold)


# --------------------------------------------------------------------------------------------------------------------
# Model history and trends: chart data (serialised into the page as JSON, drawn by static/js/charts.js)


def model_chart_data(points: Sequence[ModelPoint], annotations: Sequence[dict[str, str]],
                     findings: Sequence[dict[str, object]]) -> dict[str, Any]:  # the chart's JSON
    status_changes = []
    previous: ModelPoint | None = None
    for p in points:
        if previous is not None and previous.passed != p.passed:
            status_changes.append({"night": p.night.isoformat(),
                                   "from": display_status(previous.accuracy, previous.passed),
                                   "to": display_status(p.accuracy, p.passed), "passed": p.passed,
                                   "label": (FIXED if p.passed else NEW_FAILURE).label,
                                   "severity": (FIXED if p.passed else NEW_FAILURE).severity.value})
        previous = p
    return {
        "nights": [p.night.isoformat() for p in points],
        "commits": [(p.torch_git_commit or "")[:12] for p in points],
        "runs": [p.run_id for p in points],
        "status": [display_status(p.accuracy, p.passed) for p in points],
        "series": {
            # the metrics the page shows: an optional one (throughput) no point has would be a column of nulls
            **{m.name: _chart_values(points, m.name)
               for m in shown_metrics({m.name: (getattr(p, m.name) for p in points) for m in RESULT_METRICS})},
            "activation_ratio": _chart_values(points, "activation_ratio"),
        },
        # the speedup's 95 % confidence interval per night (None without raw samples), drawn as a band
        "intervals": {"speedup": {
            "low": _chart_values(points, "speedup_ci_low"),
            "high": _chart_values(points, "speedup_ci_high"),
        }},
        "statusChanges": status_changes,
        "annotations": list(annotations),
        "findings": list(findings),
    }


MetricCell = tuple[str, str]  # (metric name, text) of the Model page's table
ValueCell = tuple[str, str]  # (data-value: the number, "" for none; text) of a model table


@dataclass(frozen=True, slots=True)
class PointRow:
    """A run in the Model page's table, its cells as text, made here once: registry calls and filters per cell in
    Jinja were most of the table's render."""

    run_id: int
    night: date
    commit: str
    passed: bool
    status: str
    lead: MetricCell  # the first metric's (speedup's) cell, "-" for a failure; its interval follows it
    interval: str  # the speedup's 95 % confidence interval, "" without one or for a failure
    cells: list[MetricCell]  # the other metrics shown
    activation: str  # perfdash's activation peaks, "eager / compiled" GB, "-" without them
    graph_breaks: str


def point_rows(points: Sequence[ModelPoint], metrics: Sequence[ResultMetric], limit: int) -> list[PointRow]:
    """The latest ``limit`` points, newest first, as the rows of the Model page's table of ``metrics``."""
    lead, rest = metrics[0], metrics[1:]
    rows = []
    for p in points[:-limit - 1:-1]:
        value = getattr(p, lead.name) if p.passed else None
        rows.append(PointRow(
            run_id=p.run_id, night=p.night, commit=short_commit(p.torch_git_commit), passed=p.passed,
            status=display_status(p.accuracy, p.passed), lead=(lead.name, lead.text(value)),
            interval=interval_text(p.speedup_ci_low, p.speedup_ci_high) if p.passed else "",
            cells=[(m.name, m.text_of(p)) for m in rest],
            activation=("-" if p.eager_activation_peak_mem is None else
                        f"{number(p.eager_activation_peak_mem, 4)} / {number(p.dynamo_activation_peak_mem, 4)}"),
            graph_breaks="-" if p.graph_breaks is None else str(p.graph_breaks)))
    return rows


def table_metrics(rows: Sequence[RunModelRow]) -> list[ResultMetric]:
    """The columns of a model table after the speedup's (which has its base, change and interval beside it)."""
    return shown_metrics({m.name: [r.values[m.name] for r in rows] for m in RESULT_METRICS})[1:]


def model_table(rows: Sequence[RunModelRow]) -> tuple[list[ResultMetric], list[tuple[RunModelRow, list[ValueCell]]]]:
    """The metric columns of a model table (table_metrics) and each row with its cells of them, made here once: a
    registry call and lookups per cell in Jinja cost ~1 ms on a 150-model compare page."""
    metrics = table_metrics(rows)
    return metrics, [(r, [("" if (v := r.values[m.name]) is None else str(v), m.text(v)) for m in metrics])
                     for r in rows]


def finding_mark(finding: Finding) -> dict[str, object]:
    """A detection finding as a chart mark: on its metric's chart (status findings on every chart)."""
    on_one_chart = finding.kind in (FindingKind.PERFORMANCE, FindingKind.NOISE)
    judged = category(finding.category)
    return {"night": finding.run.night.isoformat(), "metric": finding.metric if on_one_chart else None,
            "text": finding.summary, "category": finding.category, "label": judged.label,
            "severity": judged.severity.value}


def run_slots(points: Iterable[tuple[int, date, int]]) -> tuple[list[str], dict[int, int]]:
    """A shared x axis for lines of runs: ``points`` are (line, night, run id) in run order. A night is one slot when
    each line ran once that night; a line's second run of a night gets a second slot ("2026-11-22 #2"), so two runs of
    one day are two points, never one hiding the other. Returns the slot labels and run id -> slot index."""
    count: dict[tuple[int, date], int] = {}
    slot_of_run: dict[int, tuple[date, int]] = {}
    for line, night, run_id in points:
        if run_id not in slot_of_run:
            k = count.get((line, night), 0)
            count[(line, night)] = k + 1
            slot_of_run[run_id] = (night, k)
    slots = sorted(set(slot_of_run.values()))
    index = {slot: i for i, slot in enumerate(slots)}
    labels = [night.isoformat() if k == 0 else f"{night.isoformat()} #{k + 1}" for night, k in slots]
    return labels, {run_id: index[slot] for run_id, slot in slot_of_run.items()}


def trend_chart_data(points: Sequence[SummaryPoint], configs: dict[int, Configuration]) -> dict[str, object]:
    """One line per configuration on a shared axis of runs labelled by night (run_slots)."""
    nights, slot = run_slots((p.configuration_id, p.night, p.run_id) for p in points)
    lines: dict[int, dict[str, list[object]]] = {}
    width = len(nights)
    for p in points:
        line = lines.get(p.configuration_id)
        if line is None:
            line = lines[p.configuration_id] = {key: [None] * width for key in
                                                (*(m.key for m in DASHBOARD_METRICS), "commits", "runs")}
        i = slot[p.run_id]
        summary = p  # a SummaryPoint is a SuiteSummary
        for metric in DASHBOARD_METRICS:
            value = summary.value_of(metric)
            line[metric.key][i] = (round(100 * value, 2) if value is not None else None) if metric.percent \
                else _round(value)
        line["commits"][i] = (p.commit or "")[:10]  # tooltips show 10 characters; halves the page on long ranges
        line["runs"][i] = p.run_id
    labels = _distinguishing_labels({cid: (configs[cid].suite, config_label(configs[cid]), group_title(configs[cid]),
                                           configs[cid].machine.fingerprint) for cid in lines})
    return {"nights": nights, "lines": [{"label": labels[cid], **line} for cid, line in lines.items()]}


CHART_DIGITS = 4  # charts need no more; full doubles would double the JSON of a three-year page


def _round(value: float | None, digits: int = CHART_DIGITS) -> float | None:
    return None if value is None else round(value, digits)


def _chart_values(points: Sequence[ModelPoint], name: str) -> list[float | None]:
    """A model point attribute's values for a chart, rounded, None where the model did not pass (one comprehension:
    a call per value was a quarter of a 3-year page's chart data)."""
    return [None if not p.passed or (v := getattr(p, name)) is None else round(v, CHART_DIGITS) for p in points]


def _distinguishing_labels(parts: dict[int, tuple[str, ...]]) -> dict[int, str]:
    """Legend labels that keep only the parts that differ between lines (a filtered view has short labels)."""
    if not parts:
        return {}
    width = len(next(iter(parts.values())))
    varying = [i for i in range(width) if len({p[i] for p in parts.values()}) > 1] or [0, 1]
    # The last part (the machine) only when the others leave two lines with one label.
    shorter = [i for i in varying if i != width - 1]
    if shorter and len({tuple(p[i] for i in shorter) for p in parts.values()}) == len(parts):
        varying = shorter
    return {cid: " · ".join(p[i] for i in varying) for cid, p in parts.items()}


@dataclass(frozen=True, slots=True)
class TrendRow:
    """First and last summary of one configuration in the chosen range."""

    configuration: Configuration
    first: SummaryPoint
    last: SummaryPoint
    first_summary: SuiteSummary
    last_summary: SuiteSummary
    cells: list[SummaryCell]


def trend_rows(points: Sequence[SummaryPoint], configs: dict[int, Configuration]) -> list[TrendRow]:
    first: dict[int, SummaryPoint] = {}
    last: dict[int, SummaryPoint] = {}
    for p in points:
        first.setdefault(p.configuration_id, p)
        last[p.configuration_id] = p
    rows = []
    for cid, f in first.items():
        fs, ls = f, last[cid]
        rows.append(TrendRow(configuration=configs[cid], first=f, last=last[cid], first_summary=fs,
                             last_summary=ls, cells=[SummaryCell.build(m, ls, fs) for m in DASHBOARD_METRICS]))
    return sorted(rows, key=lambda r: (suite_order(SUITES).index(r.configuration.suite)
                                       if r.configuration.suite in SUITES else 99, config_label(r.configuration)))

