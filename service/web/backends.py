"""The Backends page: Inductor against the alternatives (ONNX Runtime, OpenVINO, TensorRT, ...) in one view.

For one setup (suite, device, dtype, machine, threads) and batch size: a table of models x backends (eager latency,
then each backend's latency and its speedup over the eager run it was interleaved with; the fastest marked, failures
named), a summary row per backend (passrate, geomean speedup clipped and unclipped, mean compile time, PyTorch's
definitions from perfdash.metrics over this batch size's rows), and the chart of the publication that compared them:
one model's latency per backend across batch sizes. Every backend's latest night is shown; the filters are the URL.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from perfdash.contract import accuracy_gate, display_status
from perfdash.metrics import NEVER_RAN_STATUSES, GatedResult, SuiteSummary, summarize
from service.api.deps import ConfigFilterDep, SessionDep
from service.models import Configuration, Result
from service.queries.runs import LatestResults, configurations_with_runs, latest_results

router = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)

# Columns in this order when present (the torch.compile backends first), then any other backend alphabetically.
BACKEND_ORDER = ("eager", "aot_eager", "inductor", "onnxruntime", "openvino", "tensorrt")


@dataclass(frozen=True, slots=True)
class Setup:
    """What must be equal for backends to stand side by side (the batch size is chosen separately)."""

    suite: str
    device: str
    dtype: str
    machine_id: int
    machine: str  # its fingerprint
    thread_config: str

    @property
    def label(self) -> str:
        return " · ".join((self.suite, self.device, self.dtype, self.machine, self.thread_config))

    def params(self) -> dict[str, str]:
        return {"suite": self.suite, "device": self.device, "dtype": self.dtype, "machine": self.machine,
                "thread_config": self.thread_config}


def setup_of(config: Configuration) -> Setup:
    return Setup(suite=config.suite, device=config.device, dtype=config.dtype, machine_id=config.machine_id,
                 machine=config.machine.fingerprint, thread_config=config.thread_config)


@dataclass(frozen=True, slots=True)
class Cell:
    """One backend's result for one model at the chosen batch size."""

    backend: str
    status: str  # the accuracy status ("pass" when only performance ran), else the failure
    passed: bool
    latency_ms: float | None  # median latency of the backend (abs_latency); None for a failure row
    speedup: float | None  # over the eager run interleaved with it
    eager_ms: float | None  # that eager run's median
    compile_s: float | None
    series_id: int
    run_id: int
    fastest: bool = False


@dataclass(frozen=True, slots=True)
class BackendModelRow:
    name: str
    batch_size: int  # 0: the model failed before it had one
    eager_ms: float | None  # median over the backends' own eager runs (each backend is timed against its eager)
    cells: tuple[Cell | None, ...]  # one per column; None: the backend did not run this model
    eager_fastest: bool


@dataclass(frozen=True, slots=True)
class Column:
    backend: str  # backend with its variant, as in file names (onnxruntime_int8_dynamic)
    night: date
    run_id: int
    summary: SuiteSummary


def _cell(backend: str, result: Result) -> Cell:
    measured = bool(result.speedup and result.abs_latency)
    return Cell(backend=backend, status=display_status(result.accuracy, result.passed), passed=result.passed,
                latency_ms=result.abs_latency if measured else None, speedup=result.speedup if measured else None,
                eager_ms=result.abs_latency * result.speedup if measured else None,
                compile_s=result.compilation_latency if measured else None, series_id=result.series_id,
                run_id=result.run_id)


def column_order(backends: Sequence[str]) -> list[str]:
    def key(name: str) -> tuple[int, str]:
        base = next((b for b in BACKEND_ORDER if name == b or name.startswith(b + "_")), None)
        return (BACKEND_ORDER.index(base) if base else len(BACKEND_ORDER), name)

    return sorted(set(backends), key=key)


def summary_of(results: Sequence[Result]) -> SuiteSummary:
    """PyTorch's suite summary over these rows (the ingest's summary is per run, over all its batch sizes)."""
    counted = [r for r in results if r.accuracy not in NEVER_RAN_STATUSES]
    return summarize([GatedResult(name=r.name, speedup=r.gated_speedup, compilation_latency=r.compilation_latency,
                              compression_ratio=r.compression_ratio,
                              accuracy_passed=accuracy_gate(r.accuracy)) for r in counted])


@dataclass(frozen=True, slots=True)
class BackendTable:
    columns: tuple[Column, ...]
    rows: tuple[BackendModelRow, ...]


DEFAULT_BATCH = "default"  # each model at its suite's batch size (the runs without --batch-size)


def build_table(latest: dict[str, tuple[LatestResults, list[Result]]], batch_size: int | str,
                suite_default: dict[str, set[int]]) -> BackendTable:
    """``latest``: backend -> (its latest night, its results); ``batch_size`` a number or DEFAULT_BATCH, which takes
    the rows of ``suite_default`` (backend -> ids of the results of its runs without a batch-size override). Rows
    of batch size 0 (failed before a batch size was known) count at every batch size."""
    names = column_order(list(latest))

    def shown(backend: str, r: Result) -> bool:
        if batch_size == DEFAULT_BATCH:
            return r.id in suite_default.get(backend, set())
        return r.batch_size in (batch_size, 0)

    at_batch = {b: [r for r in latest[b][1] if shown(b, r)] for b in names}
    columns = tuple(Column(backend=b, night=latest[b][0].night, run_id=latest[b][0].run_id,
                           summary=summary_of(at_batch[b])) for b in names)
    models = sorted({r.name for rows in at_batch.values() for r in rows})
    table_rows: list[BackendModelRow] = []
    for model in models:
        cells = [next((_cell(b, r) for r in at_batch[b] if r.name == model), None) for b in names]
        eagers = [c.eager_ms for c in cells if c is not None and c.eager_ms is not None]
        eager = statistics.median(eagers) if eagers else None
        timed = [c for c in cells if c is not None and c.passed and c.latency_ms is not None]
        best = min(timed, key=lambda c: c.latency_ms or 0.0, default=None)
        eager_fastest = eager is not None and (best is None or eager < (best.latency_ms or 0.0))
        marked = tuple(Cell(**{**{f: getattr(c, f) for f in Cell.__dataclass_fields__},
                               "fastest": (not eager_fastest and c is best)}) if c is not None else None
                       for c in cells)
        sizes = [r.batch_size for b in names for r in at_batch[b] if r.name == model and r.batch_size]
        table_rows.append(BackendModelRow(name=model, batch_size=max(sizes, default=0), eager_ms=eager, cells=marked,
                                   eager_fastest=eager_fastest))
    return BackendTable(columns=columns, rows=tuple(table_rows))


