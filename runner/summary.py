"""The suite summary printed at the end of ``perfdash run``: numbers from perfdash.metrics (PyTorch's definitions),
headings and formats from perfdash.metric_registry (as the dashboard shows them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Group, RenderableType
from rich.table import Table

from perfdash.contract import ModelResult, ModelSamples, PerformanceRow
from perfdash.manifest import RunConfig
from perfdash.metric_registry import RESULT_METRICS, SUMMARY_METRICS, ResultMetric, Source, shown_metrics
from perfdash.metrics import SuiteSummary, model_warnings


def summary_table(config: RunConfig, summary: SuiteSummary) -> Table:
    """PyTorch's executive summary of the run: one column per summary metric, headed and written as the registry
    says (perfdash.metric_registry.SUMMARY_METRICS)."""
    shard = f", partition {config.partition_id}/{config.total_partitions}" if config.total_partitions > 1 else ""
    title = f"{config.key().stem} ({config.thread_config}{shard})"
    table = Table(title=title, title_justify="left")
    for metric in SUMMARY_METRICS:
        table.add_column(metric.heading, justify="right")
    table.add_row(*(getattr(summary, metric.text_attr) for metric in SUMMARY_METRICS))
    return table


def _value(metric: ResultMetric, performance: PerformanceRow, samples: ModelSamples | None) -> float | None:
    """A model's value of a result metric, from where the registry says it comes (the CSV row or the samples)."""
    source = performance if metric.source is Source.PERFORMANCE_CSV else samples
    return getattr(source, metric.name, None)


def models_table(results: Sequence[ModelResult], samples: Mapping[str, ModelSamples] | None = None) -> Table:
    """One row per model: its accuracy status, then the result metrics (perfdash.metric_registry.RESULT_METRICS,
    headed and written as the registry says); the optional ones (training throughput, from the run's samples file)
    only where a model has a value."""
    samples = samples or {}
    values: dict[str, dict[str, float | None]] = {}  # model -> metric name -> value; measured models only
    for r in results:
        if r.performance is not None and not r.performance.is_failure:
            values[r.name] = {m.name: _value(m, r.performance, samples.get(r.name)) for m in RESULT_METRICS}
    metrics = shown_metrics({m.name: [v[m.name] for v in values.values()] for m in RESULT_METRICS})
    table = Table(title="models", title_justify="left")
    table.add_column("model")
    table.add_column("batch", justify="right")
    table.add_column("accuracy")
    for metric in metrics:
        table.add_column(metric.heading, justify="right")
    for r in results:
        measured = values.get(r.name, {})
        table.add_row(r.name, str(r.batch_size), r.accuracy or "-", *(metric.text(measured.get(metric.name))
                                                                      for metric in metrics))
    return table


def render(config: RunConfig, summary: SuiteSummary, results: Sequence[ModelResult],
           samples: Sequence[ModelSamples] = ()) -> Group:
    parts: list[RenderableType] = [models_table(results, {s.name: s for s in samples}), summary_table(config, summary)]
    warnings = model_warnings(results)
    if warnings:
        parts.append("warnings: " + "; ".join(f"{w.name}: {w.reason}" for w in warnings))
    return Group(*parts)
