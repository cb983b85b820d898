"""Each docker image's install profile, in its own virtual environment, does its job in the nightly.

The rest of the suite runs in one environment with every extra, so it cannot see a runner image that lacks what
`perfdash ingest --url` imports, or a service image that imports torch. Here the runner profile (torch, then
``pip install -e ".[runner]"``, as docker/runner-*.Dockerfile) benchmarks a tiny model and posts it to a service
started from the service profile (``pip install -e ".[service]"``, no torch, as docker/service.Dockerfile) on a real
Postgres, which then summarises, detects and reports. scripts/profile_venv.py builds the venvs once under
$PERFDASH_CACHE_DIR/venvs (minutes for the runner's torch; later sessions reuse them).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "runner" / "data" / "tiny_real.toml"
TOKEN = "profile-token"
# Building the runner profile from scratch installs torch (minutes on 2 cores); later runs find it built.
BUILD_TIMEOUT_S = 1800
# The first test builds the venvs in its fixtures, which pytest-timeout counts against it.
pytestmark = pytest.mark.timeout(BUILD_TIMEOUT_S + 600)


def _profile(name: str) -> Path:
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "profile_venv.py"), name], capture_output=True,
                          text=True, timeout=BUILD_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def runner_venv() -> Path:
    return _profile("runner")


@pytest.fixture(scope="session")
def service_venv() -> Path:
    return _profile("service")


def _env(**extra: str) -> dict[str, str]:
    # Nothing of this checkout's test environment leaks in: the venv's own packages and its editable install only.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "DATABASE_URL") and not k.startswith("PERFDASH_TOKEN")}
    return {**env, **extra}


def _perfdash(venv: Path, *args: str, env: dict[str, str], cwd: Path, timeout: float = 300) -> str:
    done = subprocess.run([str(venv / "bin" / "perfdash"), *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, f"perfdash {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


def _missing(venv: Path, *modules: str) -> set[str]:
    code = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
    done = subprocess.run([str(venv / "bin" / "python"), "-c", code, *modules], env=_env(), capture_output=True,
                          text=True, timeout=60, check=True)
    return set(done.stdout.split())


@pytest.fixture
def database(postgres_url: str) -> Iterator[str]:
    name = f"profiles_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield sa.make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(service_venv: Path, database: str, tmp_path: Path) -> Iterator[str]:
    """`perfdash db upgrade`, then `perfdash serve` from the service profile; yields the service's URL."""
    env = _env(DATABASE_URL=database, PERFDASH_INGEST_TOKENS=TOKEN)
    _perfdash(service_venv, "db", "upgrade", env=env, cwd=tmp_path)
    port = _free_port()
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen([str(service_venv / "bin" / "perfdash"), "serve", "--host", "127.0.0.1", "--port",
                               str(port), "--no-upgrade"], env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                with urllib.request.urlopen(url + "/", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                assert time.monotonic() < deadline, "perfdash serve did not answer"
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(20)
        log.close()


def test_each_profile_holds_only_its_extra(runner_venv: Path, service_venv: Path) -> None:
    # The premise of the test below: the service profile has no torch, the runner profile none of the service.
    assert _missing(service_venv, "torch", "torchvision", "fastapi", "sqlalchemy") == {"torch", "torchvision"}
    assert _missing(runner_venv, "torch", "pydantic_settings", "fastapi", "alembic", "uvicorn") == \
        {"pydantic_settings", "fastapi", "alembic", "uvicorn"}


def test_the_runner_image_benchmarks_and_posts_to_the_service_image(runner_venv: Path, service_venv: Path,
                                                                     served: str, database: str,
                                                                     tmp_path: Path) -> None:
    results = tmp_path / "results"
    runner_env = _env(PERFDASH_SPOOL_DIR=str(tmp_path / "spool"), PERFDASH_TOKEN_FILE=str(tmp_path / "token"))
    (tmp_path / "token").write_text(TOKEN + "\n")
    out = _perfdash(runner_venv, "run", "--suite", "timm_models", "--models-file", str(TINY), "--only", "tiny_mlp",
                    "--repeat", "3", "--timeout", "300", "--output-dir", str(results), "--no-progress",
                    env=runner_env, cwd=tmp_path, timeout=600)
    assert "inductor_timm_models_float32_inference_cpu" in out
    posted = _perfdash(runner_venv, "ingest", str(results), "--url", served, env=runner_env, cwd=tmp_path)
    assert "stored: timm_models inductor, 1 models" in posted, posted
    assert not (tmp_path / "spool").exists() or not any((tmp_path / "spool").glob("2*"))

    service_env = _env(DATABASE_URL=database)
    summary = json.loads(_perfdash(service_venv, "summary", "--format", "json", env=service_env, cwd=tmp_path))
    [row] = summary["rows"]
    assert row["run"]["configuration"]["suite"] == "timm_models"
    assert row["run"]["summary"]["passrate_text"] == "100%, 1/1"
    assert "run(s) examined" in _perfdash(service_venv, "detect", env=service_env, cwd=tmp_path)
    report = tmp_path / "report.md"
    _perfdash(service_venv, "report", "--run", str(row["run"]["id"]), "--output", str(report), env=service_env,
              cwd=tmp_path)
    assert "timm_models" in report.read_text()
    with urllib.request.urlopen(f"{served}/api/v1/runs", timeout=10) as response:
        assert [run["id"] for run in json.loads(response.read())] == [row["run"]["id"]]
