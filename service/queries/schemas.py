"""The shapes query functions return (and the JSON API serves). Built from ORM rows with ``from_row``."""

from __future__ import annotations

from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from perfdash.contract import gated_speedup
from perfdash.metric_registry import RESULT_METRICS
from perfdash.metrics import SuiteSummary
from service.models import Configuration, Machine, Result, Run, RunSummary


class MachineOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    fingerprint: str
    device: str
    cpu_model: str | None
    cpu_count: int | None
    gpu_name: str | None
    gpu_driver: str | None
    cuda_version: str | None

    @classmethod
    def from_row(cls, row: Machine) -> MachineOut:
        return cls.model_validate(row)


class ConfigurationOut(BaseModel):
    """What makes runs of one suite comparable; ``id`` is the handle for history and annotations."""

    id: int
    suite: str
    backend: str
    variant: str
    backend_variant: str
    compile_mode: str
    dtype: str
    mode: str
    device: str
    threads: int | None
    thread_config: str
    batch_size_override: int | None
    dynamic_shapes: bool
    env: dict[str, Any]
    machine: MachineOut
    world_size: int = 1  # DistributedDataParallel processes; 1: a single process
    distributed_backend: str | None = None

    @classmethod
    def from_row(cls, row: Configuration) -> ConfigurationOut:
        return cls(id=row.id, suite=row.suite, backend=row.backend, variant=row.variant,
                   backend_variant=row.backend_variant, compile_mode=row.compile_mode, dtype=row.dtype, mode=row.mode,
                   device=row.device, threads=row.threads, thread_config=row.thread_config,
                   batch_size_override=row.batch_size_override, dynamic_shapes=row.dynamic_shapes, env=row.env,
                   machine=MachineOut.from_row(row.machine), world_size=row.world_size,
                   distributed_backend=row.distributed_backend)


class WarningOut(BaseModel):
    name: str
    reason: str


class SummaryOut(BaseModel):
    """A suite summary with the dashboard's texts (``91%, 49/54``, ``1.04x``, ``17.21``, ``1.23x``)."""

    passed: int
    total: int
    passrate: float
    passrate_text: str
    geomean_speedup: float | None
    geomean_speedup_text: str
    geomean_speedup_unclipped: float | None
    geomean_speedup_unclipped_text: str
    mean_compile_time_s: float | None
    compile_time_text: str
    mean_compression_ratio: float | None
    compression_text: str
    warnings_count: int | None = Field(description="how many models of the run failed or fell back (the summary's "
                                                   "warnings); null where not counted (suite history)")
    warnings: list[WarningOut] = Field(description="those models with the reason; empty in lists, histories and a "
                                                   "night's summary unless asked for (`warnings=true`): see "
                                                   "warnings_count")

    @classmethod
    def from_row(cls, row: RunSummary, *, with_warnings: bool = True) -> SummaryOut:
        return cls.from_values(row.passed, row.total, row.geomean_speedup, row.geomean_speedup_unclipped,
                               row.mean_compile_time_s, row.mean_compression_ratio, row.warnings,
                               with_warnings=with_warnings)

    @classmethod
    def from_values(cls, passed: int, total: int, geomean: float | None, geomean_unclipped: float | None,
                    compile_s: float | None, ratio: float | None, warnings: list[dict[str, str]] | None,
                    *, with_warnings: bool = True, warnings_count: int | None = None) -> SummaryOut:
        """``with_warnings=False`` (lists, histories) keeps only their count: a night has dozens per run.
        ``warnings_count`` stands in when the warnings themselves were not loaded."""
        # model_validate on a dict runs in pydantic-core; model_construct is pure Python and slower here.
        return cls.model_validate(cls.values(passed, total, geomean, geomean_unclipped, compile_s, ratio, warnings,
                                             with_warnings=with_warnings, warnings_count=warnings_count))

    @staticmethod
    def values(passed: int, total: int, geomean: float | None, geomean_unclipped: float | None,
               compile_s: float | None, ratio: float | None, warnings: list[dict[str, str]] | None,
               *, with_warnings: bool = True, warnings_count: int | None = None) -> dict[str, Any]:
        """The fields as a dict, texts made by perfdash.metrics (for validating many at once)."""
        metrics = SuiteSummary(passed=passed, total=total, geomean_speedup=geomean,
                               geomean_speedup_unclipped=geomean_unclipped, mean_compile_time_s=compile_s,
                               mean_compression_ratio=ratio)
        return {
            "passed": passed, "total": total, "passrate": metrics.passrate, "passrate_text": metrics.passrate_text,
            "geomean_speedup": geomean, "geomean_speedup_text": metrics.geomean_text,
            "geomean_speedup_unclipped": geomean_unclipped,
            "geomean_speedup_unclipped_text": metrics.geomean_unclipped_text, "mean_compile_time_s": compile_s,
            "compile_time_text": metrics.compile_time_text, "mean_compression_ratio": ratio,
            "compression_text": metrics.compression_text,
            "warnings_count": (len(warnings) if warnings is not None else None) if warnings_count is None
            else warnings_count,
            "warnings": (warnings or []) if with_warnings else []}


