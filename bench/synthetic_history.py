"""SYNTHETIC nightly history for benchmarks only — invented numbers, never real results, never shown as such.

Fills a database (``DATABASE_URL``-style SQLAlchemy URL, Postgres or SQLite) with nightly runs: 3 suites x
``n_models`` synthetic models x the first ``n_configs`` configurations of a matrix (``CONFIGS``), one run per
configuration per night, for ``years`` or for as many nights as hold ``rows`` results. The matrix starts with
today's six configurations (the default: 3 suites x 150 models x 6 = ~3M result rows for three years) and goes on
to PyTorch's nightly matrix: devices x dtypes x modes x compiler variants (default, CUDA graphs off, dynamic shapes,
cpp wrapper, max-autotune, AOT Inductor) on two GPU machines and one CPU machine, 102 configurations a suite;
``--configs 92 --models 180`` is ~50,000 results a night, PyTorch's size (issue 31). Model names say ``synthetic``;
the machines are invented; commits are hashes of the night. Torch versions follow PyTorch's cadence: a release
every ``RELEASE_EVERY`` nights (that night's runs carry the release's version, as a release check would), nightly
builds (``2.N.0.devYYYYMMDD``) in between. Training configurations carry throughput (samples/s), and a DDP scaling
experiment (world sizes 1, 2, 4, 8 over nccl; one suite) runs on release nights only. Each series has a base level,
rare persistent steps, nightly noise and failures (a few models flaky or always failing).

The first night of every configuration goes through the service's own ingest (so machines, configurations, series
and keys are exactly what ingest makes); the remaining nights are bulk-loaded night by night, every configuration of
a night together as the nightly writes them (COPY on Postgres, in a loader thread while the next night is generated;
executemany on SQLite), with summaries computed by perfdash.metrics, the same functions ingest uses.

    from bench.synthetic_history import fill_database
    fill_database("postgresql+psycopg2://...", years=3)
    fill_database("postgresql+psycopg2://...", n_configs=92, n_models=180, rows=30_000_000)

or ``python -m bench.synthetic_history URL [--years 3] [--models 150] [--configs 6] [--rows 30e6]`` from the
repository root.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import queue
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import numpy as np
import sqlalchemy as sa

from perfdash.contract import AccuracyRow, ModelResult, PerformanceRow, header_for
from perfdash.manifest import MachineInfo, Manifest, RunConfig
from perfdash.metrics import model_warnings, summarize_results

SUITES: tuple[str, ...] = ("torchbench", "huggingface", "timm_models")
CPU = MachineInfo(host="synthetic-xeon-1", device="cpu", cpu_model="Synthetic Xeon 8488C", cpu_count=48)
GPU = MachineInfo(host="synthetic-gpu-1", device="cuda", gpu_name="Synthetic A100-SXM4-40GB", gpu_driver="535.104",
                  cuda_version="12.4")
GPU_H100 = MachineInfo(host="synthetic-gpu-2", device="cuda", gpu_name="Synthetic H100-SXM5-80GB",
                       gpu_driver="550.54", cuda_version="12.4")
FREEZING = {"TORCHINDUCTOR_FREEZING": "1"}


@dataclass(frozen=True, slots=True)
class MatrixEntry:
    """One configuration of a suite: the axes of perfdash.axes that the matrix varies, and its machine."""

    device: str
    dtype: str
    mode: str
    variant: str = ""
    threads: int | None = None
    env: tuple[tuple[str, str], ...] = ()
    backend: str = "inductor"
    compile_mode: str = "default"
    dynamic_shapes: bool = False
    machine: MachineInfo | None = None  # None: the device's first machine (CPU or GPU)

    def run_config(self, suite: str) -> RunConfig:
        return RunConfig(suite=suite, backend=self.backend, variant=self.variant, compile_mode=self.compile_mode,
                         dtype=self.dtype, mode=self.mode, device=self.device, threads=self.threads,
                         dynamic_shapes=self.dynamic_shapes, env=dict(self.env))

    def machine_info(self) -> MachineInfo:
        return self.machine or (CPU if self.device == "cpu" else GPU)


# Today's six configurations, as PyTorch's CPU and GPU dashboards run them: the default (`--configs 6`) and the
# first six of the matrix below, so a history of today's size is the one earlier figures were measured on.
TODAY: tuple[MatrixEntry, ...] = (
    MatrixEntry("cpu", "float32", "inference", env=tuple(FREEZING.items())),
    MatrixEntry("cpu", "float32", "inference", threads=1, env=tuple(FREEZING.items())),
    MatrixEntry("cpu", "bfloat16", "inference", env=tuple(FREEZING.items())),
    MatrixEntry("cuda", "amp", "training"),
    MatrixEntry("cuda", "bfloat16", "inference"),
    MatrixEntry("cuda", "float16", "inference", "no_cudagraphs"),
)
# PyTorch's compiler variants as its nightly GPU workflows name them (pytorch/pytorch
# .github/workflows/inductor-perf-test-nightly.yml: default/cudagraphs, dynamic, cppwrapper, max-autotune,
# aotinductor; cudagraphs off): (backend, variant, compile_mode, dynamic_shapes, env)
GPU_VARIANTS: tuple[tuple[str, str, str, bool, tuple[tuple[str, str], ...]], ...] = (
    ("inductor", "", "default", False, ()),
    ("inductor", "no_cudagraphs", "default", False, ()),
    ("inductor", "dynamic", "default", True, ()),
    ("inductor", "cpp_wrapper", "default", False, (("TORCHINDUCTOR_CPP_WRAPPER", "1"),)),
    ("inductor", "max_autotune", "max-autotune", False, ()),
    ("inductor", "max_autotune_no_cudagraphs", "max-autotune", False, ()),
    ("aot_inductor", "", "default", False, ()),
)
CPU_VARIANTS = tuple(v for v in GPU_VARIANTS if "cudagraphs" not in v[1] and v[2] == "default")


def pytorch_matrix() -> tuple[MatrixEntry, ...]:
    """Today's six, then devices x dtypes x modes x compiler variants on two GPU machines and one CPU machine: 102
    configurations a suite (AOT Inductor and the CPU runs are inference only; the CPU runs all cores and one thread,
    with freezing, as PyTorch's CPU dashboard)."""
    out = list(TODAY)
    for machine in (GPU, GPU_H100):
        for mode in ("inference", "training"):
            for dtype in ("amp", "bfloat16", "float16"):
                for backend, variant, compile_mode, dynamic, env in GPU_VARIANTS:
                    if backend == "aot_inductor" and mode == "training":
                        continue
                    out.append(MatrixEntry("cuda", dtype, mode, variant, None, env, backend, compile_mode, dynamic,
                                           machine))
    for threads in (None, 1):
        for dtype in ("float32", "bfloat16", "amp"):
            for backend, variant, compile_mode, dynamic, env in CPU_VARIANTS:
                out.append(MatrixEntry("cpu", dtype, "inference", variant, threads, (*env, *FREEZING.items()),
                                       backend, compile_mode, dynamic, CPU))
    unique: dict[tuple, MatrixEntry] = {}
    for entry in out:  # today's cuda entries sit on the first GPU machine: the matrix repeats them
        config = entry.run_config(SUITES[0])
        unique.setdefault((entry.machine_info().fingerprint(), config.model_dump_json()), entry)
    return tuple(unique.values())


CONFIGS: tuple[MatrixEntry, ...] = pytorch_matrix()
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


def configurations(n_configs: int = len(TODAY)) -> list[SyntheticConfig]:
    """The first ``n_configs`` entries of the matrix for each suite (6: today's; up to len(CONFIGS)), and the DDP
    scaling experiment whenever today's six are all there."""
    if not 1 <= n_configs <= len(CONFIGS):
        raise ValueError(f"--configs must be 1..{len(CONFIGS)}")
    out = []
    for suite in SUITES:
        for entry in CONFIGS[:n_configs]:
            out.append(SyntheticConfig(suite, entry.run_config(suite), entry.machine_info()))
    if n_configs >= len(TODAY):
        for world_size in SCALING_WORLD_SIZES:
            config = RunConfig(suite=SUITES[0], backend="inductor", dtype="amp", mode="training", device="cuda",
                               world_size=world_size, distributed_backend="nccl")
            out.append(SyntheticConfig(SUITES[0], config, GPU, releases_only=True))
    return out


def release_nights(nights: Sequence[date]) -> dict[date, int]:
    """Release nights of the history and their minor version, the last release ``RELEASE_EVERY // 2`` nights before
    the end (mid-history for a history shorter than a release cycle)."""
    out = {}
    index, minor = len(nights) - 1 - min(RELEASE_EVERY // 2, len(nights) // 2), LATEST_MINOR
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
    """SQLite's load (executemany); Postgres takes COPY (``_copy``)."""
    if not rows:
        return
    placeholders = ", ".join(":" + c for c in columns)
    statement = sa.text(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders})")
    connection.execute(statement, [dict(zip(columns, row, strict=True)) for row in rows])


RUN_COLUMNS = ("id", "run_key", "content_sha256", "configuration_id", "night", "started_at", "ended_at",
               "torch_version", "torch_git_commit", "suite_versions", "host", "jenkins_url", "source", "command",
               "partition_id", "total_partitions", "ingested_at")
RESULT_COLUMNS = ("run_id", "series_id", "name", "batch_size", "accuracy", "passed", "speedup", "abs_latency",
                  "compilation_latency", "compression_ratio", "eager_peak_mem", "dynamo_peak_mem", "calls_captured",
                  "unique_graphs", "graph_breaks", "unique_graph_breaks", "eager_throughput", "compiled_throughput",
                  "eager_activation_peak_mem", "dynamo_activation_peak_mem", "samples")
SUMMARY_COLUMNS = ("run_id", "passed", "total", "geomean_speedup", "geomean_speedup_unclipped",
                   "mean_compile_time_s", "mean_compression_ratio", "warnings", "warnings_count")


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


def nights_for_rows(rows: int, n_models: int, n_configs: int) -> int:
    """Nights of history that hold about ``rows`` results with this matrix (the scaling runs aside)."""
    per_night = n_models * sum(1 for sc in configurations(n_configs) if not sc.releases_only)
    return max(2, -(-rows // per_night))


def _copy(connection: sa.Connection, table: str, columns: Sequence[str], text: str) -> None:
    raw = connection.connection.dbapi_connection
    with raw.cursor() as cursor:
        cursor.copy_expert(f"COPY {table} ({', '.join(columns)}) FROM STDIN", io.StringIO(text))


def _f(value: float | None) -> str:
    return "\\N" if value is None else repr(value)


@dataclass(slots=True)
class _Loaded:
    """One configuration being filled: its generator, its stored ids and the nights it runs."""

    sc: SyntheticConfig
    model: SeriesModel
    names: list[str]
    nights: list[date]
    configuration_id: int
    series: dict[str, int]
    scale: float


@dataclass(frozen=True, slots=True)
class RawSamples:
    """Raw samples for the last ``nights`` nights of a history, as the runner stores them (service/ingest/store.py
    ``_samples_json``): ``per_side`` timings each of eager and compiled, in ms at full float precision, around the
    night's medians with 2 % noise, and the activation peaks perfdash's runner measures."""

    nights: int
    per_side: int = 50

    def json_of(self, rng: np.random.Generator, eager_ms: float, compiled_ms: float, peak_gb: float) -> str:
        eager, compiled = (base * (1 + 0.02 * rng.standard_normal(self.per_side)) for base in (eager_ms, compiled_ms))
        return (f'{{"eager_ms": [{", ".join(map(repr, eager.tolist()))}], '
                f'"compiled_ms": [{", ".join(map(repr, compiled.tolist()))}], '
                f'"eager_activation_peak_mem": {peak_gb!r}, "dynamo_activation_peak_mem": {peak_gb * 0.8!r}}}')


def _result_lines(run_id: int, loaded: _Loaded, night_results: Sequence[ModelResult],
                  samples: RawSamples | None = None, rng: np.random.Generator | None = None) -> list[str]:
    """The COPY lines of one run's results (text format; names are plain ASCII); raw samples for the measured
    models when ``samples`` is given."""
    training = loaded.sc.config.mode == "training"
    lines = []
    for r in night_results:
        p = r.performance
        assert p is not None
        failure = p.is_failure
        # training: samples/s of the global batch, compiled from the latency, eager from the speedup
        compiled_tp = None if failure or not training else r.batch_size * 1000.0 / p.abs_latency * loaded.scale
        eager_tp = compiled_tp / p.speedup if compiled_tp is not None else None
        measured = not (samples is None or rng is None or failure or not p.abs_latency)
        peak_gb = p.dynamo_peak_mem or 1.0
        raw = samples.json_of(rng, p.abs_latency * p.speedup, p.abs_latency, peak_gb) if measured else "\\N"
        peaks = f"{peak_gb!r}\t{peak_gb * 0.8!r}" if measured else "\\N\t\\N"  # as in the samples (json_of)
        lines.append(
            f"{run_id}\t{loaded.series[r.name]}\t{r.name}\t{r.batch_size}\t{r.accuracy}\t"
            f"{'t' if r.gated_speedup > 0 else 'f'}\t{p.speedup!r}\t{p.abs_latency!r}\t{_f(p.compilation_latency)}\t"
            f"{_f(p.compression_ratio)}\t{_f(None if failure else p.eager_peak_mem)}\t"
            f"{_f(None if failure else p.dynamo_peak_mem)}\t\\N\t\\N\t\\N\t\\N\t{_f(eager_tp)}\t{_f(compiled_tp)}\t"
            f"{peaks}\t{raw}\n")
    return lines


class _Loader:
    """Loads nights in a thread of its own, one transaction a night, at most one night queued; ``close`` waits for
    the last and raises what the thread raised."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.queue: queue.Queue = queue.Queue(maxsize=1)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def put(self, runs: list[str], summaries: list[str], results: list[str], last_id: int) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put((runs, summaries, results, last_id))

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        while (item := self.queue.get()) is not None:
            if self.error is not None:
                continue  # drain: the main thread raises at its next put
            try:
                self._load(*item)
            except BaseException as exc:  # noqa: BLE001 -- handed to the main thread
                self.error = exc

    def _load(self, runs: list[str], summaries: list[str], results: list[str], last_id: int) -> None:
        with self.engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                _copy(connection, "runs", RUN_COLUMNS, "".join(runs))
                _copy(connection, "run_summaries", SUMMARY_COLUMNS, "".join(summaries))
                _copy(connection, "results", RESULT_COLUMNS, "".join(results))
                connection.execute(sa.text("SELECT setval(pg_get_serial_sequence('runs', 'id'), :i)"),
                                   {"i": last_id})
            else:
                _bulk(connection, "runs", RUN_COLUMNS, [_parse(line) for line in runs])
                _bulk(connection, "run_summaries", SUMMARY_COLUMNS, [_parse(line) for line in summaries])
                _bulk(connection, "results", RESULT_COLUMNS, [_parse(line) for line in results])


def fill_database(url: str, *, years: float = 3.0, n_models: int = 150, n_configs: int = len(TODAY),
                  rows: int | None = None, last_night: date | None = None, seed: int = 0,
                  progress: bool = True, samples: RawSamples | None = None) -> Filled:
    """Migrate ``url`` and fill it with SYNTHETIC history ending at ``last_night`` (default: yesterday, UTC): the
    first ``n_configs`` configurations of the matrix for each suite, ``years`` of nights or, with ``rows``, as many
    nights as hold that many results. Nights are loaded in order, all configurations of a night together, as the
    nightly's ingest writes them (so a series' rows lie as far apart on disk as in production); one transaction a
    night. ``samples``: the last nights carry raw samples (none by default: the size of a history without them).
    """
    from service.db import make_engine, make_session_factory
    from service.ingest.bundle import RunBundle
    from service.ingest.keys import run_key
    from service.ingest.upload import ingest
    from service.migrate import upgrade
    from service.models import Run, Series
    from service.release_verdicts import refresh_all

    started = time.perf_counter()
    upgrade(url)
    last_night = last_night or (datetime.now(UTC).date() - timedelta(days=1))
    if rows is not None:
        count = nights_for_rows(rows, n_models, n_configs)
        all_nights = [last_night - timedelta(days=count - 1 - i) for i in range(count)]
    else:
        all_nights = nights_of(years, last_night)
    releases = release_nights(all_nights)
    engine = make_engine(url)
    total_runs = total_results = 0
    try:
        loaded: list[_Loaded] = []
        session_factory = make_session_factory(engine)
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
            with session_factory() as session:
                (stored,) = ingest(session, [RunBundle(first_manifest, tuple(first), {})]).runs
                configuration_id = session.get_one(Run, stored.run_id).configuration_id
                series = dict(session.execute(sa.select(Series.name, Series.id)
                                              .where(Series.configuration_id == configuration_id)).all())
            loaded.append(_Loaded(sc, model, names, nights, configuration_id, series, float(scale)))
            total_runs += 1
            total_results += n_models
        if progress:
            print(f"  synthetic history: first night of {len(loaded)} configurations ingested, "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
        offsets = [{night: i for i, night in enumerate(one.nights)} for one in loaded]
        with engine.connect() as connection:
            next_id = connection.scalar(sa.text("SELECT coalesce(max(id), 0) + 1 FROM runs"))
        # Postgres loads a night (COPY, in a thread) while the next one is generated: the two take a core each.
        loader = _Loader(engine)
        samples_rng = np.random.default_rng(seed)
        for night_index, night in enumerate(all_nights):
            runs, summaries, results = [], [], []
            for one, offset_of in zip(loaded, offsets, strict=True):
                offset = offset_of.get(night)
                if not offset:  # not a night of this configuration, or its first (ingested above)
                    continue
                run_id, next_id = next_id, next_id + 1
                manifest = manifest_for(one.sc, night, torch_version_of(night, releases))
                night_results = one.model.night(offset, one.names, one.sc.config.device)
                runs.append("\t".join(map(_text, (
                    run_id, run_key(RunBundle(manifest, (), {})), "synthetic", one.configuration_id, night,
                    manifest.start_time, manifest.end_time, manifest.torch_version, manifest.torch_git_commit,
                    json.dumps(manifest.suite_versions), manifest.machine.host, None, "perfdash", manifest.command, 0,
                    1, manifest.end_time))) + "\n")
                with_samples = samples is not None and night_index >= len(all_nights) - samples.nights
                results += _result_lines(run_id, one, night_results, samples if with_samples else None, samples_rng)
                s = summarize_results(night_results)
                warnings = [{"name": w.name, "reason": w.reason} for w in model_warnings(night_results)]
                summaries.append("\t".join(map(_text, (
                    run_id, s.passed, s.total, s.geomean_speedup, s.geomean_speedup_unclipped, s.mean_compile_time_s,
                    s.mean_compression_ratio, json.dumps(warnings), len(warnings)))) + "\n")
            if not runs:
                continue
            loader.put(runs, summaries, results, next_id - 1)
            total_runs += len(runs)
            total_results += len(results)
            if progress and (night_index % 10 == 0 or night_index == len(all_nights) - 1):
                elapsed = time.perf_counter() - started
                print(f"  synthetic history: night {night_index + 1}/{len(all_nights)}, {total_results:,} result "
                      f"rows, {elapsed:.0f} s ({total_results / elapsed:,.0f} rows/s)", file=sys.stderr, flush=True)
        loader.close()
        # what ingest keeps beside the runs: the Releases view's verdicts (service/release_verdicts.py)
        with session_factory() as session, session.begin():
            refresh_all(session)
        if engine.dialect.name == "postgresql":  # fresh statistics, as autovacuum would give a loaded database
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                connection.execute(sa.text("VACUUM ANALYZE"))
    finally:
        engine.dispose()
    if progress:
        print(f"  synthetic history: done, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return Filled(runs=total_runs, results=total_results, first_night=all_nights[0], last_night=all_nights[-1],
                  seconds=time.perf_counter() - started)


def _parse(line: str) -> tuple:
    """A COPY text line back to values, for SQLite's executemany (tests and small histories only)."""
    values = {"\\N": None, "t": True, "f": False}
    return tuple(values.get(v, v) for v in line.rstrip("\n").split("\t"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fill a database with SYNTHETIC nightly history (benchmarks only)")
    parser.add_argument("url", help="SQLAlchemy URL, e.g. postgresql+psycopg2://user@host/db or sqlite:///x.db")
    parser.add_argument("--years", type=float, default=3.0)
    parser.add_argument("--models", type=int, default=150, help="models per suite")
    parser.add_argument("--configs", type=int, default=len(TODAY),
                        help=f"configurations per suite, the first N of the matrix (1..{len(CONFIGS)}; 6: today's)")
    parser.add_argument("--rows", type=float, help="result rows to reach (e.g. 30e6): sets the nights, not --years")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--samples-nights", type=int, default=0,
                        help="the last N nights carry raw samples as the runner stores them (default none)")
    parser.add_argument("--samples-per-side", type=int, default=50,
                        help="raw timings per side (eager, compiled) of a result with samples (default 50)")
    args = parser.parse_args(argv)
    samples = RawSamples(args.samples_nights, args.samples_per_side) if args.samples_nights else None
    filled = fill_database(args.url, years=args.years, n_models=args.models, n_configs=args.configs,
                           rows=None if args.rows is None else int(args.rows), seed=args.seed, samples=samples)
    print(f"SYNTHETIC history: {filled.runs:,} runs, {filled.results:,} result rows, nights {filled.first_night} .. "
          f"{filled.last_night}, {filled.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
