"""`perfdash ingest --url` against a real service (uvicorn on 127.0.0.1, SQLite migrated by Alembic): what is
spooled, what is refused and set aside, and that one bad upload never holds back the others.

The one stand-in is a fault in front of the real app: it answers 500 to any upload carrying a marker model name, the
way a service bug triggered by one body would; every other request reaches the real service.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from perfdash import spool
from perfdash.cli import main

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "service" / "data" / "pytorch_run"
TOKEN = "upload-token"
POISON = b"poison_model_500"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _FailsForOneBody:
    """ASGI wrapper: 500 for an upload whose body carries POISON (counted), the real app for everything else."""

    def __init__(self, app) -> None:  # type: ignore[no-untyped-def]
        self.app = app
        self.poisoned = 0

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        if POISON in body:
            self.poisoned += 1
            await send({"type": "http.response.start", "status": 500,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"Internal Server Error"})
            return
        replayed = False

        async def replay():  # type: ignore[no-untyped-def]
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _service_app(database_url: str) -> _FailsForOneBody:
    from service.app import create_app
    from service.settings import Settings

    return _FailsForOneBody(create_app(Settings(database_url=database_url, ingest_tokens=TOKEN), post_ingest_hooks=[]))


@pytest.fixture
def database(tmp_path: Path) -> str:
    from service.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'service.db'}"
    upgrade(url)
    return url


@pytest.fixture
def client_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    spool_dir = tmp_path / "spool"
    monkeypatch.setenv("PERFDASH_SPOOL_DIR", str(spool_dir))
    monkeypatch.setenv("PERFDASH_TOKEN", TOKEN)
    for name in ("PERFDASH_TOKEN_FILE", "PERFDASH_INGEST_TOKENS"):
        monkeypatch.delenv(name, raising=False)
    return spool_dir


def _runs(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.scalar(sa.text("SELECT count(*) FROM runs"))
    finally:
        engine.dispose()


def _results(tmp_path: Path, name: str, *, poison: bool = False, malformed: bool = False) -> Path:
    """A copy of a real PyTorch result directory; poisoned: one more model the wrapper answers 500 for;
    malformed: a batch size the real service refuses (422)."""
    target = tmp_path / name
    shutil.copytree(DATA, target)
    accuracy = target / "inductor_torchbench_float32_inference_cpu_accuracy.csv"
    if poison:
        with accuracy.open("a") as out:
            out.write(f"cpu,{POISON.decode()},1,pass\n")
    if malformed:
        with accuracy.open("a") as out:
            out.write("cpu,broken_model,four,pass\n")
    return target


def _ingest(path: Path, url: str, night: int, *extra: str) -> int:
    return main(["ingest", str(path), "--url", url, "--retries", "1", "--machine", "Xeon",
                 "--timestamp", f"2026-07-{night:02d}T01:00:00+00:00", *extra])


def test_a_refused_spool_entry_never_holds_back_the_good_ones(tmp_path, client_env, database, capsys,
                                                              serve_in_thread) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    # The service is down for three nights: a 500-poisoned upload, a malformed one and a good one are spooled.
    assert _ingest(_results(tmp_path, "poisoned", poison=True), url, 1) == 3
    assert _ingest(_results(tmp_path, "malformed", malformed=True), url, 2) == 3
    assert _ingest(_results(tmp_path, "good1"), url, 3) == 3
    assert len(spool.entries(client_env)) == 3
    capsys.readouterr()

    with serve_in_thread(_service_app(database), port) as app:
        # Back up: the malformed entry is refused at once (422) and set aside, the good spooled night and tonight's
        # are stored whatever the order, and the poisoned one (500) stays spooled, its server errors counted.
        assert _ingest(_results(tmp_path, "good2"), url, 4, "--max-server-errors", "2") == 1
        err = capsys.readouterr().err
        assert "REJECTED" in err and "HTTP 422" in err and "accuracy.csv" in err and "line 9" in err, err
        assert _runs(database) == 2
        rejected = list((client_env / spool.REJECTED).iterdir())
        assert len(rejected) == 1
        reason = json.loads((rejected[0] / spool.REASON).read_text())
        assert reason["status"] == 422
        assert (rejected[0] / "inductor_torchbench_float32_inference_cpu_accuracy.csv").read_bytes().endswith(
            b"broken_model,four,pass\n")
        [waiting] = spool.entries(client_env)
        assert spool.load(waiting).server_errors == 1

        assert _ingest(_results(tmp_path, "good3"), url, 5, "--max-server-errors", "2") == 3  # 500 #2: still kept
        assert _runs(database) == 3
        capsys.readouterr()

        # The third 500 for the same body is one more than allowed: refused, moved aside, loud, non-zero.
        assert _ingest(_results(tmp_path, "good4"), url, 6, "--max-server-errors", "2") == 1
        err = capsys.readouterr().err
        assert "REJECTED" in err and "HTTP 500" in err and "3 server errors" in err
        assert _runs(database) == 4
        assert spool.entries(client_env) == []
        assert len(list((client_env / spool.REJECTED).iterdir())) == 2
        assert app.poisoned == 3

        # Nothing left to hold back: a clean night exits 0.
        assert _ingest(_results(tmp_path, "good5"), url, 7) == 0
        assert _runs(database) == 5


def test_a_body_the_service_answers_500_for_is_refused_after_the_allowed_invocations(tmp_path, client_env, database,
                                                                                      capsys, serve_in_thread) -> None:
    """The 500s of one invocation count once (a few seconds of them spool the upload); a body the service fails
    for invocation after invocation is refused after --max-server-errors of them, loud, moved aside."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    poisoned = _results(tmp_path, "poisoned", poison=True)
    with serve_in_thread(_service_app(database), port) as app:
        assert _ingest(poisoned, url, 1, "--retries", "6", "--max-server-errors", "3") == 3
        assert app.poisoned == 6
        [entry] = spool.entries(client_env)
        assert spool.load(entry).server_errors == 1
        for night in (2, 3):
            assert _ingest(_results(tmp_path, f"good{night}"), url, night, "--max-server-errors", "3") == 3
        assert spool.load(entry).server_errors == 3
        assert _ingest(_results(tmp_path, "good4"), url, 4, "--max-server-errors", "3") == 1
    err = capsys.readouterr().err
    assert f"REJECTED spooled upload {entry.name}" in err and "HTTP 500" in err and "4 server errors" in err
    assert "Traceback" not in err
    assert spool.entries(client_env) == [] and _runs(database) == 3


