"""The JSON upload (:class:`RunPayload`, one run) and its bundle: validated with the same row types the CSV parser
produces."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from perfdash.contract import (
    INT32_MAX,
    MAX_NAME_LENGTH,
    MAX_STATUS_LENGTH,
    AccuracyRow,
    ContractError,
    GraphStats,
    ModelSamples,
    PerformanceRow,
    join_results,
)
from perfdash.duplicates import find_repeats
from perfdash.generated_code import MAX_KERNEL_TIMES, MAX_SOURCE_CHARS, CodeFingerprint, KernelTime
from perfdash.manifest import Manifest, json_int
from service.ingest.bundle import SAMPLE_METRICS, RunBundle, check_start_time

# the ignore: create_model's overloads do not take field definitions through **
_SampleMetricFields: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "SampleMetricFields", **{name: (float | None, Field(None, ge=0)) for name in SAMPLE_METRICS})


class ResultPayload(_SampleMetricFields):
    """One model of a JSON upload: the columns of both CSVs, and optionally the raw samples with perfdash's own
    metrics (SAMPLE_METRICS)."""

    # bundle_from_payload refuses a result with neither a speedup nor an accuracy status: the schema says so too.
    # Strict: a number is a JSON number, never true/false or text, as the schema says (lax mode took true for 1.0);
    # counts are json_int (3.0 is an integer to JSON Schema).
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"anyOf": [
        {"required": ["speedup"], "properties": {"speedup": {"type": "number"}}},
        {"required": ["accuracy"], "properties": {"accuracy": {"type": "string", "minLength": 1}}}]})

    name: str = Field(min_length=1, max_length=MAX_NAME_LENGTH)
    batch_size: Annotated[int, json_int(0, INT32_MAX)] = 0
    # the contract's status shape (perfdash.contract), said in the schema too
    accuracy: str | None = Field(None, max_length=MAX_STATUS_LENGTH,
                                 json_schema_extra={"pattern": "^[A-Za-z][A-Za-z0-9_]*$"})
    dev: str = Field("cpu", max_length=64)
    # non-negative, as the contract's rows check (PerformanceRow): said here so the document says it too
    speedup: float | None = Field(None, ge=0)
    abs_latency: float | None = Field(None, ge=0)
    compilation_latency: float | None = Field(None, ge=0)
    compression_ratio: float | None = Field(None, ge=0)
    eager_peak_mem: float | None = Field(None, ge=0)
    dynamo_peak_mem: float | None = Field(None, ge=0)
    calls_captured: Annotated[int, json_int(0, INT32_MAX)] | None = None
    unique_graphs: Annotated[int, json_int(0, INT32_MAX)] | None = None
    graph_breaks: Annotated[int, json_int(0, INT32_MAX)] | None = None
    unique_graph_breaks: Annotated[int, json_int(0, INT32_MAX)] | None = None
    # timings are positive and peaks non-negative (ModelSamples)
    eager_ms: list[Annotated[float, Field(gt=0)]] | None = None
    compiled_ms: list[Annotated[float, Field(gt=0)]] | None = None
    eager_activation_peak_mem: float | None = Field(None, ge=0)  # perfdash's own, kept with the samples
    dynamo_activation_peak_mem: float | None = Field(None, ge=0)
    # what Inductor generated (perfdash.generated_code), as the samples file carries it
    code: dict[str, Any] | None = None
    kernel_times: list[list[Any]] | None = Field(None, max_length=MAX_KERNEL_TIMES)
    code_source: str | None = Field(None, max_length=MAX_SOURCE_CHARS)

    @model_validator(mode="after")
    def _no_nul_bytes(self) -> ResultPayload:
        for name in ("name", "accuracy", "dev"):
            if "\x00" in (getattr(self, name) or ""):
                raise ValueError(f"NUL byte in {name}")
        return self


class RunPayload(BaseModel):
    """The JSON form of one run: the runner's manifest and its per-model results."""

    manifest: Manifest
    results: list[ResultPayload] = Field(min_length=1)


def bundle_from_payload(payload: RunPayload) -> RunBundle:
    """Validate a JSON upload with the same row types the CSV parser produces."""
    if payload.manifest.schema_version > Manifest.model_fields["schema_version"].default:
        raise ContractError(f"manifest schema_version {payload.manifest.schema_version} is newer than this reader",
                            file="manifest")
    check_start_time(payload.manifest.start_time, "manifest")
    performance, accuracy, samples = [], [], []
    for index, item in enumerate(payload.results):
        where = f"results[{index}]"
        stats = GraphStats(item.calls_captured, item.unique_graphs, item.graph_breaks, item.unique_graph_breaks)
        try:
            if item.speedup is not None:
                performance.append(PerformanceRow(
                    dev=item.dev, name=item.name, batch_size=item.batch_size, speedup=item.speedup,
                    abs_latency=item.abs_latency or 0.0, compilation_latency=item.compilation_latency,
                    compression_ratio=item.compression_ratio, eager_peak_mem=item.eager_peak_mem,
                    dynamo_peak_mem=item.dynamo_peak_mem, stats=stats))
            if item.accuracy is not None:
                accuracy.append(AccuracyRow(dev=item.dev, name=item.name, batch_size=item.batch_size,
                                            accuracy=item.accuracy, stats=stats))
            if item.eager_ms is not None and item.compiled_ms is not None:
                samples.append(ModelSamples(
                    item.name, item.batch_size, tuple(item.eager_ms), tuple(item.compiled_ms),
                    eager_activation_peak_mem=item.eager_activation_peak_mem,
                    dynamo_activation_peak_mem=item.dynamo_activation_peak_mem,
                    **{name: getattr(item, name) for name in SAMPLE_METRICS},
                    code=CodeFingerprint.from_json(item.code) if item.code else None,
                    kernel_times=tuple(KernelTime.from_json(k) for k in item.kernel_times or ()),
                    code_source=item.code_source))
        except (ValueError, KeyError, TypeError) as exc:
            raise ContractError(str(exc), file=where) from None
        if item.speedup is None and item.accuracy is None:
            raise ContractError("a result needs a speedup, an accuracy status or both", file=where)
    repeats = find_repeats("JSON upload", ((i, r.name, r.accuracy or f"{r.speedup or 0:.2f}x")
                                           for i, r in enumerate(payload.results)), unit="results")
    return RunBundle(manifest=payload.manifest, results=tuple(join_results(performance, accuracy)),
                     samples={s.name: s for s in samples}, notices=tuple(r.message for r in repeats))
