"""The result contract: PyTorch-compatible result files and statuses (the run manifest: perfdash/manifest.py).

The runner writes with this module and the service reads with it, so there is one definition of the format. It must
stay torch-free (the service installs without torch).

Files of one run share a stem ``{backend}[_{variant}]_{suite}_{dtype}_{mode}_{device}``:

- ``{stem}_performance.csv`` and ``{stem}_accuracy.csv``: the columns of PyTorch's ``benchmarks/dynamo`` harness;
- ``{stem}_manifest.json``: what the CSVs lack (versions, machine, configuration, timing of the run;
  perfdash.manifest);
- ``{stem}_samples.jsonl``: one JSON object per model with the raw eager and compiled timings.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from perfdash.generated_code import MAX_KERNEL_TIMES, MAX_SOURCE_CHARS, CodeFingerprint, KernelTime

SCHEMA_VERSION = 1

SUITES: tuple[str, ...] = ("torchbench", "huggingface", "timm_models", "hf_vision")
BACKENDS: tuple[str, ...] = ("eager", "aot_eager", "inductor", "aot_inductor", "onnxruntime", "tensorrt", "openvino")
DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16", "amp")
MODES: tuple[str, ...] = ("inference", "training")
DEVICES: tuple[str, ...] = ("cpu", "cuda")
COMPILE_MODES: tuple[str, ...] = ("default", "reduce-overhead", "max-autotune")
KINDS: tuple[str, ...] = ("performance", "accuracy")
# Backends accepted in uploads besides BACKENDS: the other compiler names of PyTorch's benchmarks/dynamo/runner.py
# (ts_nnc, ts_nvfuser, trt, aot_cudagraphs, nvprims_nvfuser: old result files carry them).
FOREIGN_BACKENDS: tuple[str, ...] = ("ts", "trt", "aot", "nvprims", "cudagraphs")
# A variant is PyTorch CI's suffix after the backend (no_cudagraphs, dynamic, cpp_wrapper, max_autotune, ...).
_VARIANT_SHAPE = re.compile(r"^[a-z0-9][a-z0-9_]*$")
# The longest text the store keeps for a model name, a status, a machine name (the service's columns).
MAX_NAME_LENGTH = 200
MAX_STATUS_LENGTH = 64
MAX_FINGERPRINT_LENGTH = 300
# The most characters one CSV field may hold: PyTorch's fields are short numbers and names (the csv module's own
# limit, 128 KiB, raises an error of its own).
MAX_FIELD_CHARS = 4096
# Counts (batch size, threads, graph stats) are stored as 32-bit integers.
INT32_MAX = 2**31 - 1

PERFORMANCE_COLUMNS: tuple[str, ...] = (
    "dev",
    "name",
    "batch_size",
    "speedup",
    "abs_latency",
    "compilation_latency",
    "compression_ratio",
    "eager_peak_mem",
    "dynamo_peak_mem",
)
ACCURACY_COLUMNS: tuple[str, ...] = ("dev", "name", "batch_size", "accuracy")
# Dynamo's counters after the fixed columns of both files, in the order of get_dynamo_stats() in PyTorch's
# benchmarks/dynamo/common.py (speedup_experiment and _write_accuracy_row append them in that order). Files written
# before the last four existed lack them; readers take every one of these columns as optional.
STAT_COLUMNS: tuple[str, ...] = (
    "calls_captured",
    "unique_graphs",
    "fallbacks_to_eager",
    "graph_breaks",
    "unique_graph_breaks",
    "autograd_captures",
    "autograd_compiles",
    "cudagraph_skips",
)
# After the counters, PyTorch's accuracy row ends with the compile wall time of its check (_write_accuracy_row).
ACCURACY_TAIL_COLUMNS: tuple[str, ...] = ("compilation_latency",)

PASSING_STATUSES: frozenset[str] = frozenset({"pass", "pass_due_to_skip"})
KNOWN_STATUSES: tuple[str, ...] = (
    "pass",
    "pass_due_to_skip",
    "fail_accuracy",
    "fail_to_run",
    "OOM",
    "eager_1st_run_fail",
    "eager_1st_run_OOM",
    "eager_2nd_run_fail",
    "eager_2nd_run_OOM",
    "eager_two_runs_differ",
    "model_fail_to_load",
    "eager_fail_to_run",
    "timeout",
    "infra_error",
)
# Unknown statuses are kept and counted as failures; only strings that cannot be a status at all (a number from a
# shifted column, an empty cell, free text) are rejected as malformed.
_STATUS_SHAPE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def is_passing(status: str | None) -> bool:
    return status in PASSING_STATUSES


def accuracy_gate(accuracy: str | None) -> bool:
    """Whether a model's performance counts: its accuracy passed, or the run measured no accuracy at all."""
    return accuracy is None or is_passing(accuracy)


