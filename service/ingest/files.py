"""Uploaded result files -> run bundles. Files are read only through perfdash.contract; a ContractError names the
file, line and column and nothing is stored."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import PurePath

from perfdash.contract import (
    MAX_NAME_LENGTH,
    ContractError,
    ResultFileName,
    RunKey,
    find_unstorable_text,
    join_results,
    parse_accuracy_csv,
    parse_performance_csv,
    parse_samples,
)
from perfdash.duplicates import csv_repeats
from perfdash.harness_files import Classified, Role, classify
from perfdash.manifest import MachineInfo, Manifest, RunConfig
from perfdash.pytorch_json import KeyHints, ParsedRecords, looks_like_records, parse_records
from service.ingest.bundle import RunBundle, as_utc, check_start_time


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
                    start_time=as_utc(defaults.timestamp) if defaults.timestamp else None)


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
                     made_at=as_utc(defaults.made_at) if defaults.made_at else None)
