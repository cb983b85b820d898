"""The run manifest: what a run's CSVs lack (versions, machine, configuration, timing), as ``{stem}_manifest.json``
carries it and the service's OpenAPI document publishes it. Torch-free, as perfdash.contract (the result files, the
statuses and the names it builds on).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Annotated, Literal

import annotated_types
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    ValidationError,
    model_validator,
)

from perfdash.contract import (
    BACKENDS,
    COMPILE_MODES,
    DEVICES,
    DTYPES,
    FOREIGN_BACKENDS,
    INT32_MAX,
    MAX_FINGERPRINT_LENGTH,
    MAX_NAME_LENGTH,
    MODES,
    SCHEMA_VERSION,
    SUITES,
    ContractError,
    RunKey,
    check_vocabulary,
    find_unstorable_text,
)

# The manifest's JSON is read as its schema says (the service's OpenAPI document publishes it): integers are JSON
# integers (pydantic's lax mode took ``false`` for 0 and ``"3"`` for 3; ``3.0`` is an integer to JSON Schema and
# stays one), booleans are ``true`` and ``false`` (lax mode took ``1`` and ``"yes"``), date-times are RFC 3339 text
# with their offset (lax mode took ``0`` and ``"1700000000"`` for Unix times). Unknown fields are ignored, as the
# schema allows (fields have been added without a new schema_version; older readers skip them), and the content hash
# (service/ingest/bundle.py) is taken over the fields the model keeps, so an ignored field never changes a run's
# identity.

# RFC 3339's date-time (JSON Schema's ``format: date-time``): date, ``T``, time, and an offset or ``Z``.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
_WITHOUT_OFFSET = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?")


def parse_date_time(value: str, *, naive_is_utc: bool = False) -> datetime:
    """An RFC 3339 date-time (with its offset) as an aware datetime; ValueError for anything else. ``naive_is_utc``:
    a time without an offset is UTC (the upload form's timestamp, which older clients sent without one)."""
    if naive_is_utc and _WITHOUT_OFFSET.fullmatch(value):
        value += "+00:00"
    if not _RFC3339.fullmatch(value):
        raise ValueError(f"{value[:40]!r} is not an RFC 3339 date-time with an offset (2026-01-02T01:00:00+00:00)")
    try:
        return datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
    except ValueError as exc:  # the right shape, an impossible date (2026-02-30)
        raise ValueError(f"{value[:40]!r} is not a date-time: {exc}") from None


def _date_time_input(value: object) -> object:
    """A manifest's date-time: a datetime (Python callers) or RFC 3339 text; never a number, never bare digits."""
    if value is None or isinstance(value, datetime):
        return value
    if isinstance(value, str):
        return parse_date_time(value)
    raise ValueError(f"expected an RFC 3339 date-time string, got {type(value).__name__}")


DateTime = Annotated[datetime, BeforeValidator(_date_time_input)]

# A nightly's runs start on its night or up to this many days later (the longest nightly build).
MAX_NIGHT_LAG_DAYS = 2
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_night(value: str) -> date:
    """A night as the command line and the manifest write it: YYYY-MM-DD (a UTC date)."""
    if not _ISO_DATE.fullmatch(value):
        raise ValueError(f"{value[:40]!r} is not a date YYYY-MM-DD")
    try:
        return date.fromisoformat(value)
    except ValueError as exc:  # the right shape, an impossible date
        raise ValueError(f"{value[:40]!r} is not a date: {exc}") from None


def _night_input(value: object) -> object:
    """A manifest's night: a date (Python callers) or YYYY-MM-DD text; never a number (pydantic's lax mode would read
    one as a Unix time)."""
    if value is None or (isinstance(value, date) and not isinstance(value, datetime)):
        return value
    if isinstance(value, str):
        return parse_night(value)
    raise ValueError(f"expected a date YYYY-MM-DD, got {type(value).__name__}")


Night = Annotated[date, BeforeValidator(_night_input)]


def _json_integer_input(value: object) -> object:
    # bool is an int to Python, not to JSON; text is never a number (pydantic's lax int parses "3")
    if isinstance(value, bool | str):
        raise ValueError(f"expected an integer, got {json.dumps(value)[:40]}")
    return value


@dataclass(frozen=True)
class json_int(annotated_types.GroupedMetadata):  # a lower-case name: read as a rule of a type, not a type
    """An integer as JSON Schema says one, between ``ge`` and ``le``: a number without a fraction (3 and 3.0), never
    true/false or text, as ``Annotated[int, json_int(ge, le)]`` (metadata pydantic unpacks in order, and a type
    checker reads as int). Not strict (a model configured strict would refuse 3.0, which the schema allows). The
    bounds come before the validator: after it (a Field's ge/le on the field), pydantic's JSON schema said them as
    unknown ``ge``/``le`` keys, not ``minimum``/``maximum``, and the document then allowed what the model refuses."""

    ge: int
    le: int

    def __iter__(self) -> Iterator[object]:
        yield from (annotated_types.Ge(self.ge), annotated_types.Le(self.le), BeforeValidator(_json_integer_input),
                    Strict(False))


class JenkinsInfo(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    build_url: str | None = Field(None, max_length=500)
    job_name: str | None = None
    build_number: str | None = None


class MachineInfo(BaseModel):
    """The machine a run ran on. The fingerprint uses only stable, explicitly chosen fields."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    host: str = Field("unknown", max_length=MAX_NAME_LENGTH)
    device: Literal["cpu", "cuda"] | str = "cpu"
    cpu_model: str = Field("unknown", max_length=MAX_NAME_LENGTH)
    cpu_count: Annotated[int, json_int(1, INT32_MAX)] | None = None
    gpu_name: str | None = Field(None, max_length=MAX_NAME_LENGTH)
    gpu_driver: str | None = Field(None, max_length=64)
    cuda_version: str | None = Field(None, max_length=64)

    def fingerprint(self) -> str:
        if self.device == "cuda":
            return " | ".join(x for x in (self.gpu_name or "unknown GPU", self.gpu_driver, self.cuda_version) if x)
        cores = f"{self.cpu_count} cores" if self.cpu_count else None
        return " | ".join(x for x in (self.cpu_model, cores) if x)

    @model_validator(mode="after")
    def _fingerprint_fits(self) -> MachineInfo:
        if len(self.fingerprint()) > MAX_FINGERPRINT_LENGTH:
            raise ValueError(f"the machine's fingerprint is longer than {MAX_FINGERPRINT_LENGTH} characters")
        return self


class RunConfig(BaseModel):
    """Every setting that makes two runs comparable; all of it is part of the series."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    # The vocabularies are checked by the validators below; json_schema_extra says them in the JSON schema too (the
    # service's OpenAPI document), so a client knows what is accepted before it is refused.
    suite: str = Field(json_schema_extra={"enum": list(SUITES)})
    backend: str = Field(json_schema_extra={"enum": [*BACKENDS, *FOREIGN_BACKENDS]})
    variant: str = Field("", json_schema_extra={"pattern": "^([a-z0-9][a-z0-9_]*)?$", "maxLength": 64})
    compile_mode: str = Field("default", json_schema_extra={"enum": list(COMPILE_MODES)})
    dtype: str = Field("float32", json_schema_extra={"enum": list(DTYPES)})
    mode: str = Field("inference", json_schema_extra={"enum": list(MODES)})
    device: str = Field("cpu", json_schema_extra={"enum": list(DEVICES)})
    threads: Annotated[int, json_int(1, 1_000_000)] | None = None  # None: all cores of the socket; 1: single-core
    dynamic_shapes: StrictBool = False
    cold_start: StrictBool = False
    batch_size: Annotated[int, json_int(0, INT32_MAX)] | None = None  # an override; None: the suite's own batch sizes
    repeat: Annotated[int, json_int(0, INT32_MAX)] | None = None
    # warm-up iterations per side (compile latency and peak memory are taken over them)
    warmup: Annotated[int, json_int(0, INT32_MAX)] | None = None
    # worker processes the timed iterations were split over (``perfdash run --processes``), pooled into one result.
    # Like repeat, not an axis of the series (perfdash.axes): it changes how noisy a result is, not what it measures
    # (the pooled median of the same number of pairs), so runs of either count are points of one series.
    processes: Annotated[int, json_int(1, 65536)] = 1
    # pyperf's minimum time (``perfdash run --min-loop-seconds``): a model whose ``repeat`` pairs take less kept timing
    # pairs until its loops had lasted this long; 0: exactly ``repeat`` pairs, as PyTorch's harness. Not an axis
    # either: more pairs of the same steps make a result less noisy, not different.
    min_loop_s: Annotated[float, Field(ge=0.0, le=86_400.0)] = 0.0
    total_partitions: Annotated[int, json_int(1, INT32_MAX)] = 1
    partition_id: Annotated[int, json_int(0, INT32_MAX)] = 0
    env: dict[str, str] = Field(default_factory=dict)  # settings such as TORCHINDUCTOR_FREEZING
    # DistributedDataParallel: processes (devices or CPU slices) of the run and their process-group backend;
    # 1 and None: a single process, no torch.distributed
    world_size: Annotated[int, json_int(1, 65536)] = 1
    distributed_backend: Literal["gloo", "nccl"] | None = None
    # Where the suite's models come from when the suite is a library's (torchbench: "torchbenchmark", PyTorch's
    # TorchBench); None: the suite's own library, or a run from before it was recorded (perfdash's torchbench suite
    # then ran torchvision stand-ins under TorchBench's names, whose series are not TorchBench's).
    model_source: str | None = Field(None, max_length=64, json_schema_extra={"pattern": "^[a-z0-9_]+$"})

    @property
    def thread_config(self) -> str:
        return "single-thread" if self.threads == 1 else (f"{self.threads}-threads" if self.threads else "all-cores")

    def key(self) -> RunKey:
        return RunKey(backend=self.backend, variant=self.variant, suite=self.suite, dtype=self.dtype,
                      mode=self.mode, device=self.device)

    @model_validator(mode="after")
    def _known_vocabulary(self) -> RunConfig:
        check_vocabulary(self.key())
        if self.compile_mode not in COMPILE_MODES:
            raise ValueError(f"unknown compile_mode {self.compile_mode!r}; expected one of {', '.join(COMPILE_MODES)}")
        return self


# What perfdash's runner means by its memory figures, per device; the manifest of each run carries the definition it
# was measured with. The PyTorch columns follow run_performance_test's ``warmup`` in PyTorch's
# benchmarks/dynamo/common.py.
MEMORY_DEFINITIONS: dict[str, str] = {
    "cpu": "eager_peak_mem/dynamo_peak_mem: the process's resident set (psutil RSS) right after the eager/compiled "
           "warm-up, GB of 10^9 bytes, as PyTorch's harness (whose CPU figure is this times 100: it multiplies "
           "psutil's memory percentage by the total memory); a forked worker adds the library pages resident in "
           "its fork server that it has not touched, as a process that imported them itself counts them; "
           "compression_ratio = eager/dynamo",
    "cuda": "eager_peak_mem/dynamo_peak_mem: torch.cuda.max_memory_allocated() over the eager/compiled warm-up after "
            "reset_peak_memory_stats(), weights and inputs included, GB of 10^9 bytes, as PyTorch's harness; "
            "compression_ratio = eager/dynamo",
}
ACTIVATION_PEAK_DEFINITION = ("samples file's *_activation_peak_mem: peak of one warm step above what was in use "
                              "before it (CPU: replayed from torch.profiler's memory events; CUDA: "
                              "max_memory_allocated() minus memory_allocated() before the step), GB of 10^9 bytes; "
                              "perfdash's own, not PyTorch's")


# How the headline compilation_latency was measured (runner.execute: the compiled warm-up), carried by each manifest.
COMPILE_LATENCY_DEFINITION = (
    "compilation_latency: the compiled warm-up minus the eager warm-up over the same iterations, as PyTorch's "
    "harness; the compiled warm-up pays what a fresh process's first torch.compile pays (importing Inductor's "
    "compiler, Inductor's first use and, where Inductor has one, its compile-worker pool's start, as "
    "torch._dynamo's inductor backend starts it); a forked worker's share of that set-up is also its own phase, "
    "compile_setup, in the manifest's model_phases")

_PHASE_NAME = r"^[a-z][a-z0-9_]*$"
PhaseSeconds = Annotated[float, annotated_types.Ge(0.0), annotated_types.Le(1e7), Field(allow_inf_nan=False)]


class ModelPhases(BaseModel):
    """Where one model's wall time went: seconds per phase of its worker (the runner's phase names, in the order they
    ran: load, eager_validate, the accuracy check's runs, eager_warmup, compile, memory, measure, the diagnostics
    kernel_profile and fingerprint, compiled_run; the worker's own imports before them, ``import``, and what its
    clock cannot see, ``fork_and_exit``; ``compile_setup`` is the part of ``compile`` that set Inductor up, see
    COMPILE_LATENCY_DEFINITION; ``accuracy_recheck``: the accuracy check's own worker, after a diagnostic killed the
    first; ``later_processes``: the wall time of the workers after the first of ``perfdash run --processes K``,
    together, and ``later_`` and a phase's name, theirs per phase, summed), the worker's wall time as the run saw it,
    and what happened to a diagnostic that did not finish: its phase -> why (over its budget, raised, killed). A
    diagnostic never costs the timed results: they are kept whatever it did."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    seconds: dict[Annotated[str, Field(pattern=_PHASE_NAME, max_length=64)], PhaseSeconds] = Field(
        default_factory=dict)
    wall_s: PhaseSeconds | None = None
    diagnostic_budget_s: PhaseSeconds | None = None
    diagnostics_cut: dict[Annotated[str, Field(pattern=_PHASE_NAME, max_length=64)],
                          Annotated[str, Field(max_length=2000)]] = Field(default_factory=dict)


class BackendInfo(BaseModel):
    """A backend beyond Dynamo's own (onnxruntime, openvino, tensorrt): its packages and how it was set up."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    packages: dict[str, str] = Field(default_factory=dict)  # distribution -> version
    settings: dict[str, str] = Field(default_factory=dict)  # execution provider, integration, precision hint
    models: dict[str, dict[str, str]] = Field(default_factory=dict)  # model -> what it got (e.g. the exporter)


class Manifest(BaseModel):
    """What the CSVs of one run lack. Versioned: readers reject a schema newer than theirs."""

    model_config = ConfigDict(extra="ignore")

    # readers refuse a newer schema (parse, and the schema's maximum says so to a client)
    schema_version: Annotated[int, json_int(1, SCHEMA_VERSION)] = SCHEMA_VERSION
    source: Literal["perfdash", "pytorch"] = "perfdash"
    config: RunConfig
    machine: MachineInfo = Field(default_factory=MachineInfo)
    torch_version: str | None = Field(None, max_length=64)
    torch_git_commit: str | None = Field(None, max_length=64)
    # the torch the run was asked for (perfdash run --torch: a release, nightly, commit or version@commit); the two
    # fields above are what it imported, and the runner stops before any model when they disagree with this one
    torch_requested: str | None = Field(None, max_length=128)
    suite_versions: dict[str, str] = Field(default_factory=dict)
    jenkins: JenkinsInfo = Field(default_factory=JenkinsInfo)
    command: str | None = None
    start_time: DateTime | None = None
    end_time: DateTime | None = None
    # The night the run belongs to: the UTC date its nightly (one Jenkins build, one `perfdash nightly`) started, so
    # a night that crosses midnight UTC stays one night. None: the UTC date of start_time (a run on its own).
    night: Night | None = None
    # model name -> why it could not be loaded or run (the CSV only holds the status)
    model_errors: dict[str, str] = Field(default_factory=dict)
    # The machine's software beyond the configuration and the fingerprint (kernel, CPU microcode, perfdash version,
    # allocator preload ...): not part of the series, but a change of it names an environment shift in detection.
    environment: dict[str, str] = Field(default_factory=dict)
    # what the memory figures of this run mean (MEMORY_DEFINITIONS, ACTIVATION_PEAK_DEFINITION); empty: not recorded
    memory_definitions: dict[str, str] = Field(default_factory=dict)
    backend: BackendInfo | None = None  # None: a torch.compile backend of torch itself
    # model name -> where its worker's wall time went (ModelPhases); empty: not recorded (older runs, PyTorch's)
    model_phases: dict[str, ModelPhases] = Field(default_factory=dict)
    # how compilation_latency was measured (COMPILE_LATENCY_DEFINITION); None: not recorded
    compile_latency_definition: str | None = Field(None, max_length=2000)

    @model_validator(mode="after")
    def _night_is_when_the_run_started(self) -> Manifest:
        # A nightly's night is the date it started: one of its runs starts that day or up to two days later (the
        # longest nightly build). Any other night would file the run under a night it was not part of.
        if self.night is not None and self.start_time is not None:
            started = self.start_time.astimezone(UTC).date()
            if not started - timedelta(days=MAX_NIGHT_LAG_DAYS) <= self.night <= started:
                raise ValueError(f"night {self.night} is not within {MAX_NIGHT_LAG_DAYS} days before the run's start "
                                 f"({started})")
        return self

    def night_of_run(self, made_at: datetime | None = None) -> date:
        """The night a run is filed under: its nightly's (``night``), else the UTC date it started."""
        if self.night is not None:
            return self.night
        started = self.start_time or made_at or datetime.now(UTC)
        return started.astimezone(UTC).date() if started.tzinfo else started.date()

    @model_validator(mode="after")
    def _no_nul_bytes(self) -> Manifest:
        # Postgres text cannot hold NUL; no field of a manifest has a use for one.
        where = find_unstorable_text(self.model_dump(mode="json"))
        if where is not None:
            raise ValueError(f"NUL byte or lone surrogate in {where}")
        return self

    @classmethod
    def read(cls, path: Path) -> Manifest:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ContractError(f"unreadable manifest: {exc}", file=path) from None
        return cls.parse(raw, str(path))

    @classmethod
    def parse(cls, raw: bytes, path: str) -> Manifest:
        """A manifest from bytes (an upload); ``path`` names it in errors."""
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ContractError(f"unreadable manifest: {exc}", file=path) from None
        if not isinstance(data, dict):
            raise ContractError(f"a manifest is a JSON object, not {type(data).__name__}", file=path)
        version = data.get("schema_version", SCHEMA_VERSION)
        if isinstance(version, bool) or not isinstance(version, int | float):  # bool is an int to Python, not JSON
            raise ContractError(f"manifest schema_version must be an integer, got {json.dumps(version)[:40]}",
                                file=path)
        if version > SCHEMA_VERSION:
            raise ContractError(f"manifest schema_version {version!r} is newer than this reader ({SCHEMA_VERSION})",
                                file=path)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            # one line, and without the input (it may be huge or hold control characters)
            reasons = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'manifest'}: {e['msg']}"
                                for e in exc.errors(include_url=False, include_input=False))
            raise ContractError(f"invalid manifest: {reasons}", file=path) from None

    def write(self, path: Path) -> None:
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(self.model_dump_json(indent=2), encoding="utf-8")
        tmp.replace(path)