def gated_speedup(speedup: float | None, passed: bool) -> float:
    """The speedup that counts (summary, report, API): as measured when the model passed its gate, else 0."""
    return (speedup or 0.0) if passed else 0.0


def display_status(accuracy: str | None, passed: bool) -> str:
    """The status a stored result shows: its accuracy status, else (a run without an accuracy file) ``pass`` or
    ``fail_to_run`` by its gate."""
    return accuracy or ("pass" if passed else "fail_to_run")


class ContractError(ValueError):
    """A result file that does not follow the contract; names the file, line and column when they are known."""

    def __init__(self, message: str, *, file: str | Path | None = None, line: int | None = None,
                 column: str | None = None) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.column = column
        super().__init__(str(self))

    def __str__(self) -> str:
        where = []
        if self.file is not None:
            where.append(self.file)
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.column is not None:
            where.append(f"column {self.column!r}")
        return f"{', '.join(where)}: {self.message}" if where else self.message


# --------------------------------------------------------------------------------------------------------------------
# File names


@dataclass(frozen=True, slots=True)
class RunKey:
    """The configuration a result file belongs to, as encoded in its name."""

    backend: str
    suite: str
    dtype: str
    mode: str
    device: str
    variant: str = ""

    @property
    def backend_variant(self) -> str:
        return f"{self.backend}_{self.variant}" if self.variant else self.backend

    @property
    def stem(self) -> str:
        return f"{self.backend_variant}_{self.suite}_{self.dtype}_{self.mode}_{self.device}"

    def filename(self, kind: str) -> str:
        suffix = {"performance": "_performance.csv", "accuracy": "_accuracy.csv", "manifest": "_manifest.json",
                  "samples": "_samples.jsonl"}[kind]
        return self.stem + suffix


@dataclass(frozen=True, slots=True)
class ResultFileName:
    key: RunKey
    kind: str  # performance | accuracy

    @classmethod
    def parse(cls, name: str | Path) -> ResultFileName:
        """Parse ``{backend}[_{variant}]_{suite}_{dtype}_{mode}_{device}_{kind}.csv`` (PyTorch's naming)."""
        base = Path(name).name
        if not base.endswith(".csv"):
            raise ContractError("not a CSV result file (expected a .csv name)", file=base)
        parts = base[: -len(".csv")].split("_")
        if len(parts) < 6:
            raise ContractError(
                "name does not follow {backend}_{suite}_{dtype}_{mode}_{device}_{performance|accuracy}.csv", file=base
            )
        kind, device, mode, dtype = parts[-1], parts[-2], parts[-3], parts[-4]
        if kind not in KINDS:
            raise ContractError(f"unknown result kind {kind!r}; expected performance or accuracy", file=base)
        if mode not in MODES:
            raise ContractError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}", file=base)
        head = "_".join(parts[:-4])
        suite = next((s for s in sorted(SUITES, key=len, reverse=True) if head.endswith("_" + s)), None)
        if suite is None:
            raise ContractError(f"no known suite in the name; expected one of {', '.join(SUITES)}", file=base)
        backend_variant = head[: -len(suite) - 1]
        try:
            backend, variant = split_backend_variant(backend_variant)
        except ContractError as exc:
            raise ContractError(exc.message, file=base) from None
        key = RunKey(backend=backend, variant=variant, suite=suite, dtype=dtype, mode=mode, device=device)
        check_vocabulary(key, base)
        return cls(key, kind)


def split_backend_variant(backend_variant: str) -> tuple[str, str]:
    """``inductor_no_cudagraphs`` -> (``inductor``, ``no_cudagraphs``); unknown backends split at the first ``_``."""
    for backend in sorted(BACKENDS, key=len, reverse=True):
        if backend_variant == backend:
            return backend, ""
        if backend_variant.startswith(backend + "_"):
            return backend, backend_variant[len(backend) + 1 :]
    backend, _, variant = backend_variant.partition("_")
    if not backend:
        raise ContractError(f"empty backend in {backend_variant!r}")
    return backend, variant


