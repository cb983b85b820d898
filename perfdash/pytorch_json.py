"""The JSON records PyTorch's harness writes for its benchmark database, read and written.

Schema (benchmarks/dynamo/common.py ``output_json``, called by ``write_outputs`` for every CSV row): one JSON object
per line, one line per column of the row except ``dev``, ``name`` and ``batch_size``::

    {"benchmark": {"name": "TorchInductor", "mode": "inference", "dtype": "float32",
                   "extra_info": {"device": "cpu", "quantization": null, "batch_size": 8, ...the run's args...}},
     "model": {"name": "resnet18", "type": "OSS model", "backend": "inductor", "origins": ["timm_models"]},
     "metric": {"name": "speedup", "benchmark_values": [1.52]}}

A string value (the ``accuracy`` status) goes to ``metric.extra_info.benchmark_values`` instead, because the
database's value column is numeric. The file is the CSV's name with ``.json``. Rows the harness writes from its
parent process (a ``timeout``) carry empty mode, dtype and backend; they take the rest of the file's configuration.
Rows written before a model loaded (``model_fail_to_load``) have no record at all: the CSV is the complete source.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perfdash.contract import (
    ACCURACY_COLUMNS,
    DEVICES,
    DTYPES,
    MODES,
    PERFORMANCE_COLUMNS,
    STAT_COLUMNS,
    SUITES,
    AccuracyRow,
    ContractError,
    GraphStats,
    ModelResult,
    PerformanceRow,
    RunKey,
    split_backend_variant,
)
from perfdash.duplicates import RepeatedModel, find_repeats

BENCHMARK_NAME = "TorchInductor"
_NOT_METRICS = ("dev", "name", "batch_size")


class _Benchmark(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = ""
    mode: str | None = None
    dtype: str | None = None
    extra_info: dict[str, Any] = Field(default_factory=dict)


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(min_length=1)
    backend: str | None = None
    origins: list[str] = Field(default_factory=list)


class _Metric(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(min_length=1)
    benchmark_values: list[Any] = Field(default_factory=list)
    extra_info: dict[str, Any] = Field(default_factory=dict)


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore")  # newer writers add runners, metadata, ...
    benchmark: _Benchmark
    model: _Model
    metric: _Metric


@dataclass(frozen=True, slots=True)
class ParsedRecords:
    key: RunKey
    performance: tuple[PerformanceRow, ...]
    accuracy: tuple[AccuracyRow, ...]
    repeats: tuple[RepeatedModel, ...]


@dataclass(frozen=True, slots=True)
class KeyHints:
    """What the file name or the user's flags say about the run; the records must not contradict it."""

    suite: str | None = None
    backend: str | None = None  # with variant, e.g. inductor_no_cudagraphs
    dtype: str | None = None
    mode: str | None = None
    device: str | None = None


def _value(metric: _Metric) -> Any:
    values = metric.benchmark_values or metric.extra_info.get("benchmark_values") or []
    return values[0] if values else None


def _agree(field: str, values: Iterable[str | None], hint: str | None, file: str, flag: str) -> str:
    found = sorted({v for v in values if v})
    if hint:
        if found and any(v != hint for v in found):
            raise ContractError(f"records say {field} {', '.join(found)}, the name or flags say {hint}", file=file)
        return hint
    if len(found) > 1:
        raise ContractError(f"records of several runs in one file: {field} {', '.join(found)}", file=file)
    if not found:
        raise ContractError(f"no {field} in the records; add {flag}", file=file)
    return found[0]


def looks_like_records(data: bytes) -> bool:
    """Whether a JSON file is the harness's benchmark records (its first line an object with benchmark, model and
    metric), rather than some other JSON that happens to sit in the directory."""
    first = data.lstrip()[:1]
    if first != b"{":
        return False
    line = data.lstrip().split(b"\n", 1)[0]
    try:
        head = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(head, dict) and {"benchmark", "model", "metric"} <= head.keys()


