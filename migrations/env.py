"""Alembic environment: the schema of service.models, on SQLite (embedded default) or Postgres (production).

The database is the one in the Alembic config: perfdash's own migrate code (service.migrate.alembic_config, used by
``perfdash db upgrade``, ``perfdash serve`` and the tests) sets it from the settings ``perfdash.cli.main`` read, or
a caller lends its connection. Only a bare ``alembic`` command run by hand (``alembic upgrade head``,
``alembic revision --autogenerate``) has neither: :func:`_database_url_of_a_bare_alembic_run` reads the environment
then, the one place this module does.
"""

from __future__ import annotations

import logging.config

import sqlalchemy as sa
from alembic import context

from service.models import Base

config = context.config
if config.config_file_name is not None:
    logging.config.fileConfig(config.config_file_name, disable_existing_loggers=False)


def _database_url_of_a_bare_alembic_run() -> str:
    """``alembic`` run by hand with alembic.ini, which names no database: DATABASE_URL, as the service reads it."""
    from service.settings import Settings

    return Settings().database_url


def _database_url() -> str:
    return config.get_main_option("sqlalchemy.url") or _database_url_of_a_bare_alembic_run()


def _configure(dialect: str, **kwargs: object) -> None:
    context.configure(
        target_metadata=Base.metadata,
        # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
        render_as_batch=dialect == "sqlite",
        compare_type=True,
        **kwargs,
    )


def run_migrations_offline() -> None:
    url = _database_url()
    _configure(sa.engine.make_url(url).get_backend_name(), url=url, literal_binds=True,
               dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:  # a caller (a test) lends its own connection
        _configure(connection.dialect.name, connection=connection)
        context.run_migrations()
        return
    engine = sa.create_engine(_database_url(), poolclass=sa.pool.NullPool)
    with engine.connect() as connection:
        _configure(connection.dialect.name, connection=connection)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
