"""Ingest: result files (or the same data as JSON) -> one transaction of machine, configuration, run, results,
summary. The API and `perfdash ingest` both call :func:`ingest`.

Files are read only through perfdash.contract; a ContractError names the file, line and column and nothing is stored.
Idempotent by content: a run's key is a hash of what the run is — its configuration (machine included), commit and
partition, plus the manifest's start time when there is one, else the run's content. Uploading the same run again
(rows in any order) returns the stored run unchanged; the same start with other content is a conflict
(:class:`IngestConflict`). A start more than a day ahead of the server's clock is refused.

Post-ingest hooks (detection, reports) are callables ``hook(session, run_id)`` that run after the run has committed,
each in its own transaction; a failing hook is reported, it never undoes the ingest. The app factory and the CLI take
their list from :func:`service.hooks.post_ingest_hooks`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import PurePath
from typing import Annotated, Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator
from sqlalchemy.orm import Session

from perfdash.axes import configuration_columns, configuration_identity
from perfdash.confidence import speedup_interval
from perfdash.contract import (
    INT32_MAX,
    MAX_NAME_LENGTH,
    MAX_STATUS_LENGTH,
    AccuracyRow,
    ContractError,
    GraphStats,
    ModelResult,
    ModelSamples,
    PerformanceRow,
    ResultFileName,
    RunKey,
    find_unstorable_text,
    join_results,
    parse_accuracy_csv,
    parse_performance_csv,
    parse_samples,
)
from perfdash.duplicates import csv_repeats, find_repeats
from perfdash.generated_code import MAX_KERNEL_TIMES, MAX_SOURCE_CHARS, CodeFingerprint, KernelTime
from perfdash.harness_files import Classified, Role, classify
from perfdash.manifest import MachineInfo, Manifest, RunConfig, json_int
from perfdash.metric_registry import RESULT_METRICS, Source
from perfdash.metrics import model_warnings, summarize_results
from perfdash.pytorch_json import KeyHints, ParsedRecords, looks_like_records, parse_records
from service.db import database_unavailable
from service.locks import LockSpace, holding, lock_for_transaction, text_key
from service.models import Configuration, GeneratedCode, Machine, Result, Run, RunSummary, Series
from service.release_verdicts import refresh_configurations

logger = logging.getLogger(__name__)

PostIngestHook = Callable[[Session, int], None]


class IngestConflict(Exception):
    """A run with this key is stored with different content."""


@dataclass(frozen=True, slots=True)
class RunBundle:
    """One run, validated and joined, ready to store."""

    manifest: Manifest
    results: tuple[ModelResult, ...]
    samples: Mapping[str, ModelSamples]
    notices: tuple[str, ...] = ()  # what the user must hear: skipped files, repeated model rows (not content)
    # when the upload was made, for a run without a start of its own: it is dated then, not when it arrives (an
    # upload that waited in the spool across midnight stays on its night); never part of the run's key
    made_at: datetime | None = None

    @property
    def content_sha256(self) -> str:
        """The run's content, rows by name: the same rows in another order are the same run."""
        return self._content_digest(by_name=True)

    @property
    def file_order_sha256(self) -> str:
        """The content digest as runs stored before migration 0003 carry it (rows in file order), so re-posting one
        of them unchanged stays a no-op."""
        return self._content_digest(by_name=False)

    def _content_digest(self, *, by_name: bool) -> str:
        # Normalised content, so the same run posted as CSVs or as JSON hashes the same. Flattened by hand:
        # dataclasses.asdict over 150 nested rows cost a third of a night's ingest.
        def result(r: ModelResult) -> list:
            p = r.performance
            perf = None if p is None else [p.dev, p.speedup, p.abs_latency, p.compilation_latency,
                                           p.compression_ratio, p.eager_peak_mem, p.dynamo_peak_mem,
                                           p.stats.calls_captured, p.stats.unique_graphs, p.stats.graph_breaks,
                                           p.stats.unique_graph_breaks]
            return [r.name, r.batch_size, r.accuracy, perf]

        rows = [result(r) for r in self.results]
        body = {
            # fields added since runs were first hashed are left out when empty, so those runs hash as they did
            "manifest": self.manifest.model_dump(mode="json", exclude=_unset_since_v1(self.manifest)),
            "results": sorted(rows, key=lambda row: (row[0], row[1])) if by_name else rows,
            "samples": [[k, v.batch_size, v.eager_ms, v.compiled_ms, *_activation(v)]
                        for k, v in sorted(self.samples.items())],
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


_MANIFEST_FIELDS_SINCE_V1 = ("environment", "memory_definitions", "backend", "torch_requested", "night",
                             "model_phases", "compile_latency_definition")
# configuration fields added since, with the value that means "as before"
_CONFIG_FIELDS_SINCE_V1: dict[str, object] = {"warmup": None, "world_size": 1, "distributed_backend": None,
                                               "model_source": None}


def _unset_since_v1(manifest: Manifest) -> dict[str, bool | set[str]]:
    """The manifest fields added after runs were first hashed that this one leaves empty (a model_dump exclude)."""
    exclude: dict[str, bool | set[str]] = {name: True for name in _MANIFEST_FIELDS_SINCE_V1
                                           if not getattr(manifest, name)}
    config = {name for name, unset in _CONFIG_FIELDS_SINCE_V1.items() if getattr(manifest.config, name) == unset}
    if config:
        exclude["config"] = config
    return exclude


def _activation(samples: ModelSamples) -> list[list[object]]:
    """The activation peaks and the registry's samples-file metrics for the content hash; nothing when absent, so
    older files hash as they did."""
    peaks = [samples.eager_activation_peak_mem, samples.dynamo_activation_peak_mem]
    measured = [[name, value] for name in SAMPLE_METRICS if (value := getattr(samples, name)) is not None]
    return ([] if peaks == [None, None] else [peaks]) + measured + _generated_code_content(samples)


def _generated_code_content(samples: ModelSamples) -> list[list[object]]:
    """The generated code's part of the content hash (added with migration 0010): nothing when absent, so stored
    runs keep their hash."""
    out: list[list[object]] = []
    if samples.code is not None:
        out.append(["code", samples.code.to_json()])
    if samples.kernel_times:
        out.append(["kernel_times", [k.to_json() for k in samples.kernel_times]])
    if samples.code_source is not None:
        out.append(["code_source", samples.code_source])
    return out


# How far ahead of the server's clock a run may start (clocks of agents drift; a night never starts tomorrow).
MAX_CLOCK_AHEAD = timedelta(days=1)
# Nothing this service shows ran before torch.compile existed; older starts are typos or hostile input.
EARLIEST_START = datetime(2000, 1, 1, tzinfo=UTC)


def check_start_time(moment: datetime | None, where: str, now: datetime | None = None) -> None:
    """ContractError unless the run's start lies between 2000 and a day after ``now`` (default: the clock)."""
    if moment is None:
        return
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    limit = (now or datetime.now(UTC)) + MAX_CLOCK_AHEAD
    if aware > limit:
        raise ContractError(f"start time {moment.isoformat()} is more than a day ahead of the server's clock "
                            f"({limit - MAX_CLOCK_AHEAD:%Y-%m-%d %H:%M} UTC)", file=where)
    if aware < EARLIEST_START:
        raise ContractError(f"start time {moment.isoformat()} is before {EARLIEST_START:%Y-%m-%d}", file=where)


@dataclass(frozen=True, slots=True)
class IngestDefaults:
    """Metadata for PyTorch CSVs that come without a manifest (``--machine``, ``--commit``, ``--timestamp``).

    Without a timestamp the run has no start of its own: it is keyed by its content and dated when the upload was
    made (``made_at``, which `perfdash ingest --url` sends and keeps in the spool), else when it is stored."""

    machine: str | None = None
    commit: str | None = None
    timestamp: datetime | None = None
    torch_version: str | None = None
    host: str | None = None
    made_at: datetime | None = None

    def __post_init__(self) -> None:
        limits = {"machine": MAX_NAME_LENGTH, "commit": 64, "torch_version": 64, "host": MAX_NAME_LENGTH}
        for name, limit in limits.items():
            value = getattr(self, name)
            if value is None:
                continue
            if find_unstorable_text(value) is not None:  # a command line's undecodable bytes arrive as lone surrogates
                raise ContractError("NUL byte or lone surrogate", file=name)
            if len(value) > limit:
                raise ContractError(f"{name} of {len(value)} characters (at most {limit})", file=name)
        check_start_time(self.timestamp, "timestamp")
        check_start_time(self.made_at, "made_at")


@dataclass(frozen=True, slots=True)
class IngestedRun:
    run_id: int
    run_key: str
    created: bool  # False: the same run was already stored, nothing changed
    suite: str
    backend: str
    models: int


@dataclass(frozen=True, slots=True)
class IngestReport:
    runs: tuple[IngestedRun, ...]
    hook_errors: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()
    hook_runs: int = 0  # runs the post-ingest hooks (detection) ran for: the new ones and earlier pending ones
    hooks_s: float = 0.0  # their wall time (the /metrics endpoint's detection time)


# --------------------------------------------------------------------------------------------------------------------
# Files -> bundles


def _as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def default_manifest(key: RunKey, defaults: IngestDefaults) -> Manifest:
    """The manifest of a PyTorch run that came without one: the file name and the caller's flags."""
    machine_name = defaults.machine or "unknown"
    machine = (MachineInfo(host=defaults.host or "unknown", device=key.device, gpu_name=machine_name)
               if key.device == "cuda" else
               MachineInfo(host=defaults.host or "unknown", device=key.device, cpu_model=machine_name))
    config = RunConfig(suite=key.suite, backend=key.backend, variant=key.variant, dtype=key.dtype, mode=key.mode,
                       device=key.device)
    return Manifest(source="pytorch", config=config, machine=machine, torch_git_commit=defaults.commit,
                    torch_version=defaults.torch_version,
                    start_time=_as_utc(defaults.timestamp) if defaults.timestamp else None)


def check_file_names(names: Iterable[str]) -> None:
    """One upload names each file once, by its base name: the directory part of a name is ignored (it is where the
    sender kept the file), so ``a/NAME`` and ``b/NAME`` would be one file with one of them silently dropped."""
    seen: dict[str, str] = {}
    for raw in names:
        base = PurePath(raw).name
        if base in seen:
            both = f"{seen[base]!r} and {raw!r}" if seen[base] != raw else f"{raw!r} twice"
            raise ContractError(f"two files named {base!r} in one upload ({both}): a file's directory is not part "
                                "of its name; upload each directory on its own", file=base)
        seen[base] = raw


def bundles_from_files(files: Mapping[str, bytes], defaults: IngestDefaults = IngestDefaults()) -> list[RunBundle]:
    """Group uploaded files by run (their common stem), parse them through the contract and join them.

    ``files`` maps a file name (its directory is ignored) to its bytes. Accepted: ``*_performance.csv``,
    ``*_accuracy.csv`` (PyTorch's naming, variants included), ``*_manifest.json``, ``*_samples.jsonl``, and the
    harness's benchmark-database JSON records (perfdash.pytorch_json). The companion files the harness and runner.py
    write beside them (perfdash.harness_files) are skipped and named in the bundles' notices; a model written twice
    in one file keeps its last row, also named there (perfdash.duplicates).
    """
    if not files:
        raise ContractError("no result files in the upload")
    check_file_names(files)
    stems: dict[str, dict[str, tuple[str, bytes]]] = {}
    keys: dict[str, RunKey] = {}
    skipped: list[Classified] = []
    records: list[tuple[str, bytes, Classified]] = []
    for raw_name, data in files.items():
        item = classify(raw_name)
        if item.role is Role.COMPANION:
            skipped.append(item)
        elif item.role is Role.BENCHMARK_JSON:
            records.append((item.name, data, item))
        elif item.role in (Role.MANIFEST, Role.SAMPLES):
            stems.setdefault(item.stem, {})["manifest" if item.role is Role.MANIFEST else "samples"] = (item.name,
                                                                                                      data)
        else:
            stems.setdefault(item.stem, {})[item.kind] = (item.name, data)
            keys[item.stem] = ResultFileName.parse(item.name).key
    parsed_records: dict[str, list[tuple[str, ParsedRecords]]] = {}
    for name, data, item in records:
        if not looks_like_records(data):
            skipped.append(Classified(name, Role.COMPANION, reason="JSON, but not benchmark-database records"))
            continue
        parsed = parse_records(data, name, _hints_from_name(item))
        kinds = {k for k, rows in (("performance", parsed.performance), ("accuracy", parsed.accuracy)) if rows}
        csvs = stems.get(parsed.key.stem, {})
        if kinds and all(k in csvs for k in kinds):
            # the harness writes both: the CSV is the complete one (model_fail_to_load rows have no record)
            twins = " and ".join(csvs[k][0] for k in sorted(kinds))
            skipped.append(Classified(name, Role.COMPANION, reason=f"the same rows as {twins}"))
            continue
        parsed_records.setdefault(parsed.key.stem, []).append((name, parsed))
        stems.setdefault(parsed.key.stem, {})
        keys.setdefault(parsed.key.stem, parsed.key)
    if not keys:
        what = ", ".join(f"{c.name} ({c.reason})" for c in skipped) or "nothing"
        raise ContractError(f"no performance or accuracy results in the upload; skipped {what}")
    bundles = []
    for stem, parts in sorted(stems.items()):
        if stem not in keys:
            orphan = next(iter(parts.values()))[0]
            raise ContractError("no performance or accuracy CSV of this run in the upload", file=orphan)
        bundles.append(_bundle(keys[stem], parts, defaults, parsed_records.get(stem, [])))
    notices = [f"skipped {c.name}: {c.reason}" for c in sorted(skipped, key=lambda c: c.name)]
    if notices:
        bundles[0] = replace(bundles[0], notices=tuple(notices) + bundles[0].notices)
    return bundles


def _hints_from_name(item: Classified) -> KeyHints:
    """What a benchmark JSON file's name says of its run (``{stem}_performance.json``), if it follows the contract."""
    if not (item.stem and item.kind):
        return KeyHints()
    try:
        key = ResultFileName.parse(f"{item.stem}_{item.kind}.csv").key
    except ContractError:
        return KeyHints()
    return KeyHints(suite=key.suite, backend=key.backend_variant, dtype=key.dtype, mode=key.mode, device=key.device)


def _bundle(key: RunKey, parts: Mapping[str, tuple[str, bytes]], defaults: IngestDefaults,
            records: Sequence[tuple[str, ParsedRecords]] = ()) -> RunBundle:
    repeats = []
    performance, accuracy = [], []
    if "performance" in parts:
        name, data = parts["performance"]
        performance = parse_performance_csv(data, name)
        repeats += csv_repeats(data, name, "performance")
    if "accuracy" in parts:
        name, data = parts["accuracy"]
        accuracy = parse_accuracy_csv(data, name)
        repeats += csv_repeats(data, name, "accuracy")
    for _, parsed in records:
        performance += parsed.performance
        accuracy += parsed.accuracy
        repeats += parsed.repeats
    if "manifest" in parts:
        name, data = parts["manifest"]
        manifest = Manifest.parse(data, name)
        if manifest.config.key() != key:
            raise ContractError(f"manifest describes {manifest.config.key().stem}, the CSVs are {key.stem}", file=name)
        check_start_time(manifest.start_time, name)
    else:
        manifest = default_manifest(key, defaults)
    samples = parse_samples(parts["samples"][1], parts["samples"][0]) if "samples" in parts else []
    return RunBundle(manifest=manifest, results=tuple(join_results(performance, accuracy)),
                     samples={s.name: s for s in samples}, notices=tuple(r.message for r in repeats),
                     made_at=_as_utc(defaults.made_at) if defaults.made_at else None)


# The metrics of perfdash.metric_registry that come with the samples (training throughput): a JSON upload carries them
# beside the raw timings, under their names.
SAMPLE_METRICS: tuple[str, ...] = tuple(m.name for m in RESULT_METRICS if m.source is Source.SAMPLES)
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


# --------------------------------------------------------------------------------------------------------------------
# Keys


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def configuration_key(config: RunConfig, fingerprint: str) -> str:
    """Hash of everything that makes two runs of a suite comparable (the series axes minus model and batch size):
    the key axes of perfdash.axes and the machine."""
    return _digest(configuration_identity(config, fingerprint))


def run_key(bundle: RunBundle) -> str:
    """What the run is: configuration (machine included), commit, partition, and its start when the manifest has
    one; a run without a start is its content, so the same files posted twice (or copied) are one run."""
    manifest = bundle.manifest
    config = manifest.config
    identity = {
        "configuration": configuration_key(config, manifest.machine.fingerprint()),
        "commit": manifest.torch_git_commit or "",
        "partition": [config.partition_id, config.total_partitions],
    }
    if manifest.start_time is not None:
        identity["start"] = _as_utc(manifest.start_time).isoformat()
    else:
        identity["content"] = bundle.content_sha256
    return _digest(identity)


# --------------------------------------------------------------------------------------------------------------------
# Storing


def _machines(session: Session, infos: Iterable[MachineInfo]) -> dict[str, int]:
    """Machine ids by fingerprint, creating the missing ones (one query, one batched insert)."""
    wanted = {info.fingerprint(): info for info in infos}
    ids = {f: i for f, i in session.execute(sa.select(Machine.fingerprint, Machine.id)
                                            .where(Machine.fingerprint.in_(wanted)))}
    missing = [Machine(fingerprint=f, device=i.device, cpu_model=i.cpu_model, cpu_count=i.cpu_count,
                       gpu_name=i.gpu_name, gpu_driver=i.gpu_driver, cuda_version=i.cuda_version)
               for f, i in wanted.items() if f not in ids]
    if missing:
        session.add_all(missing)
        session.flush()
        ids.update({m.fingerprint: m.id for m in missing})
    return ids


def _configurations(session: Session, manifests: Iterable[Manifest], machine_ids: dict[str, int]) -> dict[str, int]:
    """Configuration ids by key, creating the missing ones."""
    wanted: dict[str, tuple[RunConfig, int]] = {}
    for manifest in manifests:
        fingerprint = manifest.machine.fingerprint()
        wanted[configuration_key(manifest.config, fingerprint)] = (manifest.config, machine_ids[fingerprint])
    ids = {k: i for k, i in session.execute(sa.select(Configuration.key, Configuration.id)
                                            .where(Configuration.key.in_(wanted)))}
    missing = [Configuration(key=key, machine_id=machine_id, **configuration_columns(c))
               for key, (c, machine_id) in wanted.items() if key not in ids]
    if missing:
        session.add_all(missing)
        session.flush()
        ids.update({c.key: c.id for c in missing})
    return ids


def _series_ids(session: Session, wanted: Iterable[tuple[int, str, int]]) -> dict[tuple[int, str, int], int]:
    """Series ids by (configuration id, model name, batch size), creating the missing ones."""
    wanted = list(dict.fromkeys(wanted))
    configuration_ids = {w[0] for w in wanted}

    def load() -> dict[tuple[int, str, int], int]:
        rows = session.execute(sa.select(Series.configuration_id, Series.name, Series.batch_size, Series.id)
                               .where(Series.configuration_id.in_(configuration_ids)))
        return {(c, n, b): i for c, n, b, i in rows}

    ids = load()
    missing = [w for w in wanted if w not in ids]
    if missing:
        session.execute(Series.__table__.insert(), [{"configuration_id": c, "name": n, "batch_size": b}
                                                    for c, n, b in missing])
        ids = load()
    return ids


def _samples_json(samples: ModelSamples) -> dict[str, Any]:
    """The stored ``samples`` of a result: raw timings and, when the runner measured it, perfdash's activation peak."""
    out: dict[str, Any] = {"eager_ms": list(samples.eager_ms), "compiled_ms": list(samples.compiled_ms)}
    for key in ("eager_activation_peak_mem", "dynamo_activation_peak_mem"):
        if (value := getattr(samples, key)) is not None:
            out[key] = value
    return out


def _generated_code_row(run_id: int, samples: ModelSamples) -> dict[str, Any]:
    code = samples.code
    assert code is not None
    return {"run_id": run_id, "name": samples.name, "digest": code.digest, "graphs": code.graphs,
            "kernels": code.kernels, "kernel_digests": [list(pair) for pair in code.kernel_digests],
            "kernel_times": [k.to_json() for k in samples.kernel_times], "source": samples.code_source}


def _result_row(run_id: int, series_id: int, result: ModelResult, samples: ModelSamples | None,
                error: str | None) -> dict[str, Any]:
    perf = result.performance
    stats = perf.stats if perf is not None else GraphStats()
    interval = speedup_interval(samples.eager_ms, samples.compiled_ms) if samples and perf else None
    # Each registry metric from where its entry says: the performance row (PyTorch's columns) or the samples file.
    sources = {Source.PERFORMANCE_CSV: perf, Source.SAMPLES: samples}
    return {
        "run_id": run_id, "series_id": series_id, "name": result.name, "batch_size": result.batch_size,
        "accuracy": result.accuracy, "passed": result.gated_speedup > 0,
        **{m.name: getattr(sources[m.source], m.name, None) for m in RESULT_METRICS},
        "eager_peak_mem": perf.eager_peak_mem if perf else None,
        "dynamo_peak_mem": perf.dynamo_peak_mem if perf else None,
        "calls_captured": stats.calls_captured, "unique_graphs": stats.unique_graphs,
        "graph_breaks": stats.graph_breaks, "unique_graph_breaks": stats.unique_graph_breaks,
        "speedup_ci_low": interval.low if interval else None,
        "speedup_ci_high": interval.high if interval else None,
        "eager_activation_peak_mem": samples.eager_activation_peak_mem if samples else None,
        "dynamo_activation_peak_mem": samples.dynamo_activation_peak_mem if samples else None,
        "samples": _samples_json(samples) if samples else None,
        "error": error,
    }


def _ingest_locks(bundles: Sequence[RunBundle]) -> list[tuple[LockSpace, int]]:
    """The locks an upload takes: the machines and the configurations of its runs (a run, its series and the
    Releases view's pairs all belong to one configuration)."""
    locks = []
    for bundle in bundles:
        fingerprint = bundle.manifest.machine.fingerprint()
        locks += [(LockSpace.INGEST_MACHINE, text_key(fingerprint)),
                  (LockSpace.INGEST_CONFIGURATION, text_key(configuration_key(bundle.manifest.config, fingerprint)))]
    return locks


def store_runs(session: Session, bundles: Sequence[RunBundle]) -> list[IngestedRun]:
    """Add runs in the session's transaction (flushed, not committed), in a handful of batched statements whatever
    their number; an identical stored run is returned as is, the same key with other content raises
    :class:`IngestConflict`."""
    # Another process may be storing the same run, or creating the same machine or configuration, right now: wait
    # for it (its commit), then read what is stored (service.locks).
    lock_for_transaction(session, _ingest_locks(bundles))
    keyed = [(run_key(b), b.content_sha256, b) for b in bundles]
    stored = {r.run_key: r for r in session.scalars(sa.select(Run).where(Run.run_key.in_([k for k, _, _ in keyed])))}
    out: dict[int, IngestedRun] = {}
    new: list[tuple[int, str, str, RunBundle]] = []
    for index, (key, content, bundle) in enumerate(keyed):
        config = bundle.manifest.config
        existing = stored.get(key)
        if existing is None and any(k == key for _, k, _, _ in new):
            existing_content = next(c for _, k, c, _ in new if k == key)
            if existing_content != content:
                raise IngestConflict(f"two runs in the upload share the key of {config.key().stem} "
                                     f"started {bundle.manifest.start_time}")
            continue  # the same run twice in one upload: stored once
        if existing is not None:
            if existing.content_sha256 != content and existing.content_sha256 != bundle.file_order_sha256:
                raise IngestConflict(f"run {existing.id} ({config.key().stem}, started {bundle.manifest.start_time}) "
                                     "is already stored with different results; a re-run needs its own start time")
            out[index] = IngestedRun(existing.id, key, False, config.suite, config.key().backend_variant,
                                     len(bundle.results))
            continue
        new.append((index, key, content, bundle))
    if new:
        machine_ids = _machines(session, (b.manifest.machine for *_, b in new))
        configuration_ids = _configurations(session, (b.manifest for *_, b in new), machine_ids)
        runs = []
        for _, key, content, bundle in new:
            m = bundle.manifest
            dated = _as_utc(m.start_time) if m.start_time else bundle.made_at or datetime.now(UTC)
            runs.append(Run(
                run_key=key, content_sha256=content,
                configuration_id=configuration_ids[configuration_key(m.config, m.machine.fingerprint())],
                night=m.night_of_run(dated), started_at=dated, ended_at=m.end_time,
                torch_version=m.torch_version,
                torch_git_commit=m.torch_git_commit, suite_versions=dict(m.suite_versions), host=m.machine.host,
                jenkins_url=m.jenkins.build_url, source=m.source, command=m.command,
                partition_id=m.config.partition_id, total_partitions=m.config.total_partitions, hooks_pending=True,
                environment=dict(m.environment) or None))
        session.add_all(runs)
        session.flush()
        series = _series_ids(session, ((run.configuration_id, r.name, r.batch_size)
                                       for run, (*_, bundle) in zip(runs, new, strict=True) for r in bundle.results))
        rows = [_result_row(run.id, series[(run.configuration_id, r.name, r.batch_size)], r, bundle.samples.get(r.name),
                            bundle.manifest.model_errors.get(r.name))
                for run, (*_, bundle) in zip(runs, new, strict=True) for r in bundle.results]
        code_rows = [_generated_code_row(run.id, samples)
                     for run, (*_, bundle) in zip(runs, new, strict=True) for r in bundle.results
                     if (samples := bundle.samples.get(r.name)) is not None and samples.code is not None]
        if code_rows:
            session.execute(GeneratedCode.__table__.insert(), code_rows)
        if rows:
            # Core insert, not ORM bulk: the ORM drops None values and splits rows with different None patterns
            # into many small statements (x10 slower for a night's 2,700 rows).
            session.execute(Result.__table__.insert(), rows)
        summaries = []
        for run, (index, key, _, bundle) in zip(runs, new, strict=True):
            summary = summarize_results(bundle.results)
            summaries.append(RunSummary(
                run_id=run.id, passed=summary.passed, total=summary.total, geomean_speedup=summary.geomean_speedup,
                geomean_speedup_unclipped=summary.geomean_speedup_unclipped,
                mean_compile_time_s=summary.mean_compile_time_s,
                mean_compression_ratio=summary.mean_compression_ratio,
                warnings=(warned := [{"name": w.name, "reason": w.reason} for w in model_warnings(bundle.results)]),
                warnings_count=len(warned)))
            config = bundle.manifest.config
            out[index] = IngestedRun(run.id, key, True, config.suite, config.key().backend_variant,
                                     len(bundle.results))
        session.add_all(summaries)
        session.flush()
        # the Releases view's kept verdicts of each configuration that got a run (in this transaction: a stored run
        # always has them, whatever hooks run)
        refresh_configurations(session, {run.configuration_id for run in runs})
    # a duplicate inside the upload reports the run stored for its first occurrence
    for index, (key, _, bundle) in enumerate(keyed):
        if index not in out:
            first = next(r for r in out.values() if r.run_key == key)
            out[index] = IngestedRun(first.run_id, key, False, first.suite, first.backend, len(bundle.results))
    return [out[i] for i in range(len(keyed))]


# Runs whose hooks are retried by one ingest: enough for the runs of a night that met a database outage.
PENDING_HOOKS_BATCH = 50


def run_hooks(session: Session, run_ids: Sequence[int], hooks: Sequence[PostIngestHook]) -> list[str]:
    """Run the hooks for each run, each in its own transaction, and clear the run's ``hooks_pending``. A run whose
    hook failed because the database went away stays pending (the next ingest or `perfdash detect` retries it); any
    other failure is reported and not retried.

    Another process (a replica, `perfdash detect`) may be running the hooks of the same runs or of other runs of
    their configurations: the hooks run holding their configurations' locks (service.locks), and only for the runs
    still pending once they are held, so each run's hooks run once and one configuration's runs are never detected
    by two processes at once."""
    if not run_ids:
        return []
    try:
        configurations = set(session.scalars(sa.select(Run.configuration_id).where(Run.id.in_(list(run_ids)))))
        session.commit()  # nothing of ours open while waiting for another process's hooks
        with holding(session.get_bind(), LockSpace.RUN_HOOKS, configurations):
            pending = set(session.scalars(sa.select(Run.id).where(Run.id.in_(list(run_ids)), Run.hooks_pending)))
            session.commit()
            return _run_hooks_held(session, [run_id for run_id in run_ids if run_id in pending], hooks)
    except Exception as exc:
        if not database_unavailable(exc):
            raise
        try:
            session.rollback()
        except sa.exc.SQLAlchemyError:  # the connection is gone; the session starts over on its next use
            session.close()
        logger.warning("post-ingest hooks of runs %s deferred: database unavailable", list(run_ids))
        return [f"hooks on run {run_id}: database unavailable; retried on the next ingest" for run_id in run_ids]


def _run_hooks_held(session: Session, run_ids: Sequence[int], hooks: Sequence[PostIngestHook]) -> list[str]:
    errors: list[str] = []
    # A hook with ``for_runs`` (detection: service.detection.night) takes an upload's runs at once, to spread them
    # over the cores; it commits each run itself and returns one outcome a run (run_id, error, unavailable).
    batched = [hook for hook in hooks if hasattr(hook, "for_runs")] if len(run_ids) > 1 else []
    deferred = {run_id for hook in batched for run_id in _run_batch_hook(session, hook, run_ids, errors)}
    for run_id in run_ids:
        unavailable = run_id in deferred
        for hook in hooks:
            if any(hook is b for b in batched):
                continue
            try:
                hook(session, run_id)
                session.commit()
            except Exception as exc:  # a hook never undoes an ingest; its failure is reported to the client
                name = getattr(hook, "__name__", hook)
                if database_unavailable(exc):  # expected during an outage: retried later, no traceback
                    unavailable = True
                    logger.warning("post-ingest hook %s for run %s deferred: database unavailable", name, run_id)
                    errors.append(f"{name} on run {run_id}: database unavailable; retried on the next ingest")
                else:
                    logger.exception("post-ingest hook %s failed for run %s", name, run_id)
                    # a database error's text quotes SQL and values: the log has it, the client gets its kind
                    reason = f"database error ({type(exc).__name__})" if isinstance(exc, sa.exc.SQLAlchemyError) \
                        else str(exc)
                    errors.append(f"{name} on run {run_id}: {reason}")
                try:
                    session.rollback()
                except sa.exc.SQLAlchemyError:  # the connection is gone; the session starts over on its next use
                    session.close()
        if unavailable:
            continue
        try:
            session.execute(sa.update(Run).where(Run.id == run_id).values(hooks_pending=False))
            session.commit()
        except Exception as exc:
            session.rollback()
            if not database_unavailable(exc):
                raise
    return errors


def _run_batch_hook(session: Session, hook: PostIngestHook, run_ids: Sequence[int], errors: list[str]) -> set[int]:
    """Run a hook's ``for_runs`` over ``run_ids``; its failures go to ``errors``; returns the runs to retry later."""
    name = getattr(hook, "__name__", hook)
    try:
        outcomes = hook.for_runs(session, run_ids)  # type: ignore[attr-defined]  # run_hooks checked it has one
    except Exception as exc:  # the batch as a whole failed (the pool, the database): every run, as one hook would
        try:
            session.rollback()
        except sa.exc.SQLAlchemyError:
            session.close()
        unavailable = database_unavailable(exc)
        if not unavailable:
            logger.exception("post-ingest hook %s failed for runs %s", name, list(run_ids))
        reason = "database unavailable; retried on the next ingest" if unavailable else (
            f"database error ({type(exc).__name__})" if isinstance(exc, sa.exc.SQLAlchemyError) else str(exc))
        errors.extend(f"{name} on run {run_id}: {reason}" for run_id in run_ids)
        return set(run_ids) if unavailable else set()
    deferred = set()
    for outcome in outcomes:
        if outcome.error is None:
            continue
        if outcome.unavailable:
            deferred.add(outcome.run_id)
            logger.warning("post-ingest hook %s for run %s deferred: database unavailable", name, outcome.run_id)
            errors.append(f"{name} on run {outcome.run_id}: database unavailable; retried on the next ingest")
        else:
            errors.append(f"{name} on run {outcome.run_id}: {outcome.error}")
    return deferred


def pending_hook_runs(session: Session, limit: int = PENDING_HOOKS_BATCH) -> list[int]:
    """Runs stored but not yet through their hooks, oldest first."""
    return list(session.scalars(sa.select(Run.id).where(Run.hooks_pending).order_by(Run.id).limit(limit)))


def ingest(session: Session, bundles: Sequence[RunBundle], hooks: Sequence[PostIngestHook] = ()) -> IngestReport:
    """Store every run of an upload in one transaction (all or nothing), commit, then run the post-ingest hooks for
    the new runs and for runs an earlier ingest could not finish (the database went away after its commit)."""
    try:
        stored = tuple(store_runs(session, bundles))
        session.commit()
    except BaseException:
        session.rollback()
        raise
    new = [run.run_id for run in stored if run.created]
    try:
        earlier = [run_id for run_id in pending_hook_runs(session) if run_id not in new]
    except Exception as exc:
        session.rollback()
        if not database_unavailable(exc):
            raise
        earlier = []
    started = time.perf_counter()
    errors = run_hooks(session, [*earlier, *new], hooks)
    return IngestReport(runs=stored, hook_errors=tuple(errors), notices=tuple(n for b in bundles for n in b.notices),
                        hook_runs=len(earlier) + len(new) if hooks else 0, hooks_s=time.perf_counter() - started)