def parse_records(data: bytes, file: str, hints: KeyHints = KeyHints()) -> ParsedRecords:
    """Rows of one benchmark-database JSON file; errors name the file and line."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ContractError(f"not UTF-8 text (offset {exc.start})", file=file) from None
    records: list[tuple[int, _Record]] = []
    for line_number, record_text in enumerate(text.splitlines(), start=1):
        if not record_text.strip():
            continue
        try:
            records.append((line_number, _Record.model_validate_json(record_text)))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ContractError(f"not a benchmark record: {where}: {first['msg']}", file=file,
                                line=line_number) from None
    if not records:
        raise ContractError("no benchmark records", file=file, line=1)

    suite = _agree("suite", (next(iter(r.model.origins), None) for _, r in records), hints.suite, file, "--suite")
    dtype = _agree("dtype", (r.benchmark.dtype for _, r in records), hints.dtype, file, "--dtype")
    mode = _agree("mode", (r.benchmark.mode for _, r in records), hints.mode, file, "--mode")
    device = _agree("device", (r.benchmark.extra_info.get("device") for _, r in records), hints.device, file,
                    "--device")
    # the records name the backend without its variant (inductor for inductor_no_cudagraphs)
    hint_backend, variant = split_backend_variant(hints.backend) if hints.backend else (None, "")
    backend = _agree("backend", (r.model.backend for _, r in records), hint_backend, file, "--backend")
    for value, allowed, field in ((suite, SUITES, "suite"), (dtype, DTYPES, "dtype"), (mode, MODES, "mode"),
                                  (device, DEVICES, "device")):
        if value not in allowed:
            raise ContractError(f"unknown {field} {value!r}; expected one of {', '.join(allowed)}", file=file)
    key = RunKey(backend=backend, variant=variant, suite=suite, dtype=dtype, mode=mode, device=device)

    # model -> metric -> (line, value); a metric seen again for a model is a repeated row: the last one wins
    models: dict[str, dict[str, tuple[int, Any]]] = {}
    batch: dict[str, int] = {}
    speedup_lines: list[tuple[int, str, str]] = []
    accuracy_lines: list[tuple[int, str, str]] = []
    for line_number, record in records:
        name, metric, value = record.model.name, record.metric.name, _value(record.metric)
        if metric in _NOT_METRICS:
            continue
        models.setdefault(name, {})[metric] = (line_number, value)
        size = record.benchmark.extra_info.get("batch_size")
        if isinstance(size, int) and size > 0:
            batch[name] = size
        if metric == "speedup":
            speedup_lines.append((line_number, name,
                                  f"{value:.2f}x" if isinstance(value, int | float) else str(value)))
        elif metric == "accuracy":
            accuracy_lines.append((line_number, name, str(value)))

    performance, accuracy = [], []
    for name, metrics in models.items():
        def number(column: str, integer: bool = False, _m: dict = metrics, _n: str = name) -> Any:
            line, raw = _m.get(column, (None, None))
            if raw is None or raw == "":
                return None
            try:
                value = float(raw)
            except (TypeError, ValueError):
                raise ContractError(f"model {_n!r}: {column} is not a number: {raw!r}", file=file,
                                    line=line) from None
            if not math.isfinite(value) or value < 0:
                raise ContractError(f"model {_n!r}: {column} must be a finite number >= 0: {raw!r}", file=file,
                                    line=line)
            return int(value) if integer else value

        stats = GraphStats(**{c: number(c, integer=True) for c in STAT_COLUMNS})
        dev = device
        if "accuracy" in metrics:
            line, status = metrics["accuracy"]
            try:
                accuracy.append(AccuracyRow(dev=dev, name=name, batch_size=batch.get(name, 0), accuracy=str(status),
                                            stats=stats))
            except ValueError as exc:
                raise ContractError(f"model {name!r}: {exc}", file=file, line=line) from None
        if "speedup" in metrics:
            performance.append(PerformanceRow(
                dev=dev, name=name, batch_size=batch.get(name, 0), speedup=number("speedup") or 0.0,
                abs_latency=number("abs_latency") or 0.0,
                compilation_latency=number("compilation_latency"), compression_ratio=number("compression_ratio"),
                eager_peak_mem=number("eager_peak_mem"), dynamo_peak_mem=number("dynamo_peak_mem"), stats=stats))
    repeats = find_repeats(file, speedup_lines) + find_repeats(file, accuracy_lines)
    return ParsedRecords(key=key, performance=tuple(performance), accuracy=tuple(accuracy), repeats=tuple(repeats))


# --------------------------------------------------------------------------------------------------------------------
# Writing


def _record(key: RunKey, name: str, batch_size: int, metric: str, value: Any, extra: dict[str, Any]) -> str:
    metric_body: dict[str, Any] = ({"name": metric, "extra_info": {"benchmark_values": [value]}}
                                   if isinstance(value, str) else {"name": metric, "benchmark_values": [value]})
    return json.dumps({
        "benchmark": {"name": BENCHMARK_NAME, "mode": key.mode, "dtype": key.dtype,
                      "extra_info": {"device": key.device, "quantization": None, "batch_size": batch_size,
                                     **extra}},
        "model": {"name": name, "type": "OSS model", "backend": key.backend, "origins": [key.suite]},
        "metric": metric_body,
    })


def export_records(key: RunKey, results: Sequence[ModelResult], extra: dict[str, Any] | None = None
                   ) -> dict[str, list[str]]:
    """The lines of ``{stem}_performance.json`` and ``{stem}_accuracy.json`` for one run, in the harness's order of
    columns; a value perfdash does not have is left out, as the harness leaves out columns it did not write."""
    extra = dict(extra or {})
    if key.variant:
        extra.setdefault("variant", key.variant)
    out: dict[str, list[str]] = {"performance": [], "accuracy": []}
    for r in results:
        stats = {c: getattr((r.performance.stats if r.performance else None) or GraphStats(), c) for c in STAT_COLUMNS}
        if r.performance is not None:
            p = r.performance
            for column in PERFORMANCE_COLUMNS[3:]:
                value = getattr(p, column)
                if value is not None:
                    out["performance"].append(_record(key, r.name, r.batch_size, column, value, extra))
            for column, value in stats.items():
                if value is not None:
                    out["performance"].append(_record(key, r.name, r.batch_size, column, value, extra))
        if r.accuracy is not None and r.accuracy != "missing":
            for column in ACCURACY_COLUMNS[3:]:
                out["accuracy"].append(_record(key, r.name, r.batch_size, column, r.accuracy, extra))
    return out
