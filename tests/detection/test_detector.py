"""Detection over stored history on a real Postgres: status changes, change points, suite checks, idempotency."""

from __future__ import annotations

import sqlalchemy as sa

from service.detection.detector import acknowledge, detect_run
from service.models import Annotation, ChangePointRow, Finding
from service.queries.detection import runs_to_detect


def _findings(session, **where) -> list[Finding]:
    query = sa.select(Finding).order_by(Finding.id)
    for key, value in where.items():
        query = query.where(getattr(Finding, key) == value)
    return list(session.scalars(query).unique())


def _history(store_run, series_values, nights: int, drop_from: int | None = None, drop: float = 0.85,
             spike_at: int | None = None) -> list[int]:
    a = series_values(1, nights)
    b = series_values(2, nights, level=2.0)
    c = series_values(3, nights, level=1.2)
    runs = []
    for night in range(nights):
        speed_a = a[night] * (drop if drop_from is not None and night >= drop_from else 1.0)
        speed_c = c[night] * (0.6 if night == spike_at else 1.0)
        runs.append(store_run(night, {"resnet18": speed_a, "vit_small": b[night], "mobilenet": speed_c}))
    return runs


def test_a_step_is_found_once_two_nights_after(session, store_run, series_values) -> None:
    runs = _history(store_run, series_values, 26, drop_from=24, spike_at=15)
    new_per_night = [detect_run(session, run).count for run in runs]
    assert new_per_night[:24] == [0] * 24, "no finding before the step, the spike on night 15 included"
    assert new_per_night[24] == 0, "one night after the step is not a change yet"
    found = _findings(session, kind="performance")
    assert {(f.model, f.metric, f.category) for f in found} == {
        ("resnet18", "speedup", "regression"), ("resnet18", "abs_latency", "regression")}
    speedup = next(f for f in found if f.metric == "speedup")
    assert speedup.run_id == runs[25]  # confirmed by the second night
    assert speedup.change_point.run_id == runs[24]  # the new level starts on the night of the step
    assert speedup.good_commit.startswith("c0023") and speedup.bad_commit.startswith("c0024")
    assert -22 < speedup.change_pct < -9 and speedup.p_value < 1e-3  # a 15 % drop seen on two nights
    # Detection again (and again the next night with the level unchanged) adds nothing: the change point is stored.
    assert detect_run(session, runs[25]).count == 0
    more = store_run(26, {"resnet18": 1.5 * 0.85, "vit_small": 2.0, "mobilenet": 1.2})
    assert detect_run(session, more).count == 0
    assert session.scalar(sa.select(sa.func.count()).select_from(ChangePointRow)
                          .where(ChangePointRow.metric == "speedup")) == 1


def test_compile_time_needs_ten_percent(session, store_run, series_values) -> None:
    base = series_values(4, 24, level=20.0)
    runs = []
    for night in range(24):
        compile_s = base[night] * (1.05 if night >= 12 else 1.0) * (1.3 if night >= 18 else 1.0)
        runs.append(store_run(night, {"resnet18": 1.5}, compile_s={"resnet18": compile_s}))
    for run in runs:
        detect_run(session, run)
    found = _findings(session, metric="compilation_latency")
    assert len(found) == 1 and found[0].change_point.run_id == runs[18]  # the 30 % rise, not the 5 % one
    assert found[0].category == "regression"


def test_status_changes_alert_at_once(session, store_run) -> None:
    first = store_run(0, {"resnet18": 1.5, "vit_small": 2.0})
    second = store_run(1, {"resnet18": 1.5, "vit_small": 2.0}, statuses={"vit_small": "fail_accuracy"})
    third = store_run(2, {"resnet18": None, "vit_small": 2.0})
    assert detect_run(session, first).count == 0
    detect_run(session, second)
    (failure,) = _findings(session, run_id=second, kind="status")
    assert (failure.model, failure.category, failure.old_status, failure.new_status) == (
        "vit_small", "new_failure", "pass", "fail_accuracy")
    detect_run(session, third)
    found = {(f.model, f.category, f.new_status) for f in _findings(session, run_id=third, kind="status")}
    assert found == {("vit_small", "fixed", "pass"), ("resnet18", "new_failure", "fail_to_run")}
    passrate = _findings(session, run_id=second, metric="passrate")
    assert len(passrate) == 1 and passrate[0].category == "regression" and passrate[0].change_pct == -50.0


def test_different_configurations_are_different_series(session, store_run) -> None:
    for night in range(12):
        store_run(night, {"resnet18": 1.5})
        # the same model on another backend, which happens to be much slower: no comparison across configurations
        run = store_run(night, {"resnet18": 0.9}, backend="aot_eager")
    assert detect_run(session, run).count == 0
    assert _findings(session) == []


def test_acknowledge_adds_a_note(session, store_run) -> None:
    store_run(0, {"resnet18": 1.5})
    run = store_run(1, {"resnet18": None})
    detect_run(session, run)
    (finding,) = _findings(session, kind="status")
    acknowledge(session, finding.id, "known: upstream timm bug", author="alice")
    assert finding.acknowledged and finding.ack_note == "known: upstream timm bug"
    note = session.scalars(sa.select(Annotation).where(Annotation.series_id == finding.series_id)).one()
    assert "known: upstream timm bug" in note.text and note.author == "alice"


