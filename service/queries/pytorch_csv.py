"""A stored run as the result files PyTorch's harness writes (``*_performance.csv``, ``*_accuracy.csv``: the columns
of perfdash.contract), named as the harness names them; what `perfdash export` and the Suite page's CSV links give."""

from __future__ import annotations

from typing import Literal

from sqlalchemy.orm import Session

from perfdash.contract import AccuracyRow, GraphStats, ModelResult, PerformanceRow, RunKey, csv_text
from service.queries.runs import get_run
from service.queries.schemas import ConfigurationOut, ResultOut

CsvKind = Literal["performance", "accuracy"]


def run_key(c: ConfigurationOut) -> RunKey:
    return RunKey(backend=c.backend, variant=c.variant, suite=c.suite, dtype=c.dtype, mode=c.mode, device=c.device)


def _stats(r: ResultOut) -> GraphStats:
    return GraphStats(r.calls_captured, r.unique_graphs, r.graph_breaks, r.unique_graph_breaks)


def model_result(r: ResultOut, device: str) -> ModelResult:
    performance = None
    if r.speedup is not None:
        performance = PerformanceRow(
            dev=device, name=r.name, batch_size=r.batch_size, speedup=r.speedup, abs_latency=r.abs_latency or 0.0,
            compilation_latency=r.compilation_latency, compression_ratio=r.compression_ratio,
            eager_peak_mem=r.eager_peak_mem, dynamo_peak_mem=r.dynamo_peak_mem, stats=_stats(r))
    return ModelResult(name=r.name, batch_size=r.batch_size, accuracy=r.accuracy, performance=performance)


def run_csv(session: Session, run_id: int, kind: CsvKind) -> tuple[str, str] | None:
    """(PyTorch's file name, the file's text) of one stored run, or None if there is no such run. A model without a
    performance row gets the harness' failure row (``dev,name,0,0.0,0.0``); one without an accuracy status, none."""
    run = get_run(session, run_id)
    if run is None:
        return None
    device = run.configuration.device
    rows: list[PerformanceRow] | list[AccuracyRow]
    if kind == "performance":
        rows = [model_result(r, device).performance or PerformanceRow.failure(device, r.name) for r in run.results]
    else:
        rows = [AccuracyRow(dev=device, name=r.name, batch_size=r.batch_size, accuracy=r.accuracy, stats=_stats(r))
                for r in run.results if r.accuracy is not None]
    return run_key(run.configuration).filename(kind), csv_text(rows, kind)