def check_vocabulary(key: RunKey, file: str | None = None) -> None:
    """ContractError unless suite, backend, dtype, mode and device are the contract's names (any variant of a known
    backend is accepted, e.g. inductor_no_cudagraphs)."""
    checks = (("suite", key.suite, SUITES), ("backend", key.backend, BACKENDS + FOREIGN_BACKENDS),
              ("dtype", key.dtype, DTYPES), ("mode", key.mode, MODES), ("device", key.device, DEVICES))
    for axis, value, known in checks:
        if value not in known:
            raise ContractError(f"unknown {axis} {value!r}; expected one of {', '.join(known)}", file=file)
    if key.variant and (len(key.variant) > 64 or not _VARIANT_SHAPE.match(key.variant)):
        raise ContractError(f"variant {key.variant!r} is not lower-case letters, digits and '_' (at most 64)",
                            file=file)


# Text a database cannot store faithfully: NUL, and lone UTF-16 surrogates (JSON's "\ud800" decodes to one).
_UNSTORABLE_TEXT = re.compile("[\x00\ud800-\udfff]")


def find_unstorable_text(value: object, path: str = "") -> str | None:
    """The path of the first string (or key) holding a NUL byte or a lone surrogate in nested dicts and lists."""
    if isinstance(value, str):
        return (path or "value") if _UNSTORABLE_TEXT.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            if _UNSTORABLE_TEXT.search(str(key)):
                return here
            found = find_unstorable_text(item, here)
            if found is not None:
                return found
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = find_unstorable_text(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


# --------------------------------------------------------------------------------------------------------------------
# Rows


def _check_finite_non_negative(row: object, names: Iterable[str]) -> None:
    for name in names:
        value = getattr(row, name)
        if value is None:
            continue
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class GraphStats:
    """Dynamo's counters of one model (STAT_COLUMNS; the fields added later come last, for positional callers)."""

    calls_captured: int | None = None
    unique_graphs: int | None = None
    graph_breaks: int | None = None
    unique_graph_breaks: int | None = None
    fallbacks_to_eager: int | None = None
    autograd_captures: int | None = None
    autograd_compiles: int | None = None
    cudagraph_skips: int | None = None


@dataclass(frozen=True, slots=True)
class PerformanceRow:
    """One line of a ``*_performance.csv``. Latency in ms, compile latency in s, peak memory in GB (as PyTorch)."""

    dev: str
    name: str
    batch_size: int
    speedup: float
    abs_latency: float
    compilation_latency: float | None = None
    compression_ratio: float | None = None
    eager_peak_mem: float | None = None
    dynamo_peak_mem: float | None = None
    stats: GraphStats = field(default_factory=GraphStats)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("name must not be empty")
        if self.batch_size < 0:
            raise ValueError(f"batch_size must be >= 0, got {self.batch_size}")
        _check_finite_non_negative(
            self,
            ("speedup", "abs_latency", "compilation_latency", "compression_ratio", "eager_peak_mem", "dynamo_peak_mem"),
        )

    @classmethod
    def failure(cls, dev: str, name: str) -> PerformanceRow:
        """PyTorch's failure row: ``dev,name,0,0.0,0.0``."""
        return cls(dev=dev, name=name, batch_size=0, speedup=0.0, abs_latency=0.0)

    @property
    def is_failure(self) -> bool:
        return self.speedup == 0.0 and self.compilation_latency is None

    def to_csv_fields(self, with_stats: bool) -> list[str]:
        if self.is_failure:
            return [self.dev, self.name, "0", "0.0", "0.0"]
        values: list[object] = [
            self.dev,
            self.name,
            self.batch_size,
            f"{self.speedup:.6f}",
            f"{self.abs_latency:.6f}",
            _fmt(self.compilation_latency),
            _fmt(self.compression_ratio),
            _fmt(self.eager_peak_mem),
            _fmt(self.dynamo_peak_mem),
        ]
        if with_stats:
            values += [_fmt_int(getattr(self.stats, c)) for c in STAT_COLUMNS]
        return [str(v) for v in values]


@dataclass(frozen=True, slots=True)
class AccuracyRow:
    dev: str
    name: str
    batch_size: int
    accuracy: str
    stats: GraphStats = field(default_factory=GraphStats)
    compilation_latency: float | None = None  # s: the compile wall time of the check, as PyTorch's accuracy row

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("name must not be empty")
        if self.batch_size < 0:
            raise ValueError(f"batch_size must be >= 0, got {self.batch_size}")
        if not _STATUS_SHAPE.match(self.accuracy):
            raise ValueError(f"not a status: {self.accuracy!r}")
        _check_finite_non_negative(self, ("compilation_latency",))

    @property
    def is_known_status(self) -> bool:
        return self.accuracy in KNOWN_STATUSES

    def to_csv_fields(self, with_stats: bool) -> list[str]:
        values: list[object] = [self.dev, self.name, self.batch_size, self.accuracy]
        if with_stats:
            values += [_fmt_int(getattr(self.stats, c)) for c in STAT_COLUMNS] + [_fmt(self.compilation_latency)]
        return [str(v) for v in values]


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.6f}"


