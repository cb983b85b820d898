"""The service's configuration: one pydantic-settings class, read from the environment once at startup.

Secrets can come from files instead of the environment (``DATABASE_URL_FILE``, ``GITHUB_TOKEN_FILE``,
``PERFDASH_INGEST_TOKENS_FILE``, ``PERFDASH_TOKENS_FILE``): a path in the environment tells nothing to a process
that can read it, and a mounted secret file (Docker/compose secrets, a Jenkins file credential) never reaches argv.
"""

from __future__ import annotations

import enum
import json
import os
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from perfdash.logs import FORMAT_ENV, LEVEL_ENV, LogFormat, LogOptions

# The environment variables whose value may instead be read from the file named by ``<NAME>_FILE``.
FILE_BACKED = ("DATABASE_URL", "GITHUB_TOKEN", "PERFDASH_INGEST_TOKENS", "PERFDASH_TOKENS")


class Scope(enum.StrEnum):
    """What a token may write. Reads need no token, except the audit log's (scope admin)."""

    INGEST = "ingest"  # POST /api/v1/runs (the agents, their spool)
    BISECT = "bisect"  # request bisections and post their results (the bisect job)
    ADMIN = "admin"  # delete runs, annotate, acknowledge findings, read the audit log (people)


class TokenSpec(BaseModel):
    """One bearer token: a name for the audit log, its scopes, the secret."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.@-]+$")
    scopes: frozenset[Scope] = Field(min_length=1)
    token: SecretStr


class SettingsError(ValueError):
    """The environment names a secret twice or a secret file that cannot be read."""


def _env(name: str) -> AliasChoices:
    # Accept the environment name (DATABASE_URL) and the field name (database_url=...) for tests and callers.
    return AliasChoices(name, name.lower())


class SecretFilesSource(PydanticBaseSettingsSource):
    """``NAME_FILE=/path`` stands for ``NAME=<the file's content, stripped>`` for the names of FILE_BACKED."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover
        return None, field_name, False  # __call__ does the work

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name in FILE_BACKED:
            path = os.environ.get(f"{name}_FILE")
            if not path:
                continue
            if os.environ.get(name):
                raise SettingsError(f"both {name} and {name}_FILE are set: set one")
            try:
                values[name] = Path(path).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise SettingsError(f"{name}_FILE: cannot read {path}: {exc.strerror or exc}") from None
        return values


