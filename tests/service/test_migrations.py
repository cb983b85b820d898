"""The schema exists only through Alembic: up, down and up again on Postgres and SQLite; models match 0001."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from service.migrate import current_heads, downgrade, upgrade
from service.models import Base

OWN_TABLES = {"machines", "configurations", "runs", "series", "results", "run_summaries", "annotations"}
# tables of later revisions whose model the autogenerate comparison also checks
LATER_TABLES = {"release_pairs"}


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


@pytest.fixture(params=["postgres", "sqlite"])
def empty_database(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'perfdash.db'}"
    return request.getfixturevalue("fresh_postgres")


def test_upgrade_downgrade_upgrade(empty_database: str):
    assert _tables(empty_database) == set()
    upgrade(empty_database)
    assert OWN_TABLES <= _tables(empty_database)
    downgrade(empty_database, "base")
    assert _tables(empty_database) == set()
    assert current_heads(empty_database) == set()
    upgrade(empty_database, "0001")
    assert _tables(empty_database) == OWN_TABLES
    assert current_heads(empty_database) == {"0001"}
    upgrade(empty_database)  # and on to whatever later revisions exist


def test_models_match_the_migrations(fresh_postgres: str):
    """Autogenerate finds nothing to change for our tables: the models and the migrations describe the same schema."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    upgrade(fresh_postgres)
    engine = sa.create_engine(fresh_postgres)
    try:
        with engine.connect() as connection:
            diffs = compare_metadata(MigrationContext.configure(connection, opts={"compare_type": True}),
                                     Base.metadata)
    finally:
        engine.dispose()

    def table_of(diff) -> str | None:
        item = diff[0] if isinstance(diff, list) else diff
        for part in item[1:]:
            table = getattr(part, "table", None)
            if table is not None:
                return table.name
            if isinstance(part, sa.Table):
                return part.name
            if isinstance(part, str) and part in OWN_TABLES | LATER_TABLES:
                return part
        return None

    ours = [d for d in diffs if table_of(d) in OWN_TABLES | LATER_TABLES]
    assert ours == []


def test_indexes_for_the_queries_exist(migrated_url: str):
    engine = sa.create_engine(migrated_url)
    try:
        inspector = sa.inspect(engine)
        run_indexes = {tuple(i["column_names"]) for i in inspector.get_indexes("runs")}
        result_indexes = {tuple(i["column_names"]) for i in inspector.get_indexes("results")}
        result_uniques = {tuple(u["column_names"]) for u in inspector.get_unique_constraints("results")}
    finally:
        engine.dispose()
    assert ("configuration_id", "night") in run_indexes  # previous night, suite history
    assert ("night",) in run_indexes  # a night's summary
    assert ("torch_version", "configuration_id") in run_indexes  # the Releases view's last run of a version
    assert ("series_id", "run_id") in result_indexes  # a model's history
    if migrated_url.startswith("postgresql"):  # the history's index carries what it reads (issue 31)
        engine = sa.create_engine(migrated_url)
        try:
            with engine.connect() as connection:
                definition = connection.execute(sa.text(
                    "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_results_series_history'")).scalar_one()
        finally:
            engine.dispose()
        assert "INCLUDE (accuracy, passed, speedup" in definition and "dynamo_activation_peak_mem)" in definition
    assert ("run_id", "name") in result_uniques  # one run's results


def _store_runner_py_statuses(url: str) -> None:
    """Migrate to head and store the runs of tests/contract/data/runner_py_statuses (one configuration)."""
    from pathlib import Path

    from service.db import session_scope
    from service.ingest.files import IngestDefaults, bundles_from_files
    from service.ingest.upload import ingest
    from service.settings import Settings

    folder = Path(__file__).parents[1] / "contract" / "data" / "runner_py_statuses"
    upgrade(url)
    with session_scope(Settings(database_url=url)) as session:
        ingest(session, bundles_from_files({p.name: p.read_bytes() for p in folder.iterdir()},
                                           IngestDefaults(machine="Xeon")))
        session.commit()


def test_0003_brings_stored_totals_to_runner_py_count(empty_database: str):
    """A run stored under the old count (never-ran models in the total) gets runner.py's total on upgrade."""
    from service.db import make_engine

    engine = make_engine(empty_database)
    try:
        _store_runner_py_statuses(empty_database)

        def totals() -> list[tuple[int, int]]:
            with engine.connect() as connection:
                return [tuple(r) for r in connection.execute(sa.text("SELECT passed, total FROM run_summaries"))]

        assert totals() == [(3, 5)]
        downgrade(empty_database, "0002")
        assert totals() == [(3, 7)]  # what the old rule stored: model_fail_to_load and eager_fail_to_run counted
        upgrade(empty_database)
        assert totals() == [(3, 5)]
    finally:
        engine.dispose()


