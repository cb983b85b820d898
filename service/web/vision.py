"""The Vision page: the hf_vision suite shown as the publication "torch.compile() inference speed-up for computer
vision models in Transformers" shows it. Per device (configuration) and batch size: the table Task/Model | no compile
(ms) | compile (ms) | improvement %, in the publication's order, with its duration and improvement bar charts; a
compile-mode selector; each model's compiled-latency trend over nights.

Row names carry the batch size (``ViT_bs16``); the publication's order, labels and tasks come from the contract's
list of the twelve rows (perfdash.vision), the one the runner benchmarks.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from perfdash.contract import display_status
from perfdash.vision import parse_row_name, publication_rows
from service.api.deps import ConfigFilterDep, SessionDep
from service.models import Configuration, Result
from service.queries.history import LatencyPoint, latency_history
from service.queries.runs import configurations_with_runs, latest_results
from service.web.views import run_slots

router = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)

SUITE = "hf_vision"
STATISTICS = ("mean", "median")  # the publication reported means; the CSVs' abs_latency is a median
TREND_DEFAULT_DAYS = 90


@dataclass(frozen=True, slots=True)
class VisionRow:
    task: str
    label: str
    name: str  # the stored row name
    series_id: int
    status: str  # the accuracy status, "pass" when only performance ran, else the failure
    passed: bool
    eager_ms: float | None
    compiled_ms: float | None
    compile_s: float | None
    from_samples: bool  # False: the statistic is the CSV's median (a PyTorch CSV without samples)

    @property
    def improvement(self) -> float | None:
        """The publication's "% improvement": how much of the eager latency compiling saves."""
        if not self.eager_ms or self.compiled_ms is None:
            return None
        return (self.eager_ms - self.compiled_ms) / self.eager_ms * 100.0


@dataclass(frozen=True, slots=True)
class VisionTable:
    key: str  # DOM id of its charts
    batch_size: int
    rows: tuple[VisionRow, ...]

    @property
    def all_from_samples(self) -> bool:
        return all(r.from_samples for r in self.rows if r.compiled_ms is not None)


@dataclass(frozen=True, slots=True)
class VisionGroup:
    configuration: Configuration
    title: str
    night: date
    run_id: int
    tables: tuple[VisionTable, ...]


def _stat(values: Sequence[float], which: str) -> float:
    return statistics.fmean(values) if which == "mean" else statistics.median(values)


def _latencies(result: Result, which: str) -> tuple[float | None, float | None, bool]:
    """(eager ms, compiled ms, from samples) of one stored row; (None, None) for a failure row."""
    if not result.speedup or not result.abs_latency:
        return None, None, False
    samples = result.samples or {}
    eager, compiled = samples.get("eager_ms"), samples.get("compiled_ms")
    if eager and compiled:
        return _stat(eager, which), _stat(compiled, which), True
    return result.abs_latency * result.speedup, result.abs_latency, False  # medians, from the CSV's definitions


def _order_key(name: str) -> tuple[int, str]:
    parsed = parse_row_name(name)
    model = parsed.model if parsed else name
    row = publication_rows().get(model)
    return (row.position if row else len(publication_rows()), model)


def build_tables(results: Sequence[Result], which: str, key_prefix: str) -> tuple[VisionTable, ...]:
    by_batch: dict[int, list[VisionRow]] = {}
    for result in sorted(results, key=lambda r: _order_key(r.name)):
        parsed = parse_row_name(result.name)
        model, batch = (parsed.model, parsed.batch_size) if parsed else (result.name, result.batch_size)
        row = publication_rows().get(model)
        eager, compiled, from_samples = _latencies(result, which)
        by_batch.setdefault(batch, []).append(VisionRow(
            task=row.task if row else "", label=row.label if row else model, name=result.name,
            series_id=result.series_id, status=display_status(result.accuracy, result.passed), passed=result.passed,
            eager_ms=eager, compiled_ms=compiled,
            compile_s=result.compilation_latency if compiled is not None else None,
            from_samples=from_samples))
    return tuple(VisionTable(key=f"{key_prefix}-bs{batch}", batch_size=batch, rows=tuple(rows))
                 for batch, rows in sorted(by_batch.items()))


def group_title(config: Configuration) -> str:
    parts = [config.device, config.machine.fingerprint, config.dtype, config.thread_config, config.backend_variant]
    return " · ".join(p for p in parts if p)


def trend_chart(points: Sequence[LatencyPoint], table: VisionTable) -> dict[str, Any]:
    """Compiled latency of each model of one table in every run (runs with no value are gaps), on an axis of runs
    labelled by night (views.run_slots: two runs of one night are two points)."""
    names = [r.name for r in table.rows]
    labels = {r.name: r.label for r in table.rows}
    mine = [p for p in points if p.name in labels]
    nights, slot = run_slots((0, p.night, p.run_id) for p in mine)
    lines: dict[str, list[float | None]] = {name: [None] * len(nights) for name in names}
    runs: list[int | None] = [None] * len(nights)
    for p in mine:
        lines[p.name][slot[p.run_id]] = round(p.compiled_ms, 4) if p.compiled_ms is not None else None
        runs[slot[p.run_id]] = p.run_id
    return {"id": table.key, "nights": nights, "runs": runs,
            "lines": [{"label": labels[n], "values": lines[n]} for n in names]}


def bar_chart(table: VisionTable) -> dict[str, Any]:
    def r(value: float | None) -> float | None:
        return round(value, 4) if value is not None else None

    return {"id": table.key, "labels": [row.label for row in table.rows],
            "eager": [r(row.eager_ms) for row in table.rows], "compiled": [r(row.compiled_ms) for row in table.rows],
            "improvement": [r(row.improvement) for row in table.rows]}


@router.get("/vision")
def vision(request: Request, session: SessionDep, config_filter: ConfigFilterDep,
           stat: Annotated[str, Query()] = "mean", days: Annotated[int, Query(ge=1, le=3650)] = TREND_DEFAULT_DAYS,
           ) -> Response:
    # the compile mode is a selector (default: the first mode measured); the filter's other fields narrow the page
    others = dataclasses.replace(config_filter, compile_mode=None)
    configurations = configurations_with_runs(session, Configuration.suite == SUITE, *others.clauses())
    modes = sorted({c.compile_mode for c in configurations}, key=lambda m: (m != "default", m))
    selected = config_filter.compile_mode or (modes[0] if modes else "default")
    which = stat if stat in STATISTICS else "mean"
    groups: list[VisionGroup] = []
    charts: dict[str, list[dict[str, Any]]] = {"bars": [], "trends": []}
    for config in configurations:
        if config.compile_mode != selected:
            continue
        latest = latest_results(session, [config.id]).get(config.id)
        if latest is None:
            continue
        tables = build_tables(latest.results, which, f"c{config.id}")
        groups.append(VisionGroup(configuration=config, title=group_title(config), night=latest.night,
                                  run_id=latest.run_id, tables=tables))
        history = latency_history(session, config.id, latest.night - timedelta(days=days))
        for table in tables:
            charts["bars"].append(bar_chart(table))
            charts["trends"].append(trend_chart(history, table))
    templates = request.app.state.web_templates
    return templates.TemplateResponse(request, "pages/vision.html", {
        "active": "vision", "title": "Vision", "groups": groups, "modes": modes, "compile_mode": selected,
        "stat": which, "statistics": STATISTICS, "days": days, "charts": charts,
        "has_suite": bool(configurations)})