def _fmt_int(value: int | None) -> str:
    return "" if value is None else str(value)


# --------------------------------------------------------------------------------------------------------------------
# CSV reading and writing


def header_for(kind: str, with_stats: bool = True) -> list[str]:
    """PyTorch's header: the fixed columns, then (``with_stats``) the counters and, in accuracy files, the tail."""
    if kind == "performance":
        return list(PERFORMANCE_COLUMNS) + (list(STAT_COLUMNS) if with_stats else [])
    return list(ACCURACY_COLUMNS) + (list(STAT_COLUMNS + ACCURACY_TAIL_COLUMNS) if with_stats else [])


def append_row(path: Path, row: PerformanceRow | AccuracyRow, with_stats: bool = True) -> None:
    """Append one row, writing the header first when the file is new; flushed so an interrupted run keeps it."""
    kind = "performance" if isinstance(row, PerformanceRow) else "accuracy"
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        if new:
            writer.writerow(header_for(kind, with_stats))
        writer.writerow(row.to_csv_fields(with_stats))
        handle.flush()


def csv_text(rows: Sequence[PerformanceRow] | Sequence[AccuracyRow], kind: str, with_stats: bool = True) -> str:
    """A whole result file's text (header, then ``rows``), as :func:`append_row` writes it line by line."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header_for(kind, with_stats))
    writer.writerows(row.to_csv_fields(with_stats) for row in rows)
    return out.getvalue()


def _decode(data: bytes, file: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ContractError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})", file=file,
                            line=line) from None


def _oversized_column(text: str, line: int | None, header: list[str]) -> str | None:
    """Which column of ``line`` holds the field too large for the csv module (split at commas: a field that large is
    not a quoted number or name)."""
    if line is None:
        return None
    physical = text.splitlines()[line - 1] if line <= len(text.splitlines()) else ""
    for index, cell in enumerate(physical.split(",")):
        if len(cell) > MAX_FIELD_CHARS:
            return header[index].strip() if index < len(header) else f"field {index + 1}"
    return None


def _checked_rows(reader: Iterator[list[str]], text: str, file: str) -> Iterator[list[str]]:
    """The reader's rows; a malformed line (an unterminated quote, a field over the csv module's limit) or a NUL byte
    is a ContractError naming the line (and the column, from the header, when it is a field)."""
    header: list[str] = []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            line = getattr(reader, "line_num", None)
            if "field limit" in str(exc):
                raise ContractError(f"field over the CSV reader's limit of {csv.field_size_limit()} characters",
                                    file=file, line=line, column=_oversized_column(text, line, header)) from None
            raise ContractError(f"malformed CSV: {exc}", file=file, line=line) from None
        line = getattr(reader, "line_num", None)
        for index, cell in enumerate(row):
            column = header[index].strip() if index < len(header) else f"field {index + 1}"
            if "\x00" in cell:
                raise ContractError("NUL byte in the field", file=file, line=line, column=column)
            if len(cell) > MAX_FIELD_CHARS:
                raise ContractError(f"field of {len(cell)} characters (at most {MAX_FIELD_CHARS})", file=file,
                                    line=line, column=column)
        if not header:
            header = row
        yield row


def _records(text: str, file: str, kind: str) -> Iterator[tuple[int, dict[str, str]]]:
    raw_reader = csv.reader(io.StringIO(text))
    reader = _checked_rows(raw_reader, text, file)
    try:
        header = next(reader)
    except StopIteration:
        raise ContractError("empty file: no header line", file=file, line=1) from None
    header = [h.strip() for h in header]
    required = PERFORMANCE_COLUMNS if kind == "performance" else ACCURACY_COLUMNS
    for index, column in enumerate(required):
        if index >= len(header) or header[index] != column:
            found = header[index] if index < len(header) else "end of line"
            raise ContractError(f"header: expected column {column!r} at position {index + 1}, found {found!r}",
                                file=file, line=1, column=column)
    # A failure row in a performance CSV carries only the first five fields.
    minimum = 5 if kind == "performance" else len(required)
    seen_data = False
    for row in reader:
        line = raw_reader.line_num
        if not row or all(not cell.strip() for cell in row):
            continue
        seen_data = True
        if len(row) < minimum:
            missing = required[len(row)]
            raise ContractError(f"row has {len(row)} fields, expected at least {minimum}", file=file, line=line,
                                column=missing)
        if len(row) > len(header):
            raise ContractError(f"row has {len(row)} fields but the header has {len(header)}", file=file, line=line)
        yield line, {header[i]: cell.strip() for i, cell in enumerate(row)}
    if not seen_data:
        raise ContractError("no result rows after the header", file=file, line=2)


def _number(record: dict[str, str], column: str, file: str, line: int, *, integer: bool = False) -> float | int | None:
    raw = record.get(column, "")
    if raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ContractError(f"not a number: {raw!r}", file=file, line=line, column=column) from None
    if not math.isfinite(value) or value < 0:
        raise ContractError(f"must be a finite number >= 0: {raw!r}", file=file, line=line, column=column)
    if integer:
        if value != int(value):
            raise ContractError(f"not a whole number: {raw!r}", file=file, line=line, column=column)
        if value > INT32_MAX:
            raise ContractError(f"larger than {INT32_MAX}: {raw!r}", file=file, line=line, column=column)
        return int(value)
    return value


def _stats(record: dict[str, str], file: str, line: int) -> GraphStats:
    # the ignore: _number(integer=True) is an int or None, though its type is every column's, float | int | None
    return GraphStats(**{c: _number(record, c, file, line, integer=True) for c in STAT_COLUMNS})  # type: ignore[arg-type]


_TEXT_LIMITS = {"name": MAX_NAME_LENGTH, "accuracy": MAX_STATUS_LENGTH, "dev": 64}


def _required_text(record: dict[str, str], column: str, file: str, line: int) -> str:
    value = record.get(column, "")
    if not value:
        raise ContractError("empty value", file=file, line=line, column=column)
    limit = _TEXT_LIMITS.get(column)
    if limit is not None and len(value) > limit:
        raise ContractError(f"{len(value)} characters, at most {limit}", file=file, line=line, column=column)
    return value


def parse_performance_csv(data: bytes, file: str) -> list[PerformanceRow]:
    rows: list[PerformanceRow] = []
    for line, rec in _records(_decode(data, file), file, "performance"):
        dev = _required_text(rec, "dev", file, line)
        name = _required_text(rec, "name", file, line)
        batch_size = _number(rec, "batch_size", file, line, integer=True)
        speedup = _number(rec, "speedup", file, line)
        abs_latency = _number(rec, "abs_latency", file, line)
        if batch_size is None or speedup is None or abs_latency is None:
            column = next(column for column, value in (("batch_size", batch_size), ("speedup", speedup),
                                                       ("abs_latency", abs_latency)) if value is None)
            raise ContractError("empty value", file=file, line=line, column=column)
        rows.append(
            PerformanceRow(
                dev=dev,
                name=name,
                batch_size=int(batch_size),
                speedup=float(speedup),
                abs_latency=float(abs_latency),
                compilation_latency=_number(rec, "compilation_latency", file, line),
                compression_ratio=_number(rec, "compression_ratio", file, line),
                eager_peak_mem=_number(rec, "eager_peak_mem", file, line),
                dynamo_peak_mem=_number(rec, "dynamo_peak_mem", file, line),
                stats=_stats(rec, file, line),
            )
        )
    return rows


def parse_accuracy_csv(data: bytes, file: str) -> list[AccuracyRow]:
    rows: list[AccuracyRow] = []
    for line, rec in _records(_decode(data, file), file, "accuracy"):
        status = _required_text(rec, "accuracy", file, line)
        if not _STATUS_SHAPE.match(status):
            raise ContractError(f"not an accuracy status: {status!r}", file=file, line=line, column="accuracy")
        batch_size = _number(rec, "batch_size", file, line, integer=True)
        if batch_size is None:
            raise ContractError("empty value", file=file, line=line, column="batch_size")
        rows.append(
            AccuracyRow(
                dev=_required_text(rec, "dev", file, line),
                name=_required_text(rec, "name", file, line),
                batch_size=int(batch_size),
                accuracy=status,
                stats=_stats(rec, file, line),
                compilation_latency=_number(rec, "compilation_latency", file, line),
            )
        )
    return rows


def read_performance_csv(path: Path) -> list[PerformanceRow]:
    return parse_performance_csv(path.read_bytes(), str(path))


def read_accuracy_csv(path: Path) -> list[AccuracyRow]:
    return parse_accuracy_csv(path.read_bytes(), str(path))


def completed_models(path: Path) -> set[str]:
    """Names already written to a result CSV (for resuming an interrupted run); empty if the file does not exist."""
    if not path.exists() or path.stat().st_size == 0:
        return set()
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        next(reader, None)
        return {row[1] for row in reader if len(row) > 1}


# --------------------------------------------------------------------------------------------------------------------
# Raw samples

# The other processes a LoopContention names: the few that took the CPU, not a process table.
MAX_BUSIEST_OTHERS = 3


@dataclass(frozen=True, slots=True)
class LoopContention:
    """What competed with one worker's timed loop for the CPU (runner.contention reads it from Linux around the loop).

    ``steal_share``: the share of all CPUs' time that the hypervisor gave to someone else (/proc/stat ``steal``), the
    machine's own noise on a VM, which nothing on the guest can see otherwise; ``pressure_share``: the share of the
    loop's wall time in which some runnable task waited for a CPU (/proc/pressure/cpu ``some``): other work on this
    machine, or more threads than cores; ``involuntary_switches``: how often the worker's threads were preempted
    (getrusage). A figure the kernel does not report is None. ``process``: the worker (as ``ModelSamples.process``).
    Who the pressure came from: ``others_cpu_share``, the share of all CPUs' time that anything but the worker used
    (every busy tick of /proc/stat less the worker's own CPU time); ``busiest_others``, the processes that used most of
    it, each "name (pid) seconds"; ``own_busy_threads``, how many of the worker's threads each used a tenth of the
    loop or more (more than the cores: the worker competes with itself).
    """

    process: int
    wall_s: float
    steal_share: float | None = None
    pressure_share: float | None = None
    involuntary_switches: int | None = None
    others_cpu_share: float | None = None
    busiest_others: tuple[str, ...] = ()
    own_busy_threads: int | None = None

    def __post_init__(self) -> None:
        if self.process < 0 or not math.isfinite(self.wall_s) or self.wall_s < 0:
            raise ValueError("contention needs a worker index and a finite non-negative wall time")
        for label, share in (("steal_share", self.steal_share), ("pressure_share", self.pressure_share),
                             ("others_cpu_share", self.others_cpu_share)):
            if share is not None and (not math.isfinite(share) or not 0.0 <= share <= 1.0):
                raise ValueError(f"{label} must be a share of time")
        for label, count in (("involuntary_switches", self.involuntary_switches),
                             ("own_busy_threads", self.own_busy_threads)):
            if count is not None and count < 0:
                raise ValueError(f"{label} counts, it is never negative")
        if len(self.busiest_others) > MAX_BUSIEST_OTHERS:
            raise ValueError(f"busiest_others names at most {MAX_BUSIEST_OTHERS} processes")

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "process": self.process, "wall_s": round(self.wall_s, 4),
            "steal_share": None if self.steal_share is None else round(self.steal_share, 5),
            "pressure_share": None if self.pressure_share is None else round(self.pressure_share, 5),
            "involuntary_switches": self.involuntary_switches}
        # written only when read, so a file from before them reads (and hashes) as before
        if self.others_cpu_share is not None:
            out["others_cpu_share"] = round(self.others_cpu_share, 5)
        if self.busiest_others:
            out["busiest_others"] = list(self.busiest_others)
        if self.own_busy_threads is not None:
            out["own_busy_threads"] = self.own_busy_threads
        return out

    @classmethod
    def from_json(cls, data: dict[str, object]) -> LoopContention:
        switches, threads = data.get("involuntary_switches"), data.get("own_busy_threads")
        return cls(process=int(data["process"]),  # type: ignore[call-overload]
                   wall_s=float(data["wall_s"]),  # type: ignore[arg-type]
                   steal_share=_optional_float(data.get("steal_share")),
                   pressure_share=_optional_float(data.get("pressure_share")),
                   involuntary_switches=None if switches is None else int(switches),  # type: ignore[call-overload]
                   others_cpu_share=_optional_float(data.get("others_cpu_share")),
                   busiest_others=tuple(str(o) for o in data.get("busiest_others") or ()),  # type: ignore[attr-defined]
                   own_busy_threads=None if threads is None else int(threads))  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class ModelSamples:
    """perfdash's own per-model record: raw per-iteration timings, ms (interleaved: eager_ms[i] and compiled_ms[i] ran
    back to back), and perfdash's activation peak, GB of 10^9 bytes: the peak of one warm step above what was in use
    before it (weights and inputs excluded). PyTorch's peak memory columns mean something else (see
    ``MEMORY_DEFINITIONS``); the activation peak never goes into them. ``*_throughput``: samples per second of one
    side, batch size over the median step time (a training run's figure; PyTorch's CSVs have no column for it)."""

    name: str
    batch_size: int
    eager_ms: tuple[float, ...]
    compiled_ms: tuple[float, ...]
    eager_activation_peak_mem: float | None = None
    dynamo_activation_peak_mem: float | None = None
    eager_throughput: float | None = None
    compiled_throughput: float | None = None
    # What Inductor generated (perfdash.generated_code): its fingerprint, the top kernels of a profile taken after the
    # timed loop, and the normalised source packed for the code diff. Absent in older files and for other backends.
    code: CodeFingerprint | None = None
    kernel_times: tuple[KernelTime, ...] = ()
    code_source: str | None = None
    # ``perfdash run --processes K`` (K > 1): the worker process (0..K-1) each pair was timed in, 0 the cold one;
    # empty for one process. perfdash.confidence resamples by it: what differs between processes also differs between
    # runs. Written only when set, so a one-process file reads (and hashes) as before.
    process: tuple[int, ...] = ()
    # What competed with each worker's timed loop for the CPU (one entry per worker that timed, in order; absent in
    # older files): bench/noise_sources.py reads it beside the runs it calls outlying.
    contention: tuple[LoopContention, ...] = ()

    def __post_init__(self) -> None:
        if self.process and (len(self.process) != len(self.eager_ms) or min(self.process) < 0):
            raise ValueError("process must hold one non-negative worker index per pair")
        workers = [c.process for c in self.contention]
        if len(set(workers)) != len(workers) or not set(workers) <= (set(self.process) or {0}):
            raise ValueError("contention holds at most one entry per worker that timed pairs")
        if len(self.kernel_times) > MAX_KERNEL_TIMES or len(self.code_source or "") > MAX_SOURCE_CHARS:
            raise ValueError("kernel_times and code_source are bounded")
        for label, values in (("eager_ms", self.eager_ms), ("compiled_ms", self.compiled_ms)):
            if any(not math.isfinite(v) or v <= 0 for v in values):
                raise ValueError(f"{label} must hold finite positive timings")
        for label, value in (("eager_activation_peak_mem", self.eager_activation_peak_mem),
                             ("dynamo_activation_peak_mem", self.dynamo_activation_peak_mem)):
            if value is not None and (not math.isfinite(value) or value < 0):
                raise ValueError(f"{label} must be a finite non-negative number of GB")
        for label, value in (("eager_throughput", self.eager_throughput),
                             ("compiled_throughput", self.compiled_throughput)):
            if value is not None and (not math.isfinite(value) or value < 0):
                raise ValueError(f"{label} must be a finite non-negative number of samples per second")

    @property
    def activation_ratio(self) -> float | None:
        """Eager activation peak over compiled, like compression_ratio; None when either is missing or zero."""
        if not self.eager_activation_peak_mem or not self.dynamo_activation_peak_mem:
            return None
        return self.eager_activation_peak_mem / self.dynamo_activation_peak_mem

    def to_json(self) -> str:
        out = {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)
               if f.name not in _SELF_WRITTEN_FIELDS}
        # written only when measured, so a samples file without them reads (and hashes) as before
        if self.code is not None:
            out["code"] = self.code.to_json()
        if self.kernel_times:
            out["kernel_times"] = [k.to_json() for k in self.kernel_times]
        if self.code_source is not None:
            out["code_source"] = self.code_source
        if not self.process:
            del out["process"]
        if self.contention:
            out["contention"] = [c.to_json() for c in self.contention]
        return json.dumps(out)

    @classmethod
    def from_json(cls, text: str) -> ModelSamples:
        data = json.loads(text)
        return cls(name=data["name"], batch_size=int(data["batch_size"]), eager_ms=tuple(data["eager_ms"]),
                   compiled_ms=tuple(data["compiled_ms"]),
                   eager_activation_peak_mem=_optional_float(data.get("eager_activation_peak_mem")),
                   dynamo_activation_peak_mem=_optional_float(data.get("dynamo_activation_peak_mem")),
                   eager_throughput=_optional_float(data.get("eager_throughput")),
                   compiled_throughput=_optional_float(data.get("compiled_throughput")),
                   code=CodeFingerprint.from_json(data["code"]) if data.get("code") else None,
                   kernel_times=tuple(KernelTime.from_json(k) for k in data.get("kernel_times") or ()),
                   code_source=str(data["code_source"]) if data.get("code_source") else None,
                   process=tuple(int(p) for p in data.get("process") or ()),
                   contention=tuple(LoopContention.from_json(c) for c in data.get("contention") or ()))


# Fields to_json writes itself (nested records, or only when measured), not through the generic loop.
_SELF_WRITTEN_FIELDS = ("code", "kernel_times", "code_source", "contention")


def throughput(batch_size: int, step_ms: Sequence[float], world_size: int = 1) -> float | None:
    """Samples per second of a step: the global batch (``batch_size`` per process) over the median step time;
    None without timings or a batch."""
    if not step_ms or batch_size <= 0:
        return None
    return batch_size * world_size * 1000.0 / statistics.median(step_ms)


def _optional_float(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)


def append_samples(path: Path, samples: ModelSamples) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(samples.to_json() + "\n")


def read_samples(path: Path) -> list[ModelSamples]:
    if not path.exists():
        return []
    return parse_samples(path.read_bytes(), str(path))


def parse_samples(data: bytes, file: str) -> list[ModelSamples]:
    """Samples from the bytes of a ``*_samples.jsonl`` (an upload); errors name the file and line."""
    out = []
    for number, line in enumerate(_decode(data, file).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(ModelSamples.from_json(line))
        except (ValueError, KeyError, TypeError) as exc:
            raise ContractError(f"bad samples record: {exc}", file=file, line=number) from None
    return out


# --------------------------------------------------------------------------------------------------------------------
# Joining one run's files


@dataclass(frozen=True, slots=True)
class ModelResult:
    """A model's performance and accuracy rows of one run joined; the accuracy status gates performance."""

    name: str
    batch_size: int
    accuracy: str | None
    performance: PerformanceRow | None

    @property
    def gated_speedup(self) -> float:
        """The speedup that counts: 0 unless accuracy passed (when accuracy was measured at all)."""
        if self.performance is None:
            return 0.0
        return gated_speedup(self.performance.speedup, accuracy_gate(self.accuracy))


def join_results(performance: Sequence[PerformanceRow], accuracy: Sequence[AccuracyRow]) -> list[ModelResult]:
    """One result per model name, in first-seen order; performance rows gated by the accuracy file when present.

    With an accuracy file present, a model missing from it counts as not passing, as PyTorch's runner does.
    """
    has_accuracy = len(accuracy) > 0
    acc = {row.name: row for row in accuracy}
    perf = {row.name: row for row in performance}
    names = list(dict.fromkeys([r.name for r in performance] + [r.name for r in accuracy]))
    out = []
    for name in names:
        p, a = perf.get(name), acc.get(name)
        status = a.accuracy if a is not None else ("missing" if has_accuracy else None)
        batch = p.batch_size if p is not None and p.batch_size else (a.batch_size if a is not None else 0)
        out.append(ModelResult(name=name, batch_size=batch, accuracy=status, performance=p))
    return out
