"""The service's configuration: one pydantic-settings class, read from the environment once at startup."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def _env(name: str) -> AliasChoices:
    # Accept the environment name (DATABASE_URL) and the field name (database_url=...) for tests and callers.
    return AliasChoices(name, name.lower())


class Settings(BaseSettings):
    """Everything the service reads from the environment. Built in perfdash.cli.main (read_settings), in
    service.app.app_from_environment (uvicorn's workers) and for a bare ``alembic`` run (migrations/env.py); never at
    import."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    database_url: str = Field("sqlite:///perfdash.db", validation_alias=_env("DATABASE_URL"))
    # Comma-separated bearer tokens accepted by POST /api/v1/runs; empty means API ingest is refused.
    ingest_tokens: SecretStr = Field(SecretStr(""), validation_alias=_env("PERFDASH_INGEST_TOKENS"))
    github_token: SecretStr | None = Field(None, validation_alias=_env("GITHUB_TOKEN"))
    github_repository: str | None = Field(None, validation_alias=_env("GITHUB_REPOSITORY"))
    report_issue: int | None = Field(None, validation_alias=_env("PERFDASH_REPORT_ISSUE"))
    github_api_url: str = Field("https://api.github.com", validation_alias=_env("GITHUB_API_URL"))
    dashboard_url: str | None = Field(None, validation_alias=_env("PERFDASH_DASHBOARD_URL"))
    # A night of one configuration is ~150 rows (~20 kB of CSV, ~1 MB with raw samples); 32 MiB leaves room for
    # a whole nightly directory in one upload while refusing anything absurd before it is parsed.
    max_upload_bytes: int = Field(32 * 1024 * 1024, gt=0, validation_alias=_env("PERFDASH_MAX_UPLOAD_BYTES"))
    # Where `perfdash ingest --url` keeps uploads the service could not take, to retry on the next invocation.
    spool_dir: Path = Field(Path.home() / ".cache" / "perfdash" / "spool", validation_alias=_env("PERFDASH_SPOOL_DIR"))
    sql_echo: bool = Field(False, validation_alias=_env("PERFDASH_SQL_ECHO"))

    @property
    def ingest_token_list(self) -> tuple[str, ...]:
        return tuple(t.strip() for t in self.ingest_tokens.get_secret_value().split(",") if t.strip())
