"""The suite summary printed at the end of ``perfdash run`` (numbers from perfdash.metrics, PyTorch's definitions)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Group
from rich.table import Table

from perfdash.contract import ModelResult, ModelSamples, RunConfig
from perfdash.metrics import SuiteSummary, model_warnings


def summary_table(config: RunConfig, summary: SuiteSummary) -> Table:
    shard = f", partition {config.partition_id}/{config.total_partitions}" if config.total_partitions > 1 else ""
    title = f"{config.key().stem} ({config.thread_config}{shard})"
    table = Table(title=title, title_justify="left")
    for column in ("passrate", "geomean speedup", "(unclipped)", "compile time (s)", "peak memory ratio"):
        table.add_column(column, justify="right")
    table.add_row(summary.passrate_text, summary.geomean_text, summary.geomean_unclipped_text,
                  summary.compile_time_text, summary.compression_text)
    return table


def _per_second(value: float | None) -> str:
    return f"{value:,.1f}" if value is not None else "-"


def models_table(results: Sequence[ModelResult], samples: Mapping[str, ModelSamples] | None = None) -> Table:
    """One row per model; with ``samples`` (the run's samples file) also samples/s of the eager and the compiled
    step, the batch over the median step as perfdash.contract.throughput defines it."""
    samples = samples or {}
    with_throughput = any(s.eager_throughput is not None for s in samples.values())
    table = Table(title="models", title_justify="left")
    columns = [("model", "left"), ("batch", "right"), ("accuracy", "left"), ("speedup", "right"),
               ("latency ms", "right"), ("compile s", "right"), ("memory ratio", "right")]
    if with_throughput:
        columns += [("eager samples/s", "right"), ("compiled samples/s", "right")]
    for column, justify in columns:
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for r in results:
        p = r.performance
        measured = p is not None and not p.is_failure
        cells = [r.name, str(r.batch_size), r.accuracy or "-",
                 f"{p.speedup:.2f}x" if measured else "-",
                 f"{p.abs_latency:.2f}" if measured else "-",
                 f"{p.compilation_latency:.1f}" if measured and p.compilation_latency is not None else "-",
                 f"{p.compression_ratio:.2f}x" if measured and p.compression_ratio else "-"]
        if with_throughput:
            s = samples.get(r.name) if measured else None
            cells += [_per_second(s.eager_throughput if s else None),
                      _per_second(s.compiled_throughput if s else None)]
        table.add_row(*cells)
    return table


def render(config: RunConfig, summary: SuiteSummary, results: Sequence[ModelResult],
           samples: Sequence[ModelSamples] = ()) -> Group:
    parts: list[object] = [models_table(results, {s.name: s for s in samples}), summary_table(config, summary)]
    warnings = model_warnings(results)
    if warnings:
        parts.append("warnings: " + "; ".join(f"{w.name}: {w.reason}" for w in warnings))
    return Group(*parts)  # type: ignore[arg-type]
