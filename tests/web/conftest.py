"""The real thing for page tests: the app under uvicorn on 127.0.0.1, a fresh Postgres database migrated with
Alembic, result files ingested through service.ingest. The browser fixtures (`browser`, `page`) live in
tests/conftest.py: one Playwright for the whole session, shared with tests/hf_vision.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import sqlalchemy as sa

DATA = Path(__file__).parent / "data"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fresh_database(server_url: str) -> str:
    """A new, empty database on the session's Postgres server, migrated to head; returns its URL."""
    from service.migrate import upgrade

    name = f"web_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    url = sa.make_url(server_url).set(database=name).render_as_string(hide_password=False)
    upgrade(url)
    return url


def ingest_dir(database_url: str, directory: Path) -> list[int]:
    """Ingest a directory of result files exactly as `perfdash ingest` does; returns the stored run ids."""
    from service.db import make_engine, make_session_factory
    from service.ingest.files import bundles_from_files
    from service.ingest.upload import ingest

    files = {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}
    engine = make_engine(database_url)
    try:
        with make_session_factory(engine)() as session:
            report = ingest(session, bundles_from_files(files))
    finally:
        engine.dispose()
    return [r.run_id for r in report.runs]


def detect(database_url: str, run_ids: list[int]) -> None:
    """The detection engineer's detector over the given runs, as the post-ingest hook runs it."""
    from service.db import make_engine, make_session_factory
    from service.detection.detector import detect_run

    engine = make_engine(database_url)
    try:
        with make_session_factory(engine)() as session:
            for run_id in run_ids:
                detect_run(session, run_id)
            session.commit()
    finally:
        engine.dispose()


NOTE = {"night": "2026-11-21", "text": "<b>transformers</b> pin moved", "author": "perf-oncall"}


def annotate(database_url: str, suite: str, model: str, note: dict[str, str]) -> None:
    """Store an annotation on a model's series with the service's own add_annotation."""
    from service.db import make_engine, make_session_factory
    from service.models import Configuration, Series
    from service.queries.annotations import AnnotationIn, add_annotation

    engine = make_engine(database_url)
    try:
        with make_session_factory(engine)() as session:
            series = session.scalars(sa.select(Series).join(Configuration, Configuration.id == Series.configuration_id)
                                     .where(Series.name == model, Configuration.suite == suite)).one()
            add_annotation(session, AnnotationIn(series_id=series.id, **note))
            session.commit()
    finally:
        engine.dispose()


@dataclass
class LiveServer:
    url: str
    database_url: str
    _server: object = field(repr=False)
    _thread: threading.Thread = field(repr=False)

    def stop(self) -> None:
        self._server.should_exit = True  # type: ignore[attr-defined]
        self._thread.join(timeout=10)


def start_server(database_url: str) -> LiveServer:
    import uvicorn

    from service.app import create_app
    from service.settings import Settings

    # WARNING: a line per request from a server thread lands between tests' captures, all over pytest's output
    app = create_app(Settings(database_url=database_url, log_level="WARNING"), post_ingest_hooks=[])
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the app did not start")
        time.sleep(0.05)
    return LiveServer(url=f"http://127.0.0.1:{port}", database_url=database_url, _server=server, _thread=thread)


@pytest.fixture(scope="session")
def populated(postgres_url: str) -> Iterator[LiveServer]:
    """The app on a database holding two nights (tests/web/data/night1, night2) of three configurations."""
    url = fresh_database(postgres_url)
    ingest_dir(url, DATA / "night1")
    detect(url, ingest_dir(url, DATA / "night2"))
    annotate(url, "huggingface", "T5Small", NOTE)
    server = start_server(url)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def web_harness():  # type: ignore[no-untyped-def]
    """This module's helpers (fresh_database, ingest_dir, start_server), for tests that build their own history."""
    return sys.modules[__name__]


