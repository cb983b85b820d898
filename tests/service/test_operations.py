"""Operations on a real Postgres (issue 13, items 4 and 5): content idempotency, the future refused, deleting a run,
503 + Retry-After and readiness while Postgres is stopped, no connection reset after an error, detection retried for
runs committed just before the database went away."""

from __future__ import annotations

import os
import random
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from perfdash.cli import main
from service.models import Result, Run

DATA = Path(__file__).parent / "data" / "pytorch_run"


def _count(session, model) -> int:
    return session.scalar(sa.select(sa.func.count()).select_from(model))


# ------------------------------------------------------------------------------------------------------------------
# Idempotency by content


def _reordered(data: bytes, seed: int) -> bytes:
    header, *rows = data.decode().splitlines()
    random.Random(seed).shuffle(rows)
    return ("\n".join([header, *rows]) + "\n").encode()


def _pytorch_files() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(DATA.iterdir())}


def test_identical_uploads_without_timestamp_store_one_run(upload, session):
    first = upload(_pytorch_files(), machine="Xeon", commit="abc")
    assert first.status_code == 201, first.text
    second = upload(_pytorch_files(), machine="Xeon", commit="abc")
    assert second.status_code == 200, second.text
    assert second.json()["runs"][0]["run_id"] == first.json()["runs"][0]["run_id"]
    assert _count(session, Run) == 1
    # other content without a timestamp is another run, not a conflict
    other = {n: d.replace(b"alexnet", b"alexnet_v2") for n, d in _pytorch_files().items()}
    assert upload(other, machine="Xeon", commit="abc").status_code == 201
    assert _count(session, Run) == 2


@pytest.mark.parametrize("form", [{}, {"timestamp": "2026-03-04T02:00:00+00:00"}], ids=["no timestamp", "timestamp"])
def test_same_rows_in_another_order_are_a_no_op(upload, session, form):
    assert upload(_pytorch_files(), machine="Xeon", commit="abc", **form).status_code == 201
    shuffled = {n: _reordered(d, seed=3) for n, d in _pytorch_files().items()}
    assert shuffled != _pytorch_files()
    response = upload(shuffled, machine="Xeon", commit="abc", **form)
    assert response.status_code == 200, response.text
    assert response.json()["runs"][0]["created"] is False
    assert _count(session, Run) == 1


def test_a_copy_of_the_same_files_is_the_same_run_through_the_cli(fresh_postgres, tmp_path, monkeypatch, capsys):
    from service.migrate import upgrade

    upgrade(fresh_postgres)
    monkeypatch.setenv("DATABASE_URL", fresh_postgres)
    first, copy = tmp_path / "night", tmp_path / "copy"
    shutil.copytree(DATA, first)
    shutil.copytree(DATA, copy)
    for f in copy.iterdir():  # another file time: times are not what the run is
        os.utime(f, (1_700_000_000, 1_700_000_000))
    assert main(["ingest", str(first), "--machine", "Xeon"]) == 0
    assert main(["ingest", str(copy), "--machine", "Xeon"]) == 0
    assert "already stored" in capsys.readouterr().out.splitlines()[-1]
    engine = sa.create_engine(fresh_postgres)
    with engine.connect() as connection:
        assert connection.scalar(sa.text("SELECT count(*) FROM runs")) == 1
        assert connection.scalar(sa.text("SELECT count(*) FROM results")) == 7
    engine.dispose()


# ------------------------------------------------------------------------------------------------------------------
# Time


def test_a_start_more_than_a_day_ahead_is_refused(upload, session):
    soon = datetime.now(UTC) + timedelta(hours=20)  # an agent's clock a little ahead: accepted
    assert upload(_pytorch_files(), machine="Xeon", timestamp=soon.isoformat()).status_code == 201
    late = datetime.now(UTC) + timedelta(days=1, hours=1)
    response = upload({n: d.replace(b"alexnet", b"alex") for n, d in _pytorch_files().items()}, machine="Xeon",
                      timestamp=late.isoformat())
    assert response.status_code == 422
    assert "ahead of the server's clock" in response.json()["detail"]["message"]
    assert _count(session, Run) == 1


