"""Service fixtures: settings with every kind of token and an app wired to the test's session (the migrated
Postgres and the rolled-back `session` are tests/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

DATA = Path(__file__).parent / "data"
TOKENS = ("token-one", "token-two")  # PERFDASH_INGEST_TOKENS: scope ingest only
# Named tokens (PERFDASH_TOKENS), one per scope and one with all: the write tests use OPERATOR through `auth`.
SCOPED = {"ingest": "ingest-token-0123456789", "bisect": "bisect-token-0123456789", "admin": "admin-token-0123456789"}
OPERATOR = "operator-token-0123456789"


def scoped_tokens() -> list[dict]:
    return [*({"name": f"test-{scope}", "scopes": [scope], "token": token} for scope, token in SCOPED.items()),
            {"name": "test-operator", "scopes": ["ingest", "bisect", "admin"], "token": OPERATOR}]


@pytest.fixture
def settings(migrated_url: str, tmp_path: Path):
    from service.settings import Settings

    return Settings(database_url=migrated_url, ingest_tokens=",".join(TOKENS), tokens=scoped_tokens(),
                    max_upload_bytes=256 * 1024,
                    spool_dir=tmp_path / "spool")


@pytest.fixture
def hook_calls() -> list[int]:
    return []


@pytest.fixture
def client(settings, session: Session, hook_calls: list[int]) -> Iterator[TestClient]:
    from service.api.deps import get_session
    from service.app import create_app

    def record(_session: Session, run_id: int) -> None:
        hook_calls.append(run_id)

    app = create_app(settings, post_ingest_hooks=[record])
    app.dependency_overrides[get_session] = lambda: session
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture
def tokens() -> dict:
    """The configured tokens (tests run in importlib mode: conftest's names are not importable)."""
    return {"legacy": TOKENS, "scoped": SCOPED, "operator": OPERATOR}


@pytest.fixture
def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {OPERATOR}"}


@pytest.fixture
def run_files(result_csv):
    """make(speedups={model: speedup or None for a failure}, statuses={model: status}, stem=..., manifest=...)
    -> {file name: bytes}, written with the contract's own row types (what the runner writes)."""
    from perfdash.contract import AccuracyRow, PerformanceRow

    def make(speedups: dict[str, float | None], statuses: dict[str, str] | None = None,
             stem: str = "inductor_timm_models_float32_inference_cpu", manifest=None,
             compile_s: float = 10.0, ratio: float = 1.2) -> dict[str, bytes]:
        statuses = statuses or {}
        if manifest is not None:
            stem = manifest.config.key().stem
        perf, acc = [], []
        for name, speedup in speedups.items():
            perf.append(PerformanceRow.failure("cpu", name) if speedup is None else PerformanceRow(
                dev="cpu", name=name, batch_size=8, speedup=speedup, abs_latency=5.0, compilation_latency=compile_s,
                compression_ratio=ratio, eager_peak_mem=0.2, dynamo_peak_mem=0.2 / ratio))
            acc.append(AccuracyRow(dev="cpu", name=name, batch_size=8,
                                   accuracy=statuses.get(name, "pass" if speedup is not None else "fail_to_run")))
        files = {f"{stem}_performance.csv": result_csv("performance", perf),
                 f"{stem}_accuracy.csv": result_csv("accuracy", acc)}
        if manifest is not None:
            files[f"{stem}_manifest.json"] = manifest.model_dump_json().encode()
        return files

    return make


@pytest.fixture
def manifest():
    """make(night="2026-01-02", commit="abc", **config) -> a perfdash Manifest for a CPU run."""
    from datetime import datetime, timedelta

    from perfdash.manifest import MachineInfo, Manifest, RunConfig

    def make(night: str = "2026-01-02", commit: str = "c0ffee", suite: str = "timm_models",
             backend: str = "inductor", **config) -> Manifest:
        start = datetime.fromisoformat(night + "T01:00:00+00:00")
        return Manifest(
            source="perfdash", config=RunConfig(suite=suite, backend=backend, **config),
            machine=MachineInfo(host="agent-1", device="cpu", cpu_model="Test Xeon", cpu_count=2),
            torch_version="2.14.1", torch_git_commit=commit, suite_versions={"timm": "1.0.31"},
            start_time=start, end_time=start + timedelta(hours=1))

    return make


def multipart(files: dict[str, bytes]) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("files", (name, data, "text/csv")) for name, data in files.items()]


@pytest.fixture
def upload(client, auth):
    """upload(files, **form) -> response of a multipart POST /api/v1/runs with a valid token."""

    def post(files: dict[str, bytes], **form: str):
        return client.post("/api/v1/runs", files=multipart(files), data=form, headers=auth)

    return post
