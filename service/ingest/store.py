"""Storing runs: machine, configuration, run, series, results, generated code and summary, in the session's
transaction. Idempotent by content (service.ingest.keys): uploading the same run again (rows in any order) returns the
stored run unchanged; the same start with other content is a conflict (:class:`IngestConflict`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from perfdash.axes import configuration_columns
from perfdash.confidence import speedup_interval
from perfdash.contract import GraphStats, ModelResult, ModelSamples
from perfdash.manifest import MachineInfo, Manifest, RunConfig
from perfdash.metric_registry import RESULT_METRICS, Source
from perfdash.metrics import model_warnings, summarize_results
from service.ingest.bundle import RunBundle, as_utc
from service.ingest.keys import configuration_key, run_key
from service.locks import LockSpace, lock_for_transaction, text_key
from service.models import Configuration, GeneratedCode, Machine, Result, Run, RunSummary, Series
from service.release_verdicts import refresh_configurations


class IngestConflict(Exception):
    """A run with this key is stored with different content."""


@dataclass(frozen=True, slots=True)
class IngestedRun:
    run_id: int
    run_key: str
    created: bool  # False: the same run was already stored, nothing changed
    suite: str
    backend: str
    models: int


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
    if samples.process:  # --processes K: each pair's worker, which the interval resamples by
        out["process"] = list(samples.process)
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
    interval = speedup_interval(samples.eager_ms, samples.compiled_ms, process=samples.process) \
        if samples and perf else None
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
            dated = as_utc(m.start_time) if m.start_time else bundle.made_at or datetime.now(UTC)
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
