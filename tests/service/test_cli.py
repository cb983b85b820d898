"""`perfdash ingest|summary|db` end to end: into SQLite and a fresh Postgres directly, and over HTTP to a real
uvicorn server on 127.0.0.1 (retried, spooled while it is down, the spool posted on the next invocation)."""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from perfdash import spool
from perfdash.cli import main

DATA = Path(__file__).parent / "data" / "pytorch_run"


def _count_runs(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.scalar(sa.text("SELECT count(*) FROM runs"))
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def database(request, tmp_path, monkeypatch) -> str:
    url = f"sqlite:///{tmp_path / 'perfdash.db'}" if request.param == "sqlite" \
        else request.getfixturevalue("fresh_postgres")
    monkeypatch.setenv("DATABASE_URL", url)
    return url


def test_ingest_directly_then_summary(database, capsys):
    assert main(["ingest", str(DATA), "--machine", "Xeon 8375C", "--commit", "abc123",
                 "--timestamp", "2026-06-01T01:00:00+00:00"]) == 0
    assert "stored: torchbench inductor, 7 models" in capsys.readouterr().out
    assert main(["ingest", str(DATA), "--machine", "Xeon 8375C", "--commit", "abc123",
                 "--timestamp", "2026-06-01T01:00:00+00:00"]) == 0
    assert "already stored" in capsys.readouterr().out
    assert _count_runs(database) == 1

    assert main(["summary", "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    assert "## Executive Summary — 2026-06-01 ##" in markdown
    assert "| Compiler | torchbench |" in markdown
    for cell in ("| inductor | 50%, 3/6 |", "| inductor | 1.36x |", "| inductor | 33.00 |", "| inductor | 1.16x |"):
        assert cell in markdown

    assert main(["summary", "--format", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["rows"][0]["run"]["summary"]["passrate_text"] == "50%, 3/6"

    assert main(["summary"]) == 0
    assert "50%, 3/6" in capsys.readouterr().out
    assert main(["summary", "--run", "999999"]) == 1


def test_reingest_without_timestamp_is_idempotent(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'p.db'}")
    copy = tmp_path / "results"
    shutil.copytree(DATA, copy)
    assert main(["ingest", str(copy)]) == 0
    assert main(["ingest", str(copy / "inductor_torchbench_float32_inference_cpu_performance.csv"),
                 str(copy / "inductor_torchbench_float32_inference_cpu_accuracy.csv")]) == 0
    assert "already stored" in capsys.readouterr().out.splitlines()[-1]


def test_malformed_file_exits_1_naming_file_and_line(tmp_path, monkeypatch, capsys):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    bad = tmp_path / "inductor_huggingface_float16_training_cuda_accuracy.csv"
    bad.write_text("dev,name,batch_size,accuracy\ncuda,BertForMaskedLM,4,pass\ncuda,T5Small,four,pass\n")
    assert main(["ingest", str(bad)]) == 1
    err = capsys.readouterr().err
    assert bad.name in err and "line 3" in err and "'batch_size'" in err
    assert _count_runs(url) == 0
    assert main(["ingest", str(tmp_path / "missing")]) == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _service_app(url: str):
    from service.app import create_app
    from service.settings import Settings

    return create_app(Settings(database_url=url, ingest_tokens="secret-token"), post_ingest_hooks=[])


@pytest.fixture
def server_db(tmp_path) -> Iterator[str]:
    from service.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'server.db'}"
    upgrade(url)
    yield url


def test_post_spool_while_down_and_retry_spool_next_time(tmp_path, serve_in_thread, monkeypatch, capsys, server_db):
    spool_dir = tmp_path / "spool"
    monkeypatch.setenv("PERFDASH_SPOOL_DIR", str(spool_dir))
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'unused.db'}")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    flags = ["--url", url, "--token", "secret-token", "--retries", "2", "--machine", "Xeon"]

    # the service is down: the upload is spooled, exit status 3
    assert main(["ingest", str(DATA), *flags, "--timestamp", "2026-07-01T01:00:00+00:00"]) == 3
    assert "spooled to" in capsys.readouterr().err
    assert len([p for p in spool_dir.iterdir() if p.is_dir()]) == 1

    second = tmp_path / "second"
    shutil.copytree(DATA, second)
    with serve_in_thread(_service_app(server_db), port):
        # the next invocation posts the spooled upload first, then its own
        assert main(["ingest", str(second), *flags, "--timestamp", "2026-07-02T01:00:00+00:00"]) == 0
        out = capsys.readouterr().out
        assert out.index("spooled") < out.index(str(second.resolve()))
        assert _count_runs(server_db) == 2
        assert spool.entries(spool_dir) == []

        # a wrong token fails the command, but the upload is kept for a valid token: the files are not at fault
        assert main(["ingest", str(DATA), "--url", url, "--token", "nope", "--retries", "1"]) == 1
        assert "HTTP 401" in capsys.readouterr().err
        assert len(spool.entries(spool_dir)) == 1 and _count_runs(server_db) == 2
        assert main(["ingest", str(second), *flags, "--timestamp", "2026-07-02T01:00:00+00:00"]) == 0
        assert _count_runs(server_db) == 3 and spool.entries(spool_dir) == []


def test_db_upgrade_and_current(tmp_path, monkeypatch, capsys):
    from alembic.script import ScriptDirectory

    from service.migrate import alembic_config

    url = f"sqlite:///{tmp_path / 'x.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    assert main(["db", "current"]) == 0
    assert "empty" in capsys.readouterr().out
    assert main(["db", "upgrade"]) == 0
    capsys.readouterr()
    assert main(["db", "current"]) == 0
    assert capsys.readouterr().out.strip() == ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    assert main(["db", "downgrade", "base"]) == 0
    capsys.readouterr()
    assert main(["db", "current"]) == 0
    assert "empty" in capsys.readouterr().out
