"""Hostile and malformed input on a real Postgres (issue 13, item 3 and 4): every case of tests/service/hostile.py
is refused with a 4xx naming file, line and column over HTTP, and with a one-line error through `perfdash ingest`,
no traceback, no SQL, nothing stored; query filters and dates never give a 5xx; unknown vocabulary is refused while
PyTorch CI's variants stay accepted."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from perfdash.cli import main
from service.models import Annotation, Configuration, Machine, Result, Run, RunSummary, Series

TABLES = (Machine, Configuration, Run, Series, Result, RunSummary, Annotation)


def _load_corpus():
    import sys

    name = "perfdash_hostile_corpus"
    if name not in sys.modules:  # dataclasses look their module up in sys.modules
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("hostile.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


hostile = _load_corpus()
FILE_CASES = hostile.file_cases()
JSON_CASES = hostile.json_cases()


def _counts(session) -> dict[str, int]:
    return {m.__tablename__: session.scalar(sa.select(sa.func.count()).select_from(m)) for m in TABLES}


def _no_internals(text: str) -> None:
    assert "Traceback" not in text and "SELECT" not in text and "INSERT" not in text, text[:500]


@pytest.mark.parametrize("case", FILE_CASES, ids=[c.name for c in FILE_CASES])
def test_malformed_upload_is_refused_naming_where(case, upload, session):
    before = _counts(session)
    response = upload(case.files, **case.form)
    assert response.status_code == case.status, response.text
    _no_internals(response.text)
    detail = response.json()["detail"]
    file, line, column = case.where
    assert (detail["file"] or "").startswith(file), detail
    assert (detail["line"], detail["column"]) == (line, column), detail
    assert "\x00" not in detail["message"]
    assert _counts(session) == before


@pytest.mark.parametrize("case", JSON_CASES, ids=[c.name for c in JSON_CASES])
def test_malformed_json_upload_is_refused(case, client, auth, session):
    before = _counts(session)
    response = client.post("/api/v1/runs", content=json.dumps(case.body), headers={
        **auth, "content-type": "application/json"})
    assert response.status_code == case.status, response.text
    _no_internals(response.text)
    assert _counts(session) == before


@pytest.mark.parametrize(("method", "url", "accepted"), hostile.query_cases())
def test_query_filters_and_dates_are_never_a_server_error(method, url, accepted, client, upload):
    assert upload(hostile.good_files(), **hostile.FORM).status_code == 201
    response = client.request(method, url)
    assert response.status_code in accepted, (url, response.status_code, response.text[:300])
    _no_internals(response.text)


@pytest.mark.parametrize("body", ['{"text": "expected\\u0000", "night": "2026-01-02"}',
                                  '{"text": "a lone \\ud800 surrogate", "night": "2026-01-02"}',
                                  '{"text": "ok", "author": "x\\u0000", "night": "2026-01-02"}'])
def test_unstorable_text_in_an_annotation_is_refused_and_nothing_stored(body, client, auth, session):
    response = client.post("/api/v1/annotations", content=body, headers={**auth, "content-type": "application/json"})
    assert response.status_code == 422, response.text
    _no_internals(response.text)
    assert _counts(session)["annotations"] == 0


def test_pytorch_ci_variants_stay_accepted(upload):
    for variant in ("no_cudagraphs", "dynamic", "cpp_wrapper", "max_autotune"):
        response = upload(hostile.good_files(f"inductor_{variant}_torchbench_float32_inference_cpu"), **hostile.FORM)
        assert response.status_code == 201, (variant, response.text)


def test_vocabulary_of_json_uploads(client, auth):
    ok = {"manifest": hostile.manifest(**{"config.variant": "no_cudagraphs", "config.dtype": "bfloat16"}),
          "results": [{"name": "resnet18", "batch_size": 8, "accuracy": "pass", "speedup": 1.3}]}
    response = client.post("/api/v1/runs", json=ok, headers=auth)
    assert response.status_code == 201, response.text
    bad = {**ok, "manifest": hostile.manifest(**{"config.dtype": "float64"})}
    response = client.post("/api/v1/runs", json=bad, headers=auth)
    assert response.status_code == 422 and "float64" in response.text


@pytest.fixture
def cli_database(fresh_postgres: str, monkeypatch) -> str:
    from service.migrate import upgrade

    upgrade(fresh_postgres)
    monkeypatch.setenv("DATABASE_URL", fresh_postgres)
    return fresh_postgres


def _stored_runs(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.scalar(sa.text("SELECT count(*) FROM runs")) + \
                connection.scalar(sa.text("SELECT count(*) FROM machines"))
    finally:
        engine.dispose()


def test_malformed_files_through_the_cli_are_one_line_errors(cli_database, tmp_path, capsys):
    problems = []
    for index, case in enumerate(FILE_CASES):
        folder = tmp_path / f"case{index}"
        folder.mkdir()
        for name, data in case.files.items():
            (folder / name).write_bytes(data)
        code = main(["ingest", str(folder), *case.flags])
        err = capsys.readouterr().err
        file, line, column = case.where
        lines = err.strip().splitlines()
        expected = [file, *([f"line {line}"] if line else []), *([f"column {column!r}"] if column else [])]
        if code != 1 or len(lines) != 1 or not lines[0].startswith("error:") or "Traceback" in err \
                or any(part not in lines[0] for part in expected):
            problems.append(f"{case.name}: exit {code}, stderr {err[:300]!r}, expected {expected}")
    assert not problems, "\n".join(problems)
    assert _stored_runs(cli_database) == 0


def test_direct_ingest_names_the_file_path(cli_database, tmp_path, capsys):
    case = FILE_CASES[0]
    for name, data in case.files.items():
        (tmp_path / name).write_bytes(data)
    assert main(["ingest", str(tmp_path), *case.flags]) == 1
    assert str(tmp_path / hostile.PERFORMANCE) in capsys.readouterr().err
