"""SYNTHETIC nightly history for benchmarks only — invented numbers, never real results, never shown as such.

Fills a database (``DATABASE_URL``-style SQLAlchemy URL, Postgres or SQLite) with years of nightly runs:
3 suites x ~150 synthetic models x 6 configurations, one run per configuration per night (~3M result rows for three
years). Model names say ``synthetic``; the machines are invented; commits are hashes of the night. Torch versions
follow PyTorch's cadence: a release every ``RELEASE_EVERY`` nights (that night's runs carry the release's version, as
a release check would), nightly builds (``2.N.0.devYYYYMMDD``) in between. The training configuration carries
throughput (samples/s), and a DDP scaling experiment (world sizes 1, 2, 4, 8 over nccl; one suite) runs on release
nights only.

The first night of every configuration goes through the service's own ingest (so machines, configurations, series
and keys are exactly what ingest makes); the remaining nights are bulk-loaded (COPY on Postgres, executemany on
SQLite) with summaries computed by perfdash.metrics, the same functions ingest uses.

    from bench.synthetic_history import fill_database
    fill_database("postgresql+psycopg2://...", years=3)

or ``python -m bench.synthetic_history URL [--years 3] [--models 150]`` from the repository root.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import numpy as np
import sqlalchemy as sa

from perfdash.contract import (
    AccuracyRow,
    MachineInfo,
    Manifest,
    ModelResult,
    PerformanceRow,
    RunConfig,
    header_for,
)
from perfdash.metrics import model_warnings, summarize_results

SUITES: tuple[str, ...] = ("torchbench", "huggingface", "timm_models")
CPU = MachineInfo(host="synthetic-xeon-1", device="cpu", cpu_model="Synthetic Xeon 8488C", cpu_count=48)
GPU = MachineInfo(host="synthetic-gpu-1", device="cuda", gpu_name="Synthetic A100-SXM4-40GB", gpu_driver="535.104",
                  cuda_version="12.4")
# (device, dtype, mode, variant, threads, env): six configurations as PyTorch's CPU and GPU dashboards run them
CONFIGS: tuple[tuple[str, str, str, str, int | None, dict[str, str]], ...] = (
    ("cpu", "float32", "inference", "", None, {"TORCHINDUCTOR_FREEZING": "1"}),
    ("cpu", "float32", "inference", "", 1, {"TORCHINDUCTOR_FREEZING": "1"}),
    ("cpu", "bfloat16", "inference", "", None, {"TORCHINDUCTOR_FREEZING": "1"}),
    ("cuda", "amp", "training", "", None, {}),
    ("cuda", "bfloat16", "inference", "", None, {}),
    ("cuda", "float16", "inference", "no_cudagraphs", None, {}),
)
FAILURES = ("fail_accuracy", "fail_to_run", "timeout", "OOM", "eager_two_runs_differ")
RELEASE_EVERY = 120  # nights between two releases (PyTorch ships a minor release about every 3-4 months)
LATEST_MINOR = 14  # the last release of the history is 2.14.0
SCALING_WORLD_SIZES = (1, 2, 4, 8)
SCALING_EFFICIENCY = 0.93  # throughput kept per doubling of devices (the publication's 90-95 % per added GPU)


@dataclass(frozen=True, slots=True)
class SyntheticConfig:
    suite: str
    config: RunConfig
    machine: MachineInfo
    releases_only: bool = False  # a scaling experiment: run on release nights, not nightly


def configurations(n_configs: int = len(CONFIGS)) -> list[SyntheticConfig]:
    out = []
    for suite in SUITES:
        for device, dtype, mode, variant, threads, env in CONFIGS[:n_configs]:
            config = RunConfig(suite=suite, backend="inductor", variant=variant, dtype=dtype, mode=mode,
                               device=device, threads=threads, env=env)
            out.append(SyntheticConfig(suite, config, CPU if device == "cpu" else GPU))
    if n_configs == len(CONFIGS):
        for world_size in SCALING_WORLD_SIZES:
            config = RunConfig(suite=SUITES[0], backend="inductor", dtype="amp", mode="training", device="cuda",
                               world_size=world_size, distributed_backend="nccl")
            out.append(SyntheticConfig(SUITES[0], config, GPU, releases_only=True))
    return out


def release_nights(nights: Sequence[date]) -> dict[date, int]:
    """Release nights of the history and their minor version, the last release ``RELEASE_EVERY // 2`` nights before
    the end."""
    out = {}
    index, minor = len(nights) - 1 - RELEASE_EVERY // 2, LATEST_MINOR
    while index >= 0 and minor >= 0:
        out[nights[index]] = minor
        index, minor = index - RELEASE_EVERY, minor - 1
    return out


def torch_version_of(night: date, releases: dict[date, int]) -> str:
    """The release's version on a release night, else the nightly of the next minor version."""
    if night in releases:
        return f"2.{releases[night]}.0"
    earlier = [minor for released, minor in releases.items() if released < night]
    upcoming = (max(earlier) if earlier else min(releases.values(), default=LATEST_MINOR) - 1) + 1
    return f"2.{upcoming}.0.dev{night:%Y%m%d}"