class _FailsForAWhile:
    """ASGI wrapper: HTTP 500 for every request during the first ``seconds`` after the first one (a service that
    restarts, a database failing over), the real app after."""

    def __init__(self, app, seconds: float) -> None:  # type: ignore[no-untyped-def]
        self.app, self.seconds, self.started, self.failed = app, seconds, None, 0

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        import time

        if scope["type"] == "http":
            self.started = self.started or time.monotonic()
            if time.monotonic() - self.started < self.seconds:
                self.failed += 1
                await send({"type": "http.response.start", "status": 500, "headers": []})
                await send({"type": "http.response.body", "body": b"Internal Server Error"})
                return
        await self.app(scope, receive, send)


def test_five_seconds_of_500_spool_the_upload_and_it_keeps_the_time_it_was_made(tmp_path, client_env, database,
                                                                                capsys, serve_in_thread) -> None:
    from service.app import create_app
    from service.settings import Settings

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    results = _results(tmp_path, "night")
    app = _FailsForAWhile(create_app(Settings(database_url=database, ingest_tokens=TOKEN), post_ingest_hooks=[]), 5.0)
    with serve_in_thread(app, port):
        # no --timestamp and no manifest: the run has no start of its own
        assert main(["ingest", str(results), "--url", url, "--machine", "Xeon"]) == 3
        assert app.failed >= 3
        [entry] = spool.entries(client_env)
        form = json.loads((entry / spool.FORM).read_text())
        assert "timestamp" not in form and form["made_at"].endswith("+00:00")
        # it waited in the spool across midnight: made late on the 1st, posted after the service came back
        form["made_at"] = "2026-07-01T23:59:30+00:00"
        (entry / spool.FORM).write_text(json.dumps(form))
        import time

        time.sleep(max(0.0, 5.0 - (time.monotonic() - app.started)))
        assert main(["ingest", str(_results(tmp_path, "other")), "--url", url, "--machine", "Xeon",
                     "--timestamp", "2026-07-03T01:00:00+00:00"]) == 0
    assert "REJECTED" not in capsys.readouterr().err
    engine = sa.create_engine(database)
    try:
        with engine.connect() as connection:
            nights = sorted(str(n) for n in connection.scalars(sa.text("SELECT night FROM runs")))
    finally:
        engine.dispose()
    assert nights == ["2026-07-01", "2026-07-03"]


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_spool_is_private_to_its_user(tmp_path, client_env) -> None:
    results = _results(tmp_path, "night")
    assert _ingest(results, f"http://127.0.0.1:{_free_port()}", 1) == 3
    [entry] = spool.entries(client_env)
    assert _mode(client_env) == 0o700 and _mode(entry) == 0o700
    assert {_mode(p) for p in entry.iterdir()} == {0o600}
    assert {os.lstat(p).st_uid for p in (client_env, entry, *entry.iterdir())} == {os.geteuid()}


