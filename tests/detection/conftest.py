"""Detection fixtures: runs stored through the service's own ingest path, an app wired to the test's session. The
migrated Postgres (`session`, `engine`, `fresh_postgres`) and the GitHub stand-in (`github`) are tests/conftest.py's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

TOKEN = "ingest-token"  # PERFDASH_INGEST_TOKENS (scope ingest)
OPERATOR = "operator-token-0123456789"  # PERFDASH_TOKENS: every scope, for the write tests (`auth`)


RunFiles = Callable[..., dict[str, bytes]]


@pytest.fixture
def run_files(result_csv) -> RunFiles:
    """run_files(night_index, {model: speedup | None}, statuses={model: status}, **config) -> {file name: bytes}.

    The run's CSVs and manifest, written with the contract's own types (what the runner writes). Latency is
    10 ms / speedup, compile time 20 s and memory ratio 1.2 unless given. The run starts at 01:00 of its night,
    ``hours`` later for a second run of the night."""
    from perfdash.contract import AccuracyRow, PerformanceRow
    from perfdash.manifest import MachineInfo, Manifest, RunConfig

    def make(night: int, speedups: dict[str, float | None], statuses: dict[str, str] | None = None,
             compile_s: dict[str, float] | None = None, suite: str = "timm_models", backend: str = "inductor",
             environment: dict[str, str] | None = None, hours: float = 0, torch_version: str = "2.14.1",
             commit: str | None = None, samples: list | None = None, suite_versions: dict[str, str] | None = None,
             **config) -> dict[str, bytes]:
        statuses = statuses or {}
        start = datetime(2026, 1, 1, 1, 0, tzinfo=UTC) + timedelta(days=night, hours=hours)
        manifest = Manifest(
            source="perfdash", config=RunConfig(suite=suite, backend=backend, **config),
            machine=MachineInfo(host="agent-1", device="cpu", cpu_model="Test Xeon", cpu_count=2),
            torch_version=torch_version, torch_git_commit=commit or f"c{night:04d}" + "0" * 36,
            suite_versions={"timm": "1.0.31"} if suite_versions is None else suite_versions,
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
        files = {f"{stem}_performance.csv": result_csv("performance", perf),
                 f"{stem}_accuracy.csv": result_csv("accuracy", acc),
                 f"{stem}_manifest.json": manifest.model_dump_json().encode()}
        if samples:  # ModelSamples lines (the generated code's tests)
            files[f"{stem}_samples.jsonl"] = "".join(s.to_json() + "\n" for s in samples).encode()
        return files

    return make


@pytest.fixture
def store_run(session: Session, run_files: RunFiles) -> Callable[..., int]:
    """store_run(night_index, {model: speedup | None}, ...) -> run id, stored with service.ingest (no hooks)."""
    from service.ingest.files import bundles_from_files
    from service.ingest.store import store_runs

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


@pytest.fixture
def today() -> date:
    return date(2026, 1, 1)


@pytest.fixture
def app_client(migrated_url: str, session: Session, github, tmp_path: Path) -> Iterator:
    """The app with the default post-ingest hooks (detection), GitHub pointed at the stand-in, on the test session."""
    from fastapi.testclient import TestClient

    from service.api.deps import get_session
    from service.app import create_app
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