class Settings(BaseSettings):
    """Everything the service reads from the environment. Built in perfdash.cli.main (read_settings), in
    service.app.app_from_environment (uvicorn's workers) and for a bare ``alembic`` run (migrations/env.py); never at
    import."""

    # env_ignore_empty: NAME= (a placeholder left empty in an env file or a Jenkinsfile) means "not set"
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, frozen=True, env_ignore_empty=True)

    database_url: str = Field("sqlite:///perfdash.db", validation_alias=_env("DATABASE_URL"))
    # Comma-separated bearer tokens of scope ``ingest`` only (what every agent holds); the scoped tokens are in
    # ``tokens``. Kept so that deployments from before scopes still ingest.
    ingest_tokens: SecretStr = Field(SecretStr(""), validation_alias=_env("PERFDASH_INGEST_TOKENS"))
    # Named tokens with scopes, as JSON: [{"name": "bisect-job", "scopes": ["bisect"], "token": "..."}, ...]
    tokens: tuple[TokenSpec, ...] = Field((), validation_alias=_env("PERFDASH_TOKENS"))
    github_token: SecretStr | None = Field(None, validation_alias=_env("GITHUB_TOKEN"))
    # No default: posting refuses until a deployment names its own repository and report issue.
    github_repository: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$",
                                          validation_alias=_env("GITHUB_REPOSITORY"))
    report_issue: int | None = Field(None, validation_alias=_env("PERFDASH_REPORT_ISSUE"))
    github_api_url: str = Field("https://api.github.com", validation_alias=_env("GITHUB_API_URL"))
    # The login GITHUB_TOKEN posts as: only its issues and comments are adopted or edited (service/github/client.py).
    # Unset: asked of GitHub (GET /user); a GitHub App's token cannot ask and names it here (name[bot]).
    github_bot_login: str | None = Field(None, max_length=100, pattern=r"^[A-Za-z0-9-]+(\[bot\])?$",
                                         validation_alias=_env("GITHUB_BOT_LOGIN"))
    dashboard_url: str | None = Field(None, validation_alias=_env("PERFDASH_DASHBOARD_URL"))
    # A night of one configuration is ~150 rows (~20 kB of CSV, ~1 MB with raw samples); 32 MiB leaves room for
    # a whole nightly directory in one upload while refusing anything absurd before it is parsed.
    max_upload_bytes: int = Field(32 * 1024 * 1024, gt=0, validation_alias=_env("PERFDASH_MAX_UPLOAD_BYTES"))
    # Where `perfdash ingest --url` keeps uploads the service could not take, to retry on the next invocation.
    spool_dir: Path = Field(Path.home() / ".cache" / "perfdash" / "spool", validation_alias=_env("PERFDASH_SPOOL_DIR"))
    sql_echo: bool = Field(False, validation_alias=_env("PERFDASH_SQL_ECHO"))
    # Retention of raw samples (service/retention.py, `perfdash db compact-samples`): a result's raw timings (~100
    # floats, most of its row) are dropped once its run is older than this many days AND not among the latest this
    # many runs of its configuration; every statistic the pages and detection read (medians, speedup and its
    # confidence interval, activation peaks) stays. Neither set: raw samples are kept forever.
    samples_keep_days: int | None = Field(None, ge=0, validation_alias=_env("PERFDASH_SAMPLES_KEEP_DAYS"))
    samples_keep_runs: int | None = Field(None, ge=0, validation_alias=_env("PERFDASH_SAMPLES_KEEP_RUNS"))
    # Processes that detect the runs of an upload (or `perfdash detect`) side by side, one configuration each at a
    # time (service.detection.night); unset: every core. SQLite is always detected serially.
    detection_workers: int | None = Field(None, ge=1, validation_alias=_env("PERFDASH_DETECTION_WORKERS"))
    # `perfdash serve` over TLS: the certificate chain and its key (PEM), both or neither.
    tls_cert_file: Path | None = Field(None, validation_alias=_env("PERFDASH_TLS_CERT_FILE"))
    tls_key_file: Path | None = Field(None, validation_alias=_env("PERFDASH_TLS_KEY_FILE"))
    # The service's log lines (perfdash.logs): JSON lines for a log collector, or text for a person; and the level.
    log_format: LogFormat = Field("json", validation_alias=_env(FORMAT_ENV))
    log_level: str = Field("INFO", validation_alias=_env(LEVEL_ENV))

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        return LogOptions(level=value).level.upper()

    @field_validator("tokens", mode="before")
    @classmethod
    def _json(cls, value: Any) -> Any:
        # the environment source decodes JSON itself; a secret file's text and a caller's string come here
        if isinstance(value, str):
            try:
                return json.loads(value) if value.strip() else ()
            except ValueError:
                raise ValueError("PERFDASH_TOKENS is not JSON: [{\"name\": ..., \"scopes\": [...], "
                                 "\"token\": ...}]") from None
        return value

    @field_validator("tokens")
    @classmethod
    def _distinct(cls, tokens: tuple[TokenSpec, ...]) -> tuple[TokenSpec, ...]:
        names = [t.name for t in tokens]
        if len(set(names)) != len(names):
            raise ValueError("PERFDASH_TOKENS: two tokens have the same name")
        secrets = [t.token.get_secret_value() for t in tokens]
        if len(set(secrets)) != len(secrets):
            raise ValueError("PERFDASH_TOKENS: two tokens have the same secret (the audit log could not tell them "
                             "apart)")
        if any(len(s.strip()) < 16 for s in secrets):
            raise ValueError("PERFDASH_TOKENS: every token needs at least 16 characters")
        return tokens

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, SecretFilesSource(settings_cls), env_settings, dotenv_settings, file_secret_settings

    @property
    def log_options(self) -> LogOptions:
        return LogOptions(format=self.log_format, level=self.log_level)

    @property
    def ingest_token_list(self) -> tuple[str, ...]:
        return tuple(t.strip() for t in self.ingest_tokens.get_secret_value().split(",") if t.strip())

    @property
    def token_specs(self) -> tuple[TokenSpec, ...]:
        """Every accepted token: the named ones, then each of PERFDASH_INGEST_TOKENS as ``ingest-N`` (scope
        ingest)."""
        legacy = tuple(TokenSpec(name=f"ingest-{i}", scopes=frozenset({Scope.INGEST}), token=SecretStr(t))
                       for i, t in enumerate(self.ingest_token_list, start=1))
        return self.tokens + legacy