def test_runs_to_detect(session, store_run) -> None:
    a0 = store_run(0, {"resnet18": 1.5})
    a1 = store_run(1, {"resnet18": 1.5})
    b0 = store_run(0, {"resnet18": 1.5}, backend="aot_eager")
    assert runs_to_detect(session) == sorted([a1, b0])
    assert runs_to_detect(session, all_runs=True)[:1] in ([a0], [b0])
    assert set(runs_to_detect(session, all_runs=True)) == {a0, a1, b0}



def test_imported_history_is_searched_whole_unless_incremental(session, store_run, series_values) -> None:
    # 80 nights imported without detection, a 15 % drop on night 10: only the full walk finds it.
    a = series_values(7, 80)
    runs = [store_run(night, {"resnet18": a[night] * (0.85 if night >= 10 else 1.0)}) for night in range(80)]
    assert detect_run(session, runs[-1], incremental=True).count == 0
    detect_run(session, runs[-1])
    (found,) = _findings(session, metric="speedup")
    assert found.change_point.run_id == runs[10] and found.category == "regression"


def test_the_registry_direction_decides_the_verdict(session, store_run, series_values, monkeypatch) -> None:
    """The detector takes "which way is better" from perfdash.metric_registry alone: flip the speedup's direction
    there and the same drop becomes an improvement, while latency (unflipped) stays a regression."""
    import dataclasses

    from perfdash import metric_registry as reg

    flipped = dataclasses.replace(reg.SPEEDUP, better=reg.Better.LOWER)
    monkeypatch.setattr(reg, "RESULT_METRICS", (flipped, *reg.RESULT_METRICS[1:]))
    runs = _history(store_run, series_values, 26, drop_from=24)
    for run in runs:
        detect_run(session, run)
    found = {(f.model, f.metric): f.category for f in _findings(session, kind="performance")}
    assert found == {("resnet18", "speedup"): "improvement", ("resnet18", "abs_latency"): "regression"}


def test_status_changes_compare_with_the_previous_run_not_the_previous_night(session, store_run) -> None:
    # Night 0 passes; night 1 runs twice: the morning run fails, a re-run in the afternoon passes again.
    night0 = store_run(0, {"resnet18": 1.5, "vit_small": 2.0})
    morning = store_run(1, {"resnet18": None, "vit_small": 2.0}, hours=6)
    afternoon = store_run(1, {"resnet18": 1.5, "vit_small": 2.0}, hours=12)
    assert detect_run(session, night0).count == 0
    assert [(f.model, f.category) for f in _findings(session, run_id=morning) if f.kind == "status"] == []  # not yet
    detect_run(session, morning)
    assert [(f.model, f.category) for f in _findings(session, run_id=morning, kind="status")] == [
        ("resnet18", "new_failure")]
    # The afternoon run's previous run is the morning's, on the same night: resnet18 is fixed (against the previous
    # night it would be no change at all).
    detect_run(session, afternoon)
    assert [(f.model, f.category) for f in _findings(session, run_id=afternoon, kind="status")] == [
        ("resnet18", "fixed")]


def test_runs_to_detect_takes_the_run_that_started_last(session, store_run) -> None:
    # Uploaded out of order: the afternoon run arrives (and gets its id) before the morning one.
    afternoon = store_run(3, {"resnet18": 1.5}, hours=12)
    morning = store_run(3, {"resnet18": 1.4}, hours=2)
    assert morning > afternoon
    assert runs_to_detect(session) == [afternoon]
    assert runs_to_detect(session, all_runs=True) == [morning, afternoon]


def test_incremental_detection_reads_the_last_two_windows_with_the_same_answer(session, store_run, series_values,
                                                                                monkeypatch) -> None:
    """A night's detection reads each series' last two windows, not its whole history (issue 31: at PyTorch's matrix
    the whole history is most of the database every night); the findings are those of the whole history. A series
    that passed every night is cut; a flaky one (fails every third night) has too few points in the last runs and
    is read whole."""
    from service.detection import detector

    nights = 170
    steady, flaky = series_values(11, nights), series_values(12, nights, level=2.0)
    runs = [store_run(night, {"resnet18": steady[night] * (0.8 if night >= 166 else 1.0),
                              "vit_small": None if night % 3 == 0 else flaky[night] * (0.8 if night >= 164 else 1.0)})
            for night in range(nights)]
    last = session.get(detector.Run, runs[-1])
    series = sorted(detector.passing_series(session, runs[-1]))
    cut = detector._incremental_points(session, last, series)
    whole = detector._series_points(session, last, series)
    window = detector.DetectionConfig().window
    assert cut.keys() == whole.keys()
    assert {len(whole[key]) - len(cut[key]) for key in cut} - {0}, "the steady series is read in part"
    for key, points in cut.items():
        assert points == whole[key][-len(points):] and (len(points) >= 2 * window or points == whole[key]), key

    def found() -> set[tuple]:
        nested = session.begin_nested()
        detect_run(session, runs[-1], incremental=True)
        out = {(f.model, f.metric, f.category, f.change_point.run_id) for f in _findings(session, kind="performance")}
        nested.rollback()
        return out

    bounded = found()
    monkeypatch.setattr(detector, "_incremental_points", detector._series_points)
    assert bounded == found()
    assert {(model, metric) for model, metric, _, _ in bounded} >= {("resnet18", "speedup"), ("vit_small", "speedup")}
