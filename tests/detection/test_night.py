"""Detection of many runs on two processes (service.detection.night) on a real Postgres: the same findings, change
points and confirm requests as one process detecting the runs in order, for a backfill and for an upload of a whole
night through the post-ingest hook (issue 31)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from service.detection.night import DetectionHook, batches, detect_runs, streams, workers_for

SUITES = ("timm_models", "huggingface", "torchbench")
VARIANTS = ("", "nocg", "dyn")
NIGHTS = 24
MODELS = ("resnet18", "vit_small", "mobilenet")


def _night_bundles(run_files, series_values, night: int) -> list:
    """One night of a small matrix: 3 suites x 3 variants, and the (timm_models, "") configuration in 2 partitions
    (10 runs). Every configuration's models have their own noise; the steps: in each "nocg" configuration every
    model 20 % slower from night 18 (the suite geomean moves with them), resnet18 of each "" configuration 15 %
    slower from night 20, mobilenet of torchbench "dyn" failing from night 21 (a new failure, a passrate drop),
    vit_small of huggingface "" failing on the last night."""
    from service.ingest.files import bundles_from_files

    bundles = []
    for s, suite in enumerate(SUITES):
        for v, variant in enumerate(VARIANTS):
            parts = 2 if (suite, variant) == ("timm_models", "") else 1
            for part in range(parts):
                speedups: dict[str, float | None] = {}
                for m, model in enumerate(MODELS):
                    value = series_values(100 * s + 10 * v + m + 1000 * part, NIGHTS, level=1.2 + 0.3 * m)[night]
                    value *= 0.8 if variant == "nocg" and night >= 18 else 1.0
                    value *= 0.85 if variant == "" and model == "resnet18" and night >= 20 else 1.0
                    fails_from = {("torchbench", "dyn", "mobilenet"): 21, ("huggingface", "", "vit_small"): NIGHTS - 1}
                    failing = night >= fails_from.get((suite, variant, model), NIGHTS)
                    speedups[f"{model}_p{part}" if parts > 1 else model] = None if failing else value
                commit = f"c{night:04d}{s}{v}{part}" + "0" * 32
                bundles += bundles_from_files(run_files(night, speedups, suite=suite, variant=variant, commit=commit,
                                                        total_partitions=parts, partition_id=part))
    return bundles


@pytest.fixture
def matrix(fresh_postgres: str, run_files, series_values):
    """The matrix's nights but the last stored (committed, no hooks): (their run ids oldest first, a function storing
    the last night with the given hooks, an engine on the database)."""
    from service.db import make_engine, make_session_factory
    from service.ingest.upload import ingest
    from service.migrate import upgrade

    upgrade(fresh_postgres)
    engine = make_engine(fresh_postgres)
    run_ids: list[int] = []
    with make_session_factory(engine)() as session:
        for night in range(NIGHTS - 1):
            run_ids += [r.run_id for r in ingest(session, _night_bundles(run_files, series_values, night)).runs]

    def last_night(hooks) -> list[int]:
        with make_session_factory(engine)() as session:
            report = ingest(session, _night_bundles(run_files, series_values, NIGHTS - 1), hooks)
            assert not report.hook_errors, report.hook_errors
            return [r.run_id for r in report.runs]

    yield run_ids, last_night, engine
    engine.dispose()


def _stored(engine) -> list[tuple]:
    """Everything detection wrote, without its ids (which depend on the order the workers wrote in)."""
    with engine.connect() as connection:
        findings = connection.execute(sa.text(
            "SELECT f.run_id, f.kind, f.category, f.series_id, f.model, f.metric, f.old_value, f.new_value,"
            " f.change_pct, f.p_value, f.old_status, f.new_status, f.good_commit, f.bad_commit, f.summary,"
            " f.confirmation, f.configuration_id, c.run_id, c.previous_run_id, c.before_mean, c.after_mean,"
            " c.n_before, c.n_after, b.purpose, b.status, b.good_commit, b.bad_commit, b.threshold_pct"
            " FROM findings f LEFT JOIN change_points c ON c.id = f.change_point_id"
            " LEFT JOIN bisection_requests b ON b.finding_id = f.id")).all()
        points = connection.execute(sa.text(
            "SELECT configuration_id, series_id, metric, run_id, previous_run_id, change_pct, p_value, regression"
            " FROM change_points")).all()
    return sorted(map(tuple, findings), key=repr) + sorted(map(tuple, points), key=repr)


def _forget(engine) -> None:
    with engine.begin() as connection:
        for table in ("bisection_requests", "findings", "change_points"):
            connection.execute(sa.text(f"DELETE FROM {table}"))


def test_a_backfill_on_two_processes_stores_what_one_stores(matrix) -> None:
    from service.db import make_session_factory

    run_ids, _, engine = matrix
    with make_session_factory(engine)() as session:
        assert workers_for(session.get_bind(), len(run_ids), 2) == 2, "the parallel path is the one tested"
        serial = detect_runs(session, run_ids, incremental=True, workers=1)
        one = _stored(engine)
        _forget(engine)
        parallel = detect_runs(session, run_ids, incremental=True, workers=2)
        two = _stored(engine)
        again = detect_runs(session, run_ids, incremental=True, workers=2)
    assert [o.run_id for o in parallel] == run_ids and not [o for o in serial + parallel if o.error]
    assert two == one
    kinds = {(row[1], row[2]) for row in one if len(row) > 8}
    assert {("performance", "regression"), ("summary", "regression"), ("status", "new_failure")} <= kinds, kinds
    assert sum(len(o.new_findings) for o in parallel) == sum(len(o.new_findings) for o in serial) > 10
    assert not any(o.new_findings for o in again), "detection stays idempotent across processes"


def test_an_upload_of_a_night_is_detected_on_two_processes_as_on_one(matrix) -> None:
    from service.db import make_session_factory

    run_ids, last_night, engine = matrix
    with make_session_factory(engine)() as session:
        detect_runs(session, run_ids, incremental=True, workers=1)  # what the hook did night after night
    tonight = last_night([DetectionHook(workers=2)])
    assert len(tonight) == 10 and workers_for(engine, len(tonight), 2) == 2
    hooked = _stored(engine)
    with engine.connect() as connection:
        assert connection.scalar(sa.text("SELECT count(*) FROM runs WHERE hooks_pending")) == 0
    _forget(engine)
    with make_session_factory(engine)() as session:
        detect_runs(session, [*run_ids, *tonight], incremental=True, workers=1)
    assert _stored(engine) == hooked
    assert any(row[0] in tonight for row in hooked if len(row) > 8), "tonight's runs found something"


def test_a_configurations_runs_stay_together_in_order(matrix) -> None:
    from service.db import make_session_factory

    run_ids, _, engine = matrix
    with make_session_factory(engine)() as session:
        parts = streams(session, run_ids)
        configuration = dict(session.execute(sa.text("SELECT id, configuration_id FROM runs")).all())
    assert len(parts) == 9 and sorted(r for p in parts for r in p) == sorted(run_ids)
    for part in parts:
        assert len({configuration[r] for r in part}) == 1 and part == sorted(part, key=run_ids.index)
    assert {len(p) for p in parts} == {NIGHTS - 1, 2 * (NIGHTS - 1)}  # the partitioned configuration: two streams
    dealt = batches(parts, 4)
    assert len(dealt) == 4 and all(any(b[i:i + len(p)] == p for i in range(len(b))) for p in parts for b in dealt
                                   if p[0] in b), "a part is never split"


def test_sqlite_and_small_uploads_stay_serial(engine) -> None:
    assert workers_for(sa.create_engine("sqlite://"), 1000, 8) == 1
    assert workers_for(engine, 3, 8) == 1
    with engine.connect() as connection:  # a session on its own connection: its commits may be savepoints
        assert workers_for(connection, 1000, 8) == 1
    assert workers_for(engine, 1000, 3) == 3


def test_an_upload_hook_that_takes_all_runs_keeps_each_runs_outcome(session, store_run) -> None:
    """service.ingest.run_hooks hands an upload's runs to a hook's for_runs: a run the database could not take stays
    pending (retried by the next ingest or `perfdash detect`), another failure is reported and not retried."""
    from service.detection.night import RunOutcome
    from service.ingest.hooks import run_hooks
    from service.models import Run

    runs = [store_run(night, {"resnet18": 1.5}) for night in range(3)]

    class Batch:
        __name__ = "batch"

        def __call__(self, session, run_id: int) -> None:
            raise AssertionError("an upload of several runs goes to for_runs")

        def for_runs(self, session, run_ids) -> list[RunOutcome]:
            assert list(run_ids) == runs
            return [RunOutcome(runs[0]), RunOutcome(runs[1], error="database error (OperationalError)",
                                                    unavailable=True), RunOutcome(runs[2], error="boom")]

    errors = run_hooks(session, runs, [Batch()])
    assert errors == [f"batch on run {runs[1]}: database unavailable; retried on the next ingest",
                      f"batch on run {runs[2]}: boom"]
    pending = dict(session.execute(sa.select(Run.id, Run.hooks_pending).where(Run.id.in_(runs))).all())
    assert pending == {runs[0]: False, runs[1]: True, runs[2]: False}