@pytest.fixture(scope="session")
def empty(postgres_url: str) -> Iterator[LiveServer]:
    server = start_server(fresh_database(postgres_url))
    yield server
    server.stop()


@dataclass(frozen=True)
class Lookup:
    """Ids of stored rows, read from the database the app serves (tests never guess ids)."""

    database_url: str

    def _one(self, sql: str, **params: str) -> int:
        engine = sa.create_engine(self.database_url)
        try:
            with engine.connect() as connection:
                return connection.execute(sa.text(sql), params).scalar_one()
        finally:
            engine.dispose()

    def run_id(self, suite: str, backend: str, night: str) -> int:
        return self._one("SELECT r.id FROM runs r JOIN configurations c ON c.id = r.configuration_id "
                         "WHERE c.suite = :suite AND c.backend = :backend AND r.night = :night",
                         suite=suite, backend=backend, night=night)

    def series_id(self, suite: str, backend: str, name: str) -> int:
        return self._one("SELECT s.id FROM series s JOIN configurations c ON c.id = s.configuration_id "
                         "WHERE c.suite = :suite AND c.backend = :backend AND s.name = :name",
                         suite=suite, backend=backend, name=name)


@pytest.fixture(scope="session")
def lookup(populated: LiveServer) -> Lookup:
    return Lookup(populated.database_url)


NOISE_NIGHTS = ("2026-10-01", "2026-10-02")


def write_noise_nights(root: Path) -> list[Path]:
    """Two nights of one configuration with raw samples, written by the contract's own writers: on night 2 every
    compiled timing of both models is the night-1 timing / 0.9 (speedups exactly 10 % lower). ``steady`` has 0.5 %
    noise (its 95 % intervals are far apart: a regression); ``noisy`` has 40 % noise (they overlap: within noise)."""
    from datetime import datetime, timedelta
    from statistics import median

    import numpy as np

    from perfdash.contract import AccuracyRow, ModelSamples, PerformanceRow, append_row, append_samples
    from perfdash.manifest import MachineInfo, Manifest, RunConfig

    rng = np.random.default_rng(7)
    base = {name: (10 * (1 + noise * rng.uniform(-1, 1, 40)), 5 * (1 + noise * rng.uniform(-1, 1, 40)))
            for name, noise in (("steady", 0.005), ("noisy", 0.4))}
    config = RunConfig(suite="timm_models", backend="inductor", threads=8)
    key = config.key()
    folders = []
    for index, (night, factor) in enumerate(zip(NOISE_NIGHTS, (1.0, 0.9), strict=True)):
        folder = root / night
        folder.mkdir(parents=True)
        start = datetime.fromisoformat(night + "T01:00:00+00:00")
        Manifest(config=config, machine=MachineInfo(host="noise-01", device="cpu", cpu_model="Noise Xeon", cpu_count=8),
                 torch_git_commit=str(index + 1) * 40, start_time=start,
                 end_time=start + timedelta(hours=1)).write(folder / key.filename("manifest"))
        for name, (eager, compiled) in base.items():
            compiled = compiled / factor
            speedup = median(eager) / median(compiled)
            append_row(folder / key.filename("performance"),
                       PerformanceRow("cpu", name, 8, speedup, median(compiled), 10.0, 1.1, 1.0, 0.9))
            append_row(folder / key.filename("accuracy"), AccuracyRow("cpu", name, 8, "pass"))
            append_samples(folder / key.filename("samples"),
                           ModelSamples(name, 8, tuple(map(float, eager)), tuple(map(float, compiled))))
        folders.append(folder)
    return folders


@pytest.fixture(scope="session")
def noise_server(postgres_url: str, tmp_path_factory) -> Iterator[LiveServer]:
    """The app on a database holding the two nights of :func:`write_noise_nights`."""
    url = fresh_database(postgres_url)
    for folder in write_noise_nights(tmp_path_factory.mktemp("noise")):
        ingest_dir(url, folder)
    server = start_server(url)
    yield server
    server.stop()
