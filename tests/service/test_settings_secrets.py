"""Secrets from files (issue 29): DATABASE_URL_FILE, GITHUB_TOKEN_FILE, PERFDASH_INGEST_TOKENS_FILE and
PERFDASH_TOKENS_FILE stand for their variables, so a deployment binds paths, never values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.settings import FILE_BACKED, Scope, Settings, SettingsError

SECRET = "postgresql+psycopg2://perfdash:pw-never-shown@db:5432/perfdash"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in FILE_BACKED:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(f"{name}_FILE", raising=False)
    for name in ("GITHUB_REPOSITORY", "PERFDASH_REPORT_ISSUE"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _secret(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


def test_every_secret_reads_from_its_file(clean_env, tmp_path: Path) -> None:
    clean_env.setenv("DATABASE_URL_FILE", str(_secret(tmp_path, "db", SECRET)))
    clean_env.setenv("GITHUB_TOKEN_FILE", str(_secret(tmp_path, "gh", "ghp_fromafile")))
    clean_env.setenv("PERFDASH_INGEST_TOKENS_FILE", str(_secret(tmp_path, "ingest", "agent-a,agent-b")))
    tokens = [{"name": "bisect-job", "scopes": ["bisect"], "token": "bisect-token-from-a-file"}]
    clean_env.setenv("PERFDASH_TOKENS_FILE", str(_secret(tmp_path, "tokens", json.dumps(tokens))))
    settings = Settings()
    assert settings.database_url == SECRET
    assert settings.github_token is not None and settings.github_token.get_secret_value() == "ghp_fromafile"
    assert [(t.name, set(t.scopes)) for t in settings.token_specs] == [
        ("bisect-job", {Scope.BISECT}), ("ingest-1", {Scope.INGEST}), ("ingest-2", {Scope.INGEST})]


def test_a_secret_set_twice_or_unreadable_is_refused(clean_env, tmp_path: Path) -> None:
    clean_env.setenv("DATABASE_URL_FILE", str(_secret(tmp_path, "db", SECRET)))
    clean_env.setenv("DATABASE_URL", "sqlite:///other.db")
    with pytest.raises(SettingsError, match="both DATABASE_URL and DATABASE_URL_FILE"):
        Settings()
    clean_env.delenv("DATABASE_URL")
    clean_env.setenv("DATABASE_URL_FILE", str(tmp_path / "missing"))
    with pytest.raises(SettingsError, match="cannot read"):
        Settings()


def test_the_cli_says_what_is_wrong_in_one_line_without_the_values(clean_env, tmp_path: Path, capsys) -> None:
    from perfdash.cli import main

    tokens = [{"name": "x", "scopes": ["admin"], "token": "too-short"}]
    clean_env.setenv("PERFDASH_TOKENS_FILE", str(_secret(tmp_path, "tokens", json.dumps(tokens))))
    clean_env.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'p.db'}")
    assert main(["db", "current"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "at least 16 characters" in err and "too-short" not in err
    assert "Traceback" not in err


def test_an_empty_placeholder_is_not_set(clean_env) -> None:
    clean_env.setenv("GITHUB_REPOSITORY", "")
    clean_env.setenv("PERFDASH_REPORT_ISSUE", "")
    settings = Settings()
    assert settings.github_repository is None and settings.report_issue is None
    clean_env.setenv("GITHUB_REPOSITORY", "pytorch pytorch")
    with pytest.raises(ValueError, match=r"GITHUB_REPOSITORY|github_repository"):
        Settings()


@pytest.mark.parametrize("command", [["detect"], ["report", "--run", "1"], ["serve", "--port", "1"], ["db", "upgrade"]])
def test_a_database_that_is_down_is_one_line_not_a_traceback(clean_env, command, capsys) -> None:
    import socket

    from perfdash.cli import main

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    clean_env.setenv("DATABASE_URL", f"postgresql+psycopg2://perfdash:pw-never-shown@127.0.0.1:{port}/perfdash")
    assert main(command) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"perfdash {command[0]}: the database postgresql+psycopg2://perfdash:***@127.0.0.1:{port}/perfdash " \
           "cannot be reached" in err
    assert "pw-never-shown" not in err
