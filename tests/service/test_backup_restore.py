"""Backup, restore and upgrade (issue 40, item 3) on a real Postgres.

- `perfdash db backup FILE` of a database holding real runs, findings and a bisection, restored with `perfdash db
  restore FILE` into an empty database, gives byte-identical answers from the API's endpoints;
- the refusals: an SQLite URL, a missing pg_dump, a database that is not empty, a file that is no archive;
- the upgrade drill: a database at the oldest migration (0001) holding real runs, upgraded to head, loses nothing:
  the same row counts and byte-identical answers as before it went down.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from perfdash.cli import main

DATA = Path(__file__).parent / "data"
CONTRACT_DATA = Path(__file__).parents[1] / "contract" / "data"
# The result directories of PyTorch's harness (and runner.py's statuses) the tests already hold: real CSVs.
REAL_RUNS = (DATA / "pytorch_run", CONTRACT_DATA / "runner_py_statuses")
TABLES_AT_0001 = ("machines", "configurations", "runs", "results", "run_summaries", "annotations")


def _fill(history: list[Path] = ()) -> None:
    """Real result directories through `perfdash ingest` (detection runs as its hook), then ``history``'s."""
    for night, folder in enumerate(REAL_RUNS):
        assert main(["ingest", str(folder), "--machine", "Drill Xeon", "--commit", f"{night:040d}",
                     "--timestamp", f"2026-02-0{night + 1}T01:00:00+00:00"]) == 0
    for folder in history:
        assert main(["ingest", str(folder)]) == 0


@pytest.fixture
def history(run_files, manifest, tmp_path: Path) -> list[Path]:
    """6 nights of two models, vit_small failing its accuracy check on the last: a status finding."""
    folders = []
    for night in range(6):
        wobble = 1 + 0.01 * ((night * 7) % 5 - 2)
        files = run_files({"resnet18": 1.5 * wobble, "vit_small": 2.0 * wobble},
                          statuses={"vit_small": "fail_accuracy"} if night == 5 else {},
                          manifest=manifest(night=f"2026-01-{night + 1:02d}", commit=f"c{night:04d}" + "0" * 36))
        folder = tmp_path / f"night-{night:02d}"
        folder.mkdir()
        for name, data in files.items():
            (folder / name).write_bytes(data)
        folders.append(folder)
    return folders


def _answers(url: str) -> dict[str, bytes]:
    """What the API answers over the stored data: every list, each run, each history, a comparison."""
    from service.app import create_app
    from service.settings import Settings

    with TestClient(create_app(Settings(database_url=url), post_ingest_hooks=[])) as client:
        def get(path: str) -> bytes:
            response = client.get(path)
            assert response.status_code == 200, (path, response.text)
            return response.content

        answers = {path: get(path) for path in (
            "/api/v1/runs?limit=1000", "/api/v1/configurations", "/api/v1/summary", "/api/v1/series",
            "/api/v1/findings", "/api/v1/bisections", "/api/v1/releases/versions", "/api/v1/annotations")}
        runs = client.get("/api/v1/runs?limit=1000").json()
        for run in runs:
            answers[f"/api/v1/runs/{run['id']}?samples=true"] = get(f"/api/v1/runs/{run['id']}?samples=true")
            answers[f"/api/v1/summary/runs/{run['id']}"] = get(f"/api/v1/summary/runs/{run['id']}")
        for series in client.get("/api/v1/series").json():
            answers[f"/api/v1/series/{series['id']}/history"] = get(f"/api/v1/series/{series['id']}/history")
        for configuration in client.get("/api/v1/configurations").json():
            path = f"/api/v1/configurations/{configuration['id']}/history"
            answers[path] = get(path)
        by_configuration: dict[int, list[int]] = {}
        for run in runs:  # newest first
            by_configuration.setdefault(run["configuration"]["id"], []).append(run["id"])
        for newest, *_, oldest in (ids for ids in by_configuration.values() if len(ids) > 1):
            path = f"/api/v1/compare/runs?base={oldest}&new={newest}"
            answers[path] = get(path)
    return answers