def model_names(suite: str, n_models: int) -> list[str]:
    return [f"synthetic_{suite}_{i:03d}" for i in range(n_models)]


def commit_of(night: date) -> str:
    return hashlib.sha1(f"synthetic-{night.isoformat()}".encode()).hexdigest()


def manifest_for(sc: SyntheticConfig, night: date, torch_version: str = "2.14.0.dev-synthetic") -> Manifest:
    start = datetime(night.year, night.month, night.day, 1, 0, tzinfo=UTC)
    return Manifest(source="perfdash", config=sc.config, machine=sc.machine, torch_version=torch_version,
                    torch_git_commit=commit_of(night), suite_versions={"synthetic": "1"}, start_time=start,
                    end_time=start + timedelta(hours=2),
                    command="SYNTHETIC (bench/synthetic_history.py)")


class SeriesModel:
    """Per-configuration random model: each series has a base level, rare persistent steps, and nightly noise."""

    def __init__(self, n_models: int, n_nights: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.rng = rng
        self.n_models = n_models
        self.base_speedup = rng.lognormal(0.25, 0.35, n_models)
        self.base_latency = rng.lognormal(2.5, 1.0, n_models)
        self.base_compile = rng.uniform(8, 110, n_models)
        self.base_ratio = rng.uniform(0.8, 2.0, n_models)
        self.base_mem = rng.uniform(0.05, 8.0, n_models)
        self.batch = rng.choice([1, 4, 8, 16, 32, 64], n_models)
        self.graph_breaks = rng.poisson(0.6, n_models)
        # persistent level changes: ~1 per series every 1.5 years, +-3..25 %
        steps = np.zeros((n_nights, n_models))
        n_steps = rng.poisson(n_nights / 550, n_models) if n_nights > 1 else np.zeros(n_models, dtype=int)
        for m in range(n_models):
            for _ in range(n_steps[m]):
                steps[rng.integers(1, n_nights), m] += rng.choice([-1, 1]) * rng.uniform(0.03, 0.25)
        self.level = np.exp(np.cumsum(steps, axis=0))
        self.pass_probability = rng.choice([0.998, 0.0, 0.6], n_models, p=[0.92, 0.05, 0.03])

    def night(self, index: int, names: Sequence[str], device: str) -> list[ModelResult]:
        """One night's results, as the runner would have written them."""
        rng, n = self.rng, self.n_models
        speedup = self.base_speedup * self.level[index] * rng.normal(1.0, 0.03, n)
        latency = self.base_latency / speedup
        compile_s = self.base_compile * rng.normal(1.0, 0.08, n)
        ratio = self.base_ratio * rng.normal(1.0, 0.02, n)
        passes = rng.random(n) < self.pass_probability
        statuses = np.where(passes, "pass", rng.choice(FAILURES, n))
        results = []
        for m, name in enumerate(names):
            status = str(statuses[m])
            batch = int(self.batch[m])
            if status in ("pass", "fail_accuracy", "eager_two_runs_differ"):  # measured, maybe gated
                perf = PerformanceRow(dev=device, name=name, batch_size=batch, speedup=float(speedup[m]),
                                      abs_latency=float(latency[m]), compilation_latency=float(compile_s[m]),
                                      compression_ratio=float(ratio[m]), eager_peak_mem=float(self.base_mem[m]),
                                      dynamo_peak_mem=float(self.base_mem[m] / ratio[m]))
            else:
                perf = PerformanceRow.failure(device, name)
            results.append(ModelResult(name=name, batch_size=batch, accuracy=status, performance=perf))
        return results


def night_files(sc: SyntheticConfig, results: Sequence[ModelResult], night: date) -> dict[str, bytes]:
    """The files the runner would leave for one configuration and night (CSV + manifest), via the contract."""
    import csv

    key = sc.config.key()
    perf_io, acc_io = io.StringIO(), io.StringIO()
    perf_writer, acc_writer = csv.writer(perf_io, lineterminator="\n"), csv.writer(acc_io, lineterminator="\n")
    perf_writer.writerow(header_for("performance"))
    acc_writer.writerow(header_for("accuracy"))
    for r in results:
        assert r.performance is not None and r.accuracy is not None
        perf_writer.writerow(r.performance.to_csv_fields(with_stats=True))
        acc_writer.writerow(AccuracyRow(dev=r.performance.dev, name=r.name, batch_size=r.batch_size,
                                        accuracy=r.accuracy).to_csv_fields(with_stats=True))
    return {key.filename("performance"): perf_io.getvalue().encode(),
            key.filename("accuracy"): acc_io.getvalue().encode(),
            key.filename("manifest"): manifest_for(sc, night).model_dump_json().encode()}


# --------------------------------------------------------------------------------------------------------------------
# Bulk loading


def _text(value: object) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, float):
        return repr(value)
    return str(value).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def _bulk(connection: sa.Connection, table: str, columns: Sequence[str], rows: list[tuple]) -> None:
    if not rows:
        return
    if connection.dialect.name == "postgresql":
        buffer = io.StringIO()
        for row in rows:
            buffer.write("\t".join(map(_text, row)))
            buffer.write("\n")
        buffer.seek(0)
        raw = connection.connection.dbapi_connection
        with raw.cursor() as cursor:
            cursor.copy_expert(f"COPY {table} ({', '.join(columns)}) FROM STDIN", buffer)
    else:
        placeholders = ", ".join(":" + c for c in columns)
        statement = sa.text(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders})")
        connection.execute(statement, [dict(zip(columns, row, strict=True)) for row in rows])