def batch_chart(latest: dict[str, tuple[LatestResults, list[Result]]], model: str | None) -> dict[str, Any]:
    """The publication's chart: ``model``'s latency per backend across batch sizes (eager: median of the backends'
    eager runs). Failed or missing points are gaps."""
    names = column_order(list(latest))
    rows = {b: {r.batch_size: _cell(b, r) for r in latest[b][1] if r.name == model and r.batch_size}
            for b in names}
    batches = sorted({bs for cells in rows.values() for bs in cells})

    def latency(cell: Cell | None) -> float | None:
        return round(cell.latency_ms, 4) if cell is not None and cell.passed and cell.latency_ms else None

    eager = []
    for bs in batches:
        values = [c.eager_ms for c in (rows[b].get(bs) for b in names) if c is not None and c.eager_ms]
        eager.append(round(statistics.median(values), 4) if values else None)
    lines = [{"label": "eager", "values": eager}]
    lines += [{"label": b, "values": [latency(rows[b].get(bs)) for bs in batches]} for b in names]
    return {"model": model, "batch_sizes": batches, "lines": lines}


QueryText = Annotated[str | None, Query()]


def _pick(value: str | None, options: Sequence[str]) -> str | None:
    return value if value in options else (options[0] if options else None)


@router.get("/backends")
def backends(request: Request, session: SessionDep, config_filter: ConfigFilterDep, batch_size: QueryText = None,
             model: QueryText = None) -> Response:
    # The setup's fields are selectors (each defaulting below); the filter's other fields narrow the page.
    setup_fields = ("suite", "device", "dtype", "machine", "thread_config")
    others = dataclasses.replace(config_filter, **dict.fromkeys(setup_fields))
    configs = configurations_with_runs(session, Configuration.mode == "inference", *others.clauses())
    setups = sorted({setup_of(c) for c in configs}, key=lambda s: s.label)
    # Narrow one filter at a time, each defaulting to its first value among the setups the earlier ones leave.
    chosen = setups
    selected: dict[str, str | None] = {}
    choices: dict[str, list[str]] = {}
    for field in setup_fields:
        options = sorted({str(getattr(s, field)) for s in chosen})
        choices[field] = options
        selected[field] = _pick(getattr(config_filter, field), options)
        chosen = [s for s in chosen if str(getattr(s, field)) == selected[field]]
    setup = chosen[0] if chosen else None
    context: dict[str, Any] = {"active": "backends", "title": "Backends", "setup": setup, "choices": choices,
                               "selected": selected, "table": None, "chart": None,
                               "batch_sizes": [], "batch_size": None, "models": [], "model": None,
                               "permalink": None}
    if setup is not None:
        members = [c for c in configs if setup_of(c) == setup]
        latest_by_config = latest_results(session, [c.id for c in members])
        latest: dict[str, tuple[LatestResults, list[Result]]] = {}
        suite_default: dict[str, set[int]] = {}
        # Configurations of one backend that differ only in a batch-size override are one column.
        for config in sorted(members, key=lambda c: latest_by_config[c.id].night if c.id in latest_by_config
                             else date.min):
            found = latest_by_config.get(config.id)
            if found is None:
                continue
            previous = latest.get(config.backend_variant)
            merged = {(r.name, r.batch_size): r for r in (previous[1] if previous else [])}
            merged.update({(r.name, r.batch_size): r for r in found.results})
            latest[config.backend_variant] = (found, list(merged.values()))
            if config.batch_size_override is None:
                suite_default.setdefault(config.backend_variant, set()).update(r.id for r in found.results)
        # The suite's own batch sizes first (what the nightly runs), then every batch size measured.
        batch_sizes: list[str] = ([DEFAULT_BATCH] if suite_default else []) + [
            str(bs) for bs in sorted({r.batch_size for _, rows in latest.values() for r in rows if r.batch_size})]
        chosen_text = batch_size if batch_size in batch_sizes else (batch_sizes[0] if batch_sizes else "0")
        chosen_batch: int | str = chosen_text if chosen_text == DEFAULT_BATCH else int(chosen_text)
        models = sorted({r.name for _, rows in latest.values() for r in rows})
        chosen_model = _pick(model, models)
        context.update(table=build_table(latest, chosen_batch, suite_default),
                       chart=batch_chart(latest, chosen_model), batch_sizes=batch_sizes, batch_size=chosen_text,
                       models=models, model=chosen_model,
                       permalink="/backends?" + urlencode({**setup.params(), "batch_size": chosen_text,
                                                           "model": chosen_model or ""}))
    templates = request.app.state.web_templates
    return templates.TemplateResponse(request, "pages/backends.html", context)