def _counts(url: str, tables: tuple[str, ...]) -> dict[str, int]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return {t: connection.scalar(sa.text(f"SELECT count(*) FROM {t}")) for t in tables}
    finally:
        engine.dispose()


def test_a_backup_restored_into_an_empty_database_answers_byte_for_byte(fresh_postgres, new_database, history,
                                                                        tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("DATABASE_URL", fresh_postgres)
    assert main(["db", "upgrade"]) == 0
    _fill(history)
    before = _answers(fresh_postgres)
    assert len(before) > 20 and b"fail_accuracy" in before["/api/v1/findings"]
    archive = tmp_path / "perfdash.dump"
    assert main(["db", "backup", str(archive)]) == 0
    assert archive.read_bytes().startswith(b"PGDMP") and "backed up into" in capsys.readouterr().out

    empty = new_database()
    monkeypatch.setenv("DATABASE_URL", empty)
    assert main(["db", "restore", str(archive)]) == 0
    assert _answers(empty) == before
    # the revision came with it: nothing to migrate
    from service.migrate import current_heads, head_revision

    assert current_heads(empty) == {head_revision()}

    # a second restore into the now full database is refused, and changes nothing
    capsys.readouterr()
    assert main(["db", "restore", str(archive)]) == 1
    assert "is not empty" in capsys.readouterr().err
    assert _answers(empty) == before


def test_backup_and_restore_refuse_clearly(fresh_postgres, new_database, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'perfdash.db'}")
    assert main(["db", "backup", str(tmp_path / "x.dump")]) == 1
    err = capsys.readouterr().err
    assert "backup and restore are for Postgres" in err and "Traceback" not in err

    password_url = sa.make_url(new_database()).set(password="s3cret-pw").render_as_string(hide_password=False)
    monkeypatch.setenv("DATABASE_URL", password_url)
    monkeypatch.setenv("PATH", str(tmp_path))  # no pg_dump, no pg_restore
    assert main(["db", "backup", str(tmp_path / "x.dump")]) == 1
    assert "pg_dump not found on PATH: install Postgres' client tools" in capsys.readouterr().err
    monkeypatch.undo()

    monkeypatch.setenv("DATABASE_URL", fresh_postgres)
    not_an_archive = tmp_path / "notes.txt"
    not_an_archive.write_text("SELECT 1;\n")
    assert main(["db", "restore", str(not_an_archive)]) == 1
    assert "not a pg_dump custom-format archive" in capsys.readouterr().err
    assert main(["db", "restore", str(tmp_path / "missing.dump")]) == 1
    assert "no backup file" in capsys.readouterr().err
    assert not (tmp_path / "x.dump").exists() and not (tmp_path / "x.dump.partial").exists()


def test_upgrade_drill_from_the_oldest_migration_loses_nothing(fresh_postgres, monkeypatch) -> None:
    """Real runs in a database at 0001 (the first release's schema: stored through ingest at head, then migrated
    down, as tests/service/test_migrations.py makes its older databases), upgraded to head."""
    from service.migrate import current_heads, downgrade, head_revision, upgrade

    monkeypatch.setenv("DATABASE_URL", fresh_postgres)
    upgrade(fresh_postgres)
    _fill()
    before = _answers(fresh_postgres)
    counts = _counts(fresh_postgres, TABLES_AT_0001)
    assert counts["runs"] == len(REAL_RUNS) and counts["results"] > 10

    downgrade(fresh_postgres, "0001")
    assert current_heads(fresh_postgres) == {"0001"}
    assert _counts(fresh_postgres, TABLES_AT_0001) == counts

    assert main(["db", "upgrade"]) == 0
    assert current_heads(fresh_postgres) == {head_revision()}
    assert _counts(fresh_postgres, TABLES_AT_0001) == counts
    assert _answers(fresh_postgres) == before