# ------------------------------------------------------------------------------------------------------------------
# Deleting a run


def test_delete_a_run_with_the_token(client, upload, session, auth):
    run_id = upload(_pytorch_files(), machine="Xeon", timestamp="2099-01-01T00:00:00+00:00")
    assert run_id.status_code == 422  # the future cannot get in in the first place
    run_id = upload(_pytorch_files(), machine="Xeon", timestamp="2026-03-04T02:00:00+00:00").json()["runs"][0]["run_id"]
    assert client.delete(f"/api/v1/runs/{run_id}").status_code == 401
    assert client.delete(f"/api/v1/runs/{run_id}", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert _count(session, Run) == 1
    assert client.delete(f"/api/v1/runs/{run_id}", headers=auth).status_code == 204
    assert _count(session, Run) == 0 and _count(session, Result) == 0
    assert client.get(f"/api/v1/runs/{run_id}").status_code == 404
    assert client.delete(f"/api/v1/runs/{run_id}", headers=auth).status_code == 404
    # the same night can be stored again afterwards
    again = upload(_pytorch_files(), machine="Xeon", timestamp="2026-03-04T02:00:00+00:00")
    assert again.status_code == 201


# ------------------------------------------------------------------------------------------------------------------
# Errors: no reset, no SQL, 503 while the database is down


def test_an_unexpected_error_is_a_500_that_does_not_escape_the_app(settings):
    from service.app import create_app

    app = create_app(settings, post_ingest_hooks=[])

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("SELECT secret FROM somewhere")

    # raise_server_exceptions: an exception that leaves the app (which uvicorn answers by closing the connection)
    # would be raised here
    with TestClient(app, raise_server_exceptions=True) as client:
        response = client.get("/boom")
        assert response.status_code == 500
        assert "SELECT" not in response.text and "Traceback" not in response.text
        assert client.get("/healthz/live").status_code == 200


def test_database_stopped_gives_503_and_health_says_so(tmp_path, temporary_postgres):
    from service.app import create_app
    from service.migrate import upgrade
    from service.settings import Settings

    with temporary_postgres() as url:
        upgrade(url)
        settings = Settings(database_url=url, ingest_tokens="t", spool_dir=tmp_path / "spool")
        client = TestClient(create_app(settings, post_ingest_hooks=[]), raise_server_exceptions=True)
        client.__enter__()
        assert client.get("/healthz/ready").json() == {"status": "ok", "database": "ok"}
        assert client.get("/api/v1/runs").status_code == 200
    # the server is stopped (and its files are gone)
    try:
        for path in ("/healthz/ready", "/healthz"):
            response = client.get(path)
            assert response.status_code == 503 and response.headers["Retry-After"], path
        assert client.get("/healthz/live").status_code == 200
        for method, path in (("GET", "/api/v1/runs"), ("GET", "/api/v1/configurations"), ("GET", "/"),
                             ("GET", "/trends?suite=torchbench")):
            response = client.request(method, path)
            assert response.status_code == 503, (path, response.status_code, response.text[:300])
            assert response.headers["Retry-After"]
            assert "SELECT" not in response.text and "psycopg2" not in response.text
        files = {p.name: p.read_bytes() for p in DATA.iterdir()}
        response = client.post("/api/v1/runs", headers={"Authorization": "Bearer t"},
                               files=[("files", (n, d, "text/csv")) for n, d in files.items()], data={"machine": "X"})
        assert response.status_code == 503 and response.headers["Retry-After"]
    finally:
        client.__exit__(None, None, None)


# ------------------------------------------------------------------------------------------------------------------
# Hooks of a run committed just before the database went away


def _gone(_session, _run_id: int) -> None:
    raise sa.exc.OperationalError("SELECT 1", {}, Exception("server closed the connection unexpectedly"))


def test_hooks_of_runs_left_pending_run_on_the_next_ingest(session, run_files, manifest):
    from service.ingest.files import bundles_from_files
    from service.ingest.upload import ingest

    first = ingest(session, bundles_from_files(run_files({"a": 1.5}, manifest=manifest(night="2026-01-02"))),
                   [_gone])
    (stored,) = first.runs
    assert session.get(Run, stored.run_id).hooks_pending
    assert "database unavailable" in first.hook_errors[0]
    calls: list[int] = []
    second = ingest(session, bundles_from_files(run_files({"a": 1.4}, manifest=manifest(night="2026-01-03"))),
                    [lambda _s, run_id: calls.append(run_id)])
    assert calls == [stored.run_id, second.runs[0].run_id]
    assert not session.get(Run, stored.run_id).hooks_pending
    # a hook that fails for another reason is reported once, not retried forever
    third = ingest(session, bundles_from_files(run_files({"a": 1.3}, manifest=manifest(night="2026-01-04"))),
                   [lambda _s, _r: 1 / 0])
    assert third.hook_errors and not session.get(Run, third.runs[0].run_id).hooks_pending


def test_perfdash_detect_runs_the_pending_hooks(fresh_postgres, monkeypatch, capsys, run_files, manifest):
    from service.db import make_engine, make_session_factory
    from service.ingest.files import bundles_from_files
    from service.ingest.upload import ingest
    from service.migrate import upgrade
    from service.models import Finding

    upgrade(fresh_postgres)
    monkeypatch.setenv("DATABASE_URL", fresh_postgres)
    engine = make_engine(fresh_postgres)
    factory = make_session_factory(engine)
    with factory() as session:
        ingest(session, bundles_from_files(run_files({"a": 1.5, "b": 1.2}, manifest=manifest(night="2026-01-02"))))
        # a model failed the next night, and detection could not run (the database went away after the commit)
        ingest(session, bundles_from_files(run_files({"a": 1.5, "b": 1.2}, statuses={"b": "fail_accuracy"},
                                                     manifest=manifest(night="2026-01-03"))), [_gone])
        assert session.scalar(sa.select(sa.func.count()).select_from(Run).where(Run.hooks_pending)) == 1
        assert session.scalar(sa.select(sa.func.count()).select_from(Finding)) == 0
    assert main(["detect"]) == 0
    assert "1 run(s) whose post-ingest hooks had not run" in capsys.readouterr().out
    with factory() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(Run).where(Run.hooks_pending)) == 0
        assert session.scalar(sa.select(sa.func.count()).select_from(Finding)) >= 1
    engine.dispose()