def test_a_shared_world_writable_spool_gets_a_private_directory_inside(tmp_path, monkeypatch, client_env) -> None:
    shared = tmp_path / "volume"
    shared.mkdir()
    shared.chmod(0o1777)  # what the images made before: a sticky world-writable node volume
    monkeypatch.setenv("PERFDASH_SPOOL_DIR", str(shared))
    assert _ingest(_results(tmp_path, "night"), f"http://127.0.0.1:{_free_port()}", 1) == 3
    mine = shared / f"uid-{os.geteuid()}"
    assert _mode(mine) == 0o700 and len(spool.entries(shared)) == 1 and spool.entries(shared)[0].parent == mine


def test_a_spool_others_may_write_is_neither_read_nor_written(tmp_path, monkeypatch, client_env, capsys) -> None:
    open_spool = tmp_path / "open"
    open_spool.mkdir()
    open_spool.chmod(0o777)  # writable by anyone, no sticky bit: anything may be planted or swapped in it
    monkeypatch.setenv("PERFDASH_SPOOL_DIR", str(open_spool))
    results = _results(tmp_path, "night")
    assert _ingest(results, f"http://127.0.0.1:{_free_port()}", 1) == 1
    err = capsys.readouterr().err
    assert f"the spool {open_spool} is owned by this user with mode 0777" in err and "chmod 700" in err
    assert "Traceback" not in err and list(open_spool.iterdir()) == []


@pytest.mark.parametrize("fault", ["mode", "owner"])
def test_a_planted_entry_is_set_aside_not_posted(tmp_path, client_env, database, capsys, serve_in_thread,
                                                 fault) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    assert _ingest(_results(tmp_path, "night1"), url, 1) == 3
    [entry] = spool.entries(client_env)
    planted = entry / "inductor_torchbench_float32_inference_cpu_accuracy.csv"
    if fault == "mode":
        planted.chmod(0o666)  # anyone could have rewritten it
        reason = "has mode 0666: writable by others"
    else:
        if os.geteuid() != 0:
            pytest.skip("changing a file's owner needs root")
        os.chown(planted, 65534, 65534)
        reason = "is owned by uid 65534"
    with serve_in_thread(_service_app(database), port):
        assert _ingest(_results(tmp_path, "night2"), url, 2) == 1
    err = capsys.readouterr().err
    assert f"NOT POSTED spooled upload {entry.name}" in err and reason in err and "Traceback" not in err
    assert _runs(database) == 1  # tonight's, not the planted one
    assert spool.entries(client_env) == [] and (client_env / spool.UNTRUSTED / entry.name).is_dir()


def test_an_outage_is_retried_later_and_never_counted_against_the_upload(tmp_path, client_env, database,
                                                                          capsys, serve_in_thread) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    results = _results(tmp_path, "night")
    for _ in range(5):  # far more than --max-server-errors: an outage is never counted against the body
        assert _ingest(results, url, 1, "--max-server-errors", "1") == 3
    assert len(spool.entries(client_env)) == 5
    with serve_in_thread(_service_app(database), port):
        assert _ingest(results, url, 1) == 0
    out = capsys.readouterr().out
    assert out.count("already stored") == 5 and _runs(database) == 1
    assert spool.entries(client_env) == [] and not (client_env / spool.REJECTED).exists()