class RunOut(BaseModel):
    id: int
    run_key: str
    night: date
    started_at: datetime | None
    ended_at: datetime | None
    torch_version: str | None
    torch_git_commit: str | None
    suite_versions: dict[str, Any]
    host: str | None
    jenkins_url: str | None
    source: str
    partition_id: int
    total_partitions: int
    ingested_at: datetime
    configuration: ConfigurationOut
    summary: SummaryOut | None

    @classmethod
    def from_row(cls, row: Run, *, with_warnings: bool = True, warnings_count: int | None = None,
                 configuration: ConfigurationOut | None = None) -> RunOut:
        """``warnings_count``: the summary's warnings were not loaded (queries.runs.WARNINGS_COUNT counted them);
        ``configuration``: the run's configuration already made (many runs of one configuration)."""
        summary = row.summary
        if summary is None:
            summary_out = None
        elif warnings_count is not None:
            summary_out = SummaryOut.from_values(
                summary.passed, summary.total, summary.geomean_speedup, summary.geomean_speedup_unclipped,
                summary.mean_compile_time_s, summary.mean_compression_ratio, None, with_warnings=False,
                warnings_count=warnings_count)
        else:
            summary_out = SummaryOut.from_row(summary, with_warnings=with_warnings)
        return cls(id=row.id, run_key=row.run_key, night=row.night, started_at=row.started_at, ended_at=row.ended_at,
                   torch_version=row.torch_version, torch_git_commit=row.torch_git_commit,
                   suite_versions=row.suite_versions, host=row.host, jenkins_url=row.jenkins_url, source=row.source,
                   partition_id=row.partition_id, total_partitions=row.total_partitions, ingested_at=row.ingested_at,
                   configuration=configuration or ConfigurationOut.from_row(row.configuration), summary=summary_out)


# One optional number field per metric of perfdash.metric_registry (speedup, abs_latency, ..., the throughputs), named
# as the metric: the base of every model that carries a result's metrics, so a new registry entry appears in each.
if TYPE_CHECKING:  # a type checker cannot know the fields' names: any attribute of the metrics reads as Any
    class ResultMetricFields(BaseModel):
        def __getattr__(self, name: str) -> Any: ...
else:
    ResultMetricFields = create_model("ResultMetricFields", **{m.name: (float | None, None) for m in RESULT_METRICS})


class ResultOut(ResultMetricFields):
    """One model of one run: the registry's metrics as measured (``speedup`` included), and ``gated_speedup``, what
    the summary counts."""

    series_id: int
    name: str
    batch_size: int
    accuracy: str | None
    passed: bool
    gated_speedup: float
    eager_peak_mem: float | None
    dynamo_peak_mem: float | None
    calls_captured: int | None
    unique_graphs: int | None
    graph_breaks: int | None
    unique_graph_breaks: int | None
    speedup_ci_low: float | None = None  # 95 % confidence interval of the speedup (perfdash.confidence)
    speedup_ci_high: float | None = None
    error: str | None
    samples: dict[str, Any] | None = None

    @classmethod
    def from_row(cls, row: Result, *, with_samples: bool = False) -> ResultOut:
        values = {name: getattr(row, name) for name in RESULT_COLUMNS}
        values["samples"] = row.samples if with_samples else None
        return cls.from_values(values)

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> ResultOut:
        """From a mapping of RESULT_COLUMNS (and optionally ``samples``), e.g. a row of a column select."""
        return cls.model_validate({"samples": None, **values,
                                   "gated_speedup": gated_speedup(values["speedup"], values["passed"])})


# The columns of a result that ResultOut carries, besides the (large, deferred) raw samples.
RESULT_COLUMNS: tuple[str, ...] = tuple(name for name in ResultOut.model_fields
                                        if name not in ("gated_speedup", "samples"))


class RunDetail(RunOut):
    results: list[ResultOut]