def test_nul_in_any_statement_is_refused_before_it_reaches_postgres(session):
    from service.db import InputRejected
    from service.models import Annotation

    session.add(Annotation(text="a\x00b", night=datetime(2026, 1, 1).date()))
    with pytest.raises((InputRejected, sa.exc.StatementError)) as caught:
        session.flush()
    assert isinstance(caught.value, InputRejected) or isinstance(caught.value.orig, InputRejected)
    session.rollback()


def test_a_run_stored_with_the_file_order_digest_is_still_a_no_op(upload, session):
    """Runs stored before rows were hashed by name carry the digest of their file order."""
    from service.ingest.files import IngestDefaults, bundles_from_files

    form = {"machine": "Xeon", "commit": "abc", "timestamp": "2026-03-04T02:00:00+00:00"}
    files = _pytorch_files()
    first = upload(files, **form)
    assert first.status_code == 201
    (bundle,) = bundles_from_files(files, IngestDefaults(machine="Xeon", commit="abc",
                                                         timestamp=datetime.fromisoformat(form["timestamp"])))
    assert bundle.file_order_sha256 != bundle.content_sha256  # the sample files are not in name order
    session.execute(sa.update(Run).values(content_sha256=bundle.file_order_sha256))
    again = upload(files, **form)
    assert again.status_code == 200, again.text
    assert upload({n: d.replace(b"2.000000", b"2.100000") for n, d in files.items()}, **form).status_code == 409


def test_direct_ingest_into_an_older_schema_says_to_upgrade(fresh_postgres, monkeypatch, capsys):
    from service.migrate import upgrade

    upgrade(fresh_postgres, "0002")
    monkeypatch.setenv("DATABASE_URL", fresh_postgres)
    assert main(["ingest", str(DATA), "--machine", "Xeon"]) == 1
    err = capsys.readouterr().err
    assert "perfdash db upgrade" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