def test_an_unwritable_spool_is_one_line_and_the_files_stay(tmp_path, monkeypatch, client_env) -> None:
    # A spool path under a regular file cannot be created, even by root (these tests may run as root).
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("PERFDASH_SPOOL_DIR", str(blocker / "spool"))
    results = _results(tmp_path, "night")
    before = {p.name: p.read_bytes() for p in results.iterdir()}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "bisect")])}
    done = subprocess.run([sys.executable, "-m", "perfdash.cli", "ingest", str(results), "--url",
                           f"http://127.0.0.1:{_free_port()}", "--retries", "1"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 4, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "cannot be spooled" in lines[0] and f"the files stay in {results.resolve()}" in lines[0]
    assert str(blocker / "spool") in lines[0]
    assert {p.name: p.read_bytes() for p in results.iterdir()} == before


def test_the_token_comes_from_a_file_or_the_environment(tmp_path, client_env, database, monkeypatch,
                                                        capsys, serve_in_thread) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    with serve_in_thread(_service_app(database), port):
        monkeypatch.delenv("PERFDASH_TOKEN")
        assert _ingest(_results(tmp_path, "a"), url, 1) == 2
        assert "needs a token" in capsys.readouterr().err
        assert _ingest(_results(tmp_path, "b"), url, 2, "--token-file", str(token_file)) == 0
        monkeypatch.setenv("PERFDASH_TOKEN_FILE", str(token_file))
        assert _ingest(_results(tmp_path, "c"), url, 3) == 0
        monkeypatch.delenv("PERFDASH_TOKEN_FILE")
        monkeypatch.setenv("PERFDASH_TOKEN", TOKEN)
        assert _ingest(_results(tmp_path, "d"), url, 4) == 0
        assert _ingest(_results(tmp_path, "e"), url, 5, "--token-file", str(tmp_path / "missing")) == 2
        assert "cannot read the token file" in capsys.readouterr().err
    assert _runs(database) == 3


def test_one_ingest_drains_a_shared_spool_and_an_unreadable_entry_is_set_aside(tmp_path, client_env, database,
                                                                               capsys, serve_in_thread) -> None:
    # Cells on one agent share the spool volume: while one ingest posts the spool another leaves it alone (each
    # still posts its own results), so no entry is posted twice at once.
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    assert _ingest(_results(tmp_path, "night1"), url, 1) == 3
    broken = spool.save(client_env, spool.load(spool.entries(client_env)[0]).upload)
    (broken / spool.FORM).write_text("{not json")
    with serve_in_thread(_service_app(database), port):
        with spool.drain_lock(client_env) as mine:
            assert mine
            assert _ingest(_results(tmp_path, "night2"), url, 2) == 0
            assert "another perfdash ingest is posting the spool" in capsys.readouterr().err
            assert len(spool.entries(client_env)) == 2 and _runs(database) == 1
        assert _ingest(_results(tmp_path, "night3"), url, 3) == 1
    err = capsys.readouterr().err
    assert f"REJECTED spooled upload {broken.name}" in err and "unreadable spool entry" in err
    assert _runs(database) == 3 and spool.entries(client_env) == []
    assert [p.name for p in (client_env / spool.REJECTED).iterdir()] == [broken.name]


def test_a_timestamp_without_an_offset_is_sent_as_utc(tmp_path, client_env, database, serve_in_thread) -> None:
    """The service reads the form's timestamp as RFC 3339 (issue 29's kept contract); `--timestamp` as the README
    shows it, without an offset, is UTC as a direct ingest takes it (this client sends the offset; the service takes
    an upload of an older client, spooled without one, the same way)."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with serve_in_thread(_service_app(database), port):
        assert main(["ingest", str(_results(tmp_path, "naive")), "--url", url, "--retries", "1", "--machine", "Xeon",
                     "--timestamp", "2026-07-09T01:00:00"]) == 0
    engine = sa.create_engine(database)
    try:
        with engine.connect() as connection:
            started = connection.scalar(sa.text("SELECT started_at FROM runs"))
    finally:
        engine.dispose()
    assert str(started).startswith("2026-07-09 01:00:00")
