"""Detection fixtures: the migrated real Postgres with each test in a rolled-back transaction (as tests/service),
runs stored through the service's own ingest path, and the GitHub stand-in server."""

from __future__ import annotations

import csv
import importlib.util
import io
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

TOKEN = "ingest-token"  # PERFDASH_INGEST_TOKENS (scope ingest)
OPERATOR = "operator-token-0123456789"  # PERFDASH_TOKENS: every scope, for the write tests (`auth`)


@pytest.fixture(scope="session")
def migrated_url(postgres_url: str) -> str:
    from service.migrate import upgrade

    upgrade(postgres_url)
    return postgres_url


@pytest.fixture(scope="session")
def engine(migrated_url: str) -> Iterator[sa.Engine]:
    from service.db import make_engine

    engine = make_engine(migrated_url)
    yield engine
    engine.dispose()


@pytest.fixture
def session(engine: sa.Engine) -> Iterator[Session]:
    connection = engine.connect()
    transaction = connection.begin()
    session = Session(bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False)
    try:
        yield session
    finally:
        session.close()
        transaction.rollback()
        connection.close()


def _csv(kind: str, rows: list) -> bytes:
    from perfdash.contract import header_for

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header_for(kind))
    for row in rows:
        writer.writerow(row.to_csv_fields(with_stats=True))
    return out.getvalue().encode()


RunFiles = Callable[..., dict[str, bytes]]


@pytest.fixture
def run_files() -> RunFiles:
    """run_files(night_index, {model: speedup | None}, statuses={model: status}, **config) -> {file name: bytes}.

    The run's CSVs and manifest, written with the contract's own types (what the runner writes). Latency is
    10 ms / speedup, compile time 20 s and memory ratio 1.2 unless given. The run starts at 01:00 of its night,
    ``hours`` later for a second run of the night."""
    from perfdash.contract import AccuracyRow, MachineInfo, Manifest, PerformanceRow, RunConfig

    def make(night: int, speedups: dict[str, float | None], statuses: dict[str, str] | None = None,
             compile_s: dict[str, float] | None = None, suite: str = "timm_models", backend: str = "inductor",
             environment: dict[str, str] | None = None, hours: float = 0, torch_version: str = "2.14.1",
             commit: str | None = None, samples: list | None = None, **config) -> dict[str, bytes]:
        statuses = statuses or {}
        start = datetime(2026, 1, 1, 1, 0, tzinfo=UTC) + timedelta(days=night, hours=hours)
        manifest = Manifest(
            source="perfdash", config=RunConfig(suite=suite, backend=backend, **config),
            machine=MachineInfo(host="agent-1", device="cpu", cpu_model="Test Xeon", cpu_count=2),
            torch_version=torch_version, torch_git_commit=commit or f"c{night:04d}" + "0" * 36,
            suite_versions={"timm": "1.0.31"},
            start_time=start, end_time=start + timedelta(hours=1), command=f"perfdash run --suite {suite}",
            environment=environment or {})
        perf, acc = [], []
        for name, speedup in speedups.items():
            perf.append(PerformanceRow.failure("cpu", name) if speedup is None else PerformanceRow(
                dev="cpu", name=name, batch_size=8, speedup=speedup, abs_latency=10.0 / speedup,
                compilation_latency=(compile_s or {}).get(name, 20.0), compression_ratio=1.2, eager_peak_mem=0.2,
                dynamo_peak_mem=0.2 / 1.2))
            acc.append(AccuracyRow(dev="cpu", name=name, batch_size=8,
                                   accuracy=statuses.get(name, "pass" if speedup is not None else "fail_to_run")))
        stem = manifest.config.key().stem
        files = {f"{stem}_performance.csv": _csv("performance", perf), f"{stem}_accuracy.csv": _csv("accuracy", acc),
                 f"{stem}_manifest.json": manifest.model_dump_json().encode()}
        if samples:  # ModelSamples lines (the generated code's tests)
            files[f"{stem}_samples.jsonl"] = "".join(s.to_json() + "\n" for s in samples).encode()
        return files

    return make


@pytest.fixture
def store_run(session: Session, run_files: RunFiles) -> Callable[..., int]:
    """store_run(night_index, {model: speedup | None}, ...) -> run id, stored with service.ingest (no hooks)."""
    from service.ingest import bundles_from_files, store_runs

    def make(night: int, speedups: dict[str, float | None], **kwargs) -> int:
        (bundle,) = bundles_from_files(run_files(night, speedups, **kwargs))
        (stored,) = store_runs(session, [bundle])
        session.flush()
        return stored.run_id

    return make


def noisy(seed: int, nights: int, level: float = 1.5, cv: float = 0.02) -> list[float]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return [float(v) for v in level * np.exp(rng.normal(0, cv, nights))]


@pytest.fixture
def series_values() -> Callable[..., list[float]]:
    return noisy


def load_standin():
    name = "perfdash_tests_github_standin"
    if name not in sys.modules:
        path = Path(__file__).parent.parent / "github" / "standin.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def github() -> Iterator:
    with load_standin().GitHubStandIn() as server:
        yield server


@pytest.fixture
def today() -> date:
    return date(2026, 1, 1)


@pytest.fixture
def app_client(migrated_url: str, session: Session, github, tmp_path: Path) -> Iterator:
    """The app with the default post-ingest hooks (detection), GitHub pointed at the stand-in, on the test session."""
    from fastapi.testclient import TestClient

    from service.app import create_app
    from service.db import get_session
    from service.settings import Settings

    settings = Settings(database_url=migrated_url, ingest_tokens=TOKEN, github_token="ghp_apiSECRET",
                        tokens=[{"name": "test-operator", "scopes": ["ingest", "bisect", "admin"], "token": OPERATOR}],
                        github_repository="perfdash-test/dashboard", github_api_url=github.url, report_issue=1,
                        dashboard_url="http://perfdash.example", spool_dir=tmp_path / "spool")
    app = create_app(settings)
    app.dependency_overrides[get_session] = lambda: session
    with TestClient(app) as client:
        yield client


@pytest.fixture
def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {OPERATOR}"}


@pytest.fixture
def fresh_postgres(postgres_url: str) -> Iterator[str]:
    """An empty database on the session's server, dropped afterwards (for CLI tests, which commit)."""
    import uuid

    name = f"detect_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = sa.make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()