RUN_COLUMNS = ("id", "run_key", "content_sha256", "configuration_id", "night", "started_at", "ended_at",
               "torch_version", "torch_git_commit", "suite_versions", "host", "jenkins_url", "source", "command",
               "partition_id", "total_partitions", "ingested_at")
RESULT_COLUMNS = ("run_id", "series_id", "name", "batch_size", "accuracy", "passed", "speedup", "abs_latency",
                  "compilation_latency", "compression_ratio", "eager_peak_mem", "dynamo_peak_mem", "calls_captured",
                  "unique_graphs", "graph_breaks", "unique_graph_breaks", "eager_throughput", "compiled_throughput")
SUMMARY_COLUMNS = ("run_id", "passed", "total", "geomean_speedup", "geomean_speedup_unclipped",
                   "mean_compile_time_s", "mean_compression_ratio", "warnings")


@dataclass(frozen=True, slots=True)
class Filled:
    runs: int
    results: int
    first_night: date
    last_night: date
    seconds: float


def nights_of(years: float, last_night: date) -> list[date]:
    count = max(2, round(years * 365))
    return [last_night - timedelta(days=count - 1 - i) for i in range(count)]


def fill_database(url: str, *, years: float = 3.0, n_models: int = 150, n_configs: int = len(CONFIGS),
                  last_night: date | None = None, seed: int = 0, progress: bool = True) -> Filled:
    """Migrate ``url`` and fill it with SYNTHETIC history ending at ``last_night`` (default: yesterday, UTC)."""
    from service.db import make_engine, make_session_factory
    from service.ingest import RunBundle, ingest, run_key
    from service.migrate import upgrade
    from service.models import Run, Series

    started = time.perf_counter()
    upgrade(url)
    last_night = last_night or (datetime.now(UTC).date() - timedelta(days=1))
    all_nights = nights_of(years, last_night)
    releases = release_nights(all_nights)
    engine = make_engine(url)
    total_runs = total_results = 0
    try:
        for index, sc in enumerate(configurations(n_configs)):
            names = model_names(sc.suite, n_models)
            nights = sorted(releases) if sc.releases_only else all_nights
            if not nights:  # a history too short to hold a release
                continue
            # a scaling experiment's world sizes share one model (same levels and noise), scaled by world size
            model = SeriesModel(n_models, len(nights), seed=seed * 1000 + (999 if sc.releases_only else index))
            scale = sc.config.world_size * SCALING_EFFICIENCY ** np.log2(sc.config.world_size)
            # the first night through the service's ingest: machine, configuration, series as ingest makes them
            first = model.night(0, names, sc.config.device)
            first_manifest = manifest_for(sc, nights[0], torch_version_of(nights[0], releases))
            with make_session_factory(engine)() as session:
                (stored,) = ingest(session, [RunBundle(first_manifest, tuple(first), {})]).runs
                configuration_id = session.get_one(Run, stored.run_id).configuration_id
                series = dict(session.execute(sa.select(Series.name, Series.id)
                                              .where(Series.configuration_id == configuration_id)).all())
            with engine.begin() as connection:
                next_id = connection.scalar(sa.text("SELECT coalesce(max(id), 0) + 1 FROM runs"))
                runs, results, summaries = [], [], []
                for offset, night in enumerate(nights[1:], start=1):
                    run_id = next_id + offset - 1
                    manifest = manifest_for(sc, night, torch_version_of(night, releases))
                    night_results = model.night(offset, names, sc.config.device)
                    runs.append((run_id, run_key(RunBundle(manifest, (), {})), "synthetic", configuration_id, night,
                                 manifest.start_time, manifest.end_time, manifest.torch_version,
                                 manifest.torch_git_commit, json.dumps(manifest.suite_versions), manifest.machine.host,
                                 None, "perfdash", manifest.command, 0, 1, manifest.end_time))
                    for r in night_results:
                        p = r.performance
                        assert p is not None
                        failure = p.is_failure
                        # training: samples/s of the global batch, compiled from the latency, eager from the speedup
                        compiled_tp = (None if failure or sc.config.mode != "training"
                                       else float(r.batch_size * 1000.0 / p.abs_latency * scale))
                        eager_tp = compiled_tp / p.speedup if compiled_tp is not None else None
                        results.append((run_id, series[r.name], r.name, r.batch_size, r.accuracy,
                                        r.gated_speedup > 0, p.speedup, p.abs_latency, p.compilation_latency,
                                        p.compression_ratio, None if failure else p.eager_peak_mem,
                                        None if failure else p.dynamo_peak_mem, None, None, None, None, eager_tp,
                                        compiled_tp))
                    s = summarize_results(night_results)
                    warnings = [{"name": w.name, "reason": w.reason} for w in model_warnings(night_results)]
                    summaries.append((run_id, s.passed, s.total, s.geomean_speedup, s.geomean_speedup_unclipped,
                                      s.mean_compile_time_s, s.mean_compression_ratio, json.dumps(warnings)))
                _bulk(connection, "runs", RUN_COLUMNS, runs)
                _bulk(connection, "run_summaries", SUMMARY_COLUMNS, summaries)
                _bulk(connection, "results", RESULT_COLUMNS, results)
                if connection.dialect.name == "postgresql":
                    connection.execute(sa.text("SELECT setval(pg_get_serial_sequence('runs', 'id'), "
                                               "(SELECT max(id) FROM runs))"))
            total_runs += len(nights)
            total_results += len(nights) * n_models
            if progress:
                print(f"  synthetic history: {index + 1}/{len(configurations(n_configs))} configurations, "
                      f"{total_results:,} result rows, {time.perf_counter() - started:.0f} s", file=sys.stderr)
        if engine.dialect.name == "postgresql":  # fresh statistics, as autovacuum would give a loaded database
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                connection.execute(sa.text("VACUUM ANALYZE"))
    finally:
        engine.dispose()
    return Filled(runs=total_runs, results=total_results, first_night=all_nights[0], last_night=all_nights[-1],
                  seconds=time.perf_counter() - started)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fill a database with SYNTHETIC nightly history (benchmarks only)")
    parser.add_argument("url", help="SQLAlchemy URL, e.g. postgresql+psycopg2://user@host/db or sqlite:///x.db")
    parser.add_argument("--years", type=float, default=3.0)
    parser.add_argument("--models", type=int, default=150, help="models per suite")
    parser.add_argument("--configs", type=int, default=len(CONFIGS), help=f"configurations (1..{len(CONFIGS)})")
    args = parser.parse_args(argv)
    filled = fill_database(args.url, years=args.years, n_models=args.models, n_configs=args.configs)
    print(f"SYNTHETIC history: {filled.runs:,} runs, {filled.results:,} result rows, nights {filled.first_night} .. "
          f"{filled.last_night}, {filled.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
