"""Alembic, configured in code so `perfdash db upgrade` works from any directory (alembic.ini is for the CLI)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # '%' is ConfigParser interpolation syntax; URLs may contain it (escaped passwords).
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Migrate to ``revision``. Replicas that start together (each `perfdash serve` upgrades first) migrate one at a
    time: the others wait for the first and then find nothing to do (service.locks)."""
    import sqlalchemy as sa

    from service.locks import LockSpace, holding

    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    try:
        with holding(engine, LockSpace.MIGRATION, [0]):
            command.upgrade(alembic_config(database_url), revision)
    finally:
        engine.dispose()


def downgrade(database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(database_url), revision)


def head_revision() -> str:
    """The revision this code's models match (the newest migration)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert head is not None, "no migrations"
    return head


def current_heads(database_url: str) -> set[str]:
    """Revisions the database is at (empty before the first upgrade)."""
    import sqlalchemy as sa
    from alembic.runtime.migration import MigrationContext

    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as connection:
            return set(MigrationContext.configure(connection).get_current_heads())
    finally:
        engine.dispose()