def test_0007_points_bisection_requests_at_their_configuration(empty_database: str):
    """Requests stored with copied configuration columns point at the stored configuration after the upgrade, and get
    the columns back on a downgrade; a request naming no stored configuration stops the upgrade, nothing changed."""
    from perfdash.bisection import REQUEST_AXES as axes
    from service.db import make_engine

    engine = make_engine(empty_database)
    try:
        _store_runner_py_statuses(empty_database)
        downgrade(empty_database, "0006_training_throughput")
        with engine.begin() as connection:
            configuration = connection.execute(sa.text(f"SELECT id, {', '.join(axes)} FROM configurations")).one()
            values = dict(zip(axes, configuration[1:], strict=True))
            connection.execute(sa.text(
                f"INSERT INTO bisection_requests (status, purpose, model, batch_size, metric, direction, good_commit, "
                f"bad_commit, threshold_pct, {', '.join(axes)}) VALUES ('done', 'bisect', 'm', 4, 'speedup', "
                f"'higher', 'aaaa', 'bbbb', 5.0, {', '.join(':' + a for a in axes)})"), values)
        upgrade(empty_database)
        with engine.connect() as connection:
            assert connection.execute(sa.text("SELECT configuration_id FROM bisection_requests")).scalars().all() == \
                [configuration.id]
        downgrade(empty_database, "0006_training_throughput")
        with engine.connect() as connection:
            restored = connection.execute(sa.text(f"SELECT {', '.join(axes)} FROM bisection_requests")).one()
        assert dict(zip(axes, restored, strict=True)) == values
        if empty_database.startswith("postgresql"):  # transactional DDL: the failed upgrade leaves 0006 as it was
            with engine.begin() as connection:
                connection.execute(sa.text("UPDATE bisection_requests SET suite = 'huggingface'"))
            with pytest.raises(RuntimeError, match="name a configuration no stored run has"):
                upgrade(empty_database)
            assert current_heads(empty_database) == {"0006_training_throughput"}
    finally:
        engine.dispose()


def test_the_database_is_the_one_perfdash_names_and_the_environment_only_for_a_bare_alembic(tmp_path, monkeypatch):
    """`perfdash db upgrade` (service.migrate) migrates the URL it is given, whatever DATABASE_URL says; `alembic
    upgrade head` run by hand in the repository, with no URL of its own, migrates DATABASE_URL's."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    given, environment = tmp_path / "given.db", tmp_path / "environment.db"
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{environment}")
    upgrade(f"sqlite:///{given}")
    assert OWN_TABLES <= _tables(f"sqlite:///{given}")
    assert not environment.exists()

    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "alembic", "upgrade", "head"], cwd=repo, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(repo)})
    assert done.returncode == 0, done.stderr
    assert OWN_TABLES <= _tables(f"sqlite:///{environment}")
    assert current_heads(f"sqlite:///{environment}") == current_heads(f"sqlite:///{given}")


def test_0012_copies_the_stored_activation_peaks_into_their_columns(empty_database: str):
    """Results stored before 0012 keep their activation peaks only in ``samples``: the upgrade copies them into the
    columns the history reads (NULL where the samples have none), and a downgrade drops the columns again."""
    from service.db import make_engine

    engine = make_engine(empty_database)
    try:
        _store_runner_py_statuses(empty_database)
        downgrade(empty_database, "0011_issue31_storage")
        with engine.begin() as connection:
            ids = connection.execute(sa.text("SELECT id FROM results ORDER BY id")).scalars().all()
            samples = ['{"eager_ms": [1.5], "compiled_ms": [1.0], "eager_activation_peak_mem": 0.0239, '
                       '"dynamo_activation_peak_mem": 0.015}', '{"eager_ms": [1.5], "compiled_ms": [1.0]}']
            for result_id, text in zip(ids, samples, strict=False):
                connection.execute(sa.text("UPDATE results SET samples = :s WHERE id = :id"),
                                   {"s": text, "id": result_id})
        upgrade(empty_database)
        with engine.connect() as connection:
            peaks = connection.execute(sa.text("SELECT eager_activation_peak_mem, dynamo_activation_peak_mem "
                                               "FROM results ORDER BY id")).all()
        assert [tuple(p) for p in peaks] == [(0.0239, 0.015)] + [(None, None)] * (len(ids) - 1)
        downgrade(empty_database, "0011_issue31_storage")
        with engine.connect() as connection:
            columns = {c["name"] for c in sa.inspect(connection).get_columns("results")}
        assert "eager_activation_peak_mem" not in columns and "samples" in columns
    finally:
        engine.dispose()
