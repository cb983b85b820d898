"""`perfdash nightly`: the plan, the night assignment, and the flow end to end (ingest/detect/report on SQLite and on
Postgres from result files; the full flow with real tiny models when the runner is registered)."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sqlite3
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from perfdash.cli import build_parser
from perfdash.contract import AccuracyRow, PerformanceRow, append_row
from perfdash.manifest import MachineInfo, Manifest, RunConfig
from service import nightly


def _registered() -> set[str]:
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


def _config(**overrides) -> nightly.NightlyConfig:
    args = build_parser().parse_args(["nightly", *overrides.pop("argv", [])])
    return nightly.config_from_args(args, datetime(2026, 11, 22, 21, 0, tzinfo=UTC))


def test_default_picks_select_exactly_their_models_in_the_runner() -> None:
    from runner.options import RunOptions, validate

    for pick in nightly.DEFAULT_PICKS:
        _, selected = validate(RunOptions(suite=pick.suite, filters=(nightly._only(pick.models),),
                                          batch_size=pick.batch_size, model_list=pick.model_list))
        assert [m.name for m in selected] == list(pick.models), pick.suite
    assert set(nightly.DEFAULT_SUITES) <= {p.suite for p in nightly.DEFAULT_PICKS}
    # One configuration group a night: the report covers one group, and the batch size is part of it.
    assert len({p.batch_size for p in nightly.DEFAULT_PICKS}) == 1


def test_plan_runs_each_suite_then_ingests_detects_and_reports() -> None:
    config = _config(argv=["--models", "timm_models=lcnet_050", "--repeat", "5", "--report", "night.md"])
    steps = nightly.plan(config)
    commands = [step.argv[0] for step in steps]
    assert commands == ["db", "run", "run", "run", "ingest", "detect", "report", "db"]
    runs = {step.argv[step.argv.index("--suite") + 1]: step.argv for step in steps if step.argv[0] == "run"}
    assert set(runs) == {"torchbench", "huggingface", "timm_models"}
    timm = runs["timm_models"]
    assert timm[timm.index("--filter") + 1] == "^(lcnet_050)$"
    assert timm[timm.index("--model-list") + 1] == "extended"  # lcnet_050 left PyTorch's current list
    assert "--model-list" not in runs["huggingface"]
    assert timm[timm.index("--repeat") + 1] == "5"
    assert all(argv[argv.index("--output-dir") + 1] == str(config.results_dir) for argv in runs.values())
    assert config.results_dir == Path("results/nightly/20261122T210000Z")
    assert steps[4].argv == ("ingest", str(config.results_dir)) and steps[4].required
    assert steps[-2].argv == ("report", "--output", "night.md")
    assert steps[-1].argv == ("db", "compact-samples") and not steps[-1].required  # retention, when set


def test_a_whole_suite_or_a_models_file_runs_without_the_picks_model_list(tmp_path: Path) -> None:
    models = tmp_path / "timm.toml"
    models.write_text('[[model]]\nname = "lcnet_050"\nbatch_size = 2\n')
    for argv in (["--models", "timm_models="], ["--models-file", f"timm_models={models}"]):
        runs = [step.argv for step in nightly.plan(_config(argv=argv)) if step.argv[0] == "run"]
        timm = next(run for run in runs if "timm_models" in run)
        assert "--model-list" not in timm, argv
        assert "--filter" not in timm, argv


def test_plan_command_lines_parse_with_the_real_parser() -> None:
    registered = _registered()
    missing = set()
    parser = build_parser()
    for step in nightly.plan(_config()):
        if step.argv[0] not in registered:
            missing.add(step.argv[0])
            continue
        with contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                parser.parse_args(list(step.argv))
            except SystemExit:
                pytest.fail(f"perfdash {' '.join(step.argv)} rejected: {err.getvalue()}")
    if missing:
        pytest.skip(f"not registered yet: {', '.join(sorted(missing))}")


def test_bad_options_are_refused() -> None:
    parser = build_parser()
    with contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit):
        parser.parse_args(["nightly", "--models", "timm_models"])
    with contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit):
        parser.parse_args(["nightly", "--models-file", "timm_models=/no/such/file.toml"])
    with pytest.raises(SystemExit, match="--skip-benchmark needs --results-dir"):
        _config(argv=["--skip-benchmark"])


# ---- result files made with the contract, as the runner writes them ---------------------------------------------

MODELS = {"torchbench": ("resnet18", "mobilenet_v2"), "timm_models": ("lcnet_050", "mobilenetv2_100")}


def write_night(directory: Path, start: datetime, speedup: float, failing: str | None = None,
                night: date | None = None, suite_gap: timedelta = timedelta(0)) -> None:
    """One run a suite, the second starting ``suite_gap`` after the first; ``night``: the manifests' night."""
    for position, (suite, models) in enumerate(MODELS.items()):
        started = start + position * suite_gap
        config = RunConfig(suite=suite, backend="inductor", dtype="float32", mode="inference", device="cpu",
                           batch_size=4, env={"TORCHINDUCTOR_FREEZING": "1"})
        key = config.key()
        directory.mkdir(parents=True, exist_ok=True)
        for index, name in enumerate(models):
            status = "fail_to_run" if name == failing else "pass"
            perf = (PerformanceRow.failure("cpu", name) if status != "pass" else
                    PerformanceRow(dev="cpu", name=name, batch_size=4, speedup=speedup + index / 10, abs_latency=3.5,
                                   compilation_latency=21.0, compression_ratio=1.1, eager_peak_mem=0.02,
                                   dynamo_peak_mem=0.018))
            append_row(directory / key.filename("performance"), perf)
            append_row(directory / key.filename("accuracy"), AccuracyRow(dev="cpu", name=name, batch_size=4,
                                                                          accuracy=status))
        Manifest(config=config, machine=MachineInfo(host="laptop", cpu_model="Test CPU", cpu_count=2),
                 torch_version="2.14.1", torch_git_commit="abc123", start_time=started, night=night,
                 end_time=started + timedelta(minutes=5)).write(directory / key.filename("manifest"))


def _nightly(database_url: str, results: Path, report: Path, *extra: str) -> int:
    from perfdash.cli import main

    return main(["nightly", "--database-url", database_url, "--skip-benchmark", "--results-dir", str(results),
                 "--report", str(report), "--no-serve", *extra])


@pytest.fixture()
def environment_untouched():
    """--database-url reaches every step as settings handed down, never by rewriting the process environment."""
    before = os.environ.get("DATABASE_URL")
    yield
    assert os.environ.get("DATABASE_URL") == before


def _starts(database_url: str) -> dict[date, list[datetime]]:
    """The stored start times of the runs per night, read with SQLAlchemy from the service's own tables."""
    import sqlalchemy as sa

    from service.models import Run

    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(sa.select(Run.night, Run.started_at).order_by(Run.started_at)).all()
    finally:
        engine.dispose()
    out: dict[date, list[datetime]] = {}
    for night, started in rows:
        out.setdefault(night, []).append(started.replace(tzinfo=UTC) if started.tzinfo is None else started)
    return out


def _check_two_nights(database_url: str, tmp_path: Path) -> None:
    # Both runs start in the past (the service refuses starts more than a day ahead of its clock), on one day.
    today = (datetime.now(UTC) - timedelta(hours=3)).replace(hour=0, minute=5, second=0, microsecond=0)
    write_night(tmp_path / "night1", today, 1.30)
    write_night(tmp_path / "night2", today + timedelta(hours=1), 1.05, failing="lcnet_050")
    report = tmp_path / "report.md"
    second = today + timedelta(hours=1)
    assert _nightly(database_url, tmp_path / "night1", report) == 0
    assert _starts(database_url) == {today.date(): [today, today]}
    assert _nightly(database_url, tmp_path / "night2", report) == 0
    # Same day: a second run of the same night with its real start times, beside the first (not instead of it).
    assert _starts(database_url) == {today.date(): [today, today, second, second]}
    if "report" in _registered():
        # the report of the later run compares it with the earlier one of the same day: lcnet_050 stopped passing
        text = report.read_text()
        assert "| timm_models | lcnet_050 | accuracy | pass | fail_to_run |" in text
    # Ingesting the first run again changes nothing (idempotent ingest).
    assert _nightly(database_url, tmp_path / "night1", report) == 0
    assert _starts(database_url) == {today.date(): [today, today, second, second]}


def test_a_nightly_that_crosses_midnight_utc_stays_one_night(tmp_path: Path) -> None:
    # started at 23:58 UTC; its second suite starts at 00:03 the next day
    start = (datetime.now(UTC) - timedelta(days=1)).replace(hour=23, minute=58, second=0, microsecond=0)
    write_night(tmp_path / "night", start, 1.2, night=start.date(), suite_gap=timedelta(minutes=5))
    database = f"sqlite:///{tmp_path / 'perfdash.db'}"
    assert _nightly(database, tmp_path / "night", tmp_path / "report.md") == 0
    assert _starts(database) == {start.date(): [start, start + timedelta(minutes=5)]}
    # without the nightly's night, a run is filed under the date it started
    write_night(tmp_path / "alone", start + timedelta(hours=1), 1.2)
    assert _nightly(database, tmp_path / "alone", tmp_path / "report.md") == 0
    assert set(_starts(database)) == {start.date(), start.date() + timedelta(days=1)}


def test_every_run_of_the_nightly_carries_the_night_it_started() -> None:
    parser = build_parser()
    late = nightly.config_from_args(parser.parse_args(["nightly"]), datetime(2026, 11, 27, 23, 58, tzinfo=UTC))
    runs = [step.argv for step in nightly.plan(late) if step.argv[0] == "run"]
    assert runs and all(argv[argv.index("--night") + 1] == "2026-11-27" for argv in runs)
    if "run" in _registered():
        from runner.cli import options_from_args

        assert {options_from_args(parser.parse_args(list(argv))).night for argv in runs} == {date(2026, 11, 27)}
        with pytest.raises(SystemExit):
            parser.parse_args(["run", "--suite", "timm_models", "--night", "27.11.2026"])


def test_a_manifest_night_is_a_date_before_its_run_started() -> None:
    config = RunConfig(suite="timm_models", backend="inductor", dtype="float32", mode="inference", device="cpu")
    start = datetime(2026, 11, 28, 0, 3, tzinfo=UTC)
    assert Manifest(config=config, start_time=start, night="2026-11-27").night_of_run() == date(2026, 11, 27)
    assert Manifest(config=config, start_time=start).night_of_run() == date(2026, 11, 28)
    for night in ("2026-11-29", "2026-11-20", 1764288000, "20261127"):  # after the start, too early, a number, undashed
        with pytest.raises(ValueError, match="night"):
            Manifest.model_validate({"config": config.model_dump(), "start_time": start.isoformat(), "night": night})


def test_nightly_flow_on_sqlite(tmp_path: Path, environment_untouched) -> None:
    database = tmp_path / "perfdash.db"
    _check_two_nights(f"sqlite:///{database}", tmp_path)
    with sqlite3.connect(database) as connection:
        assert connection.execute("SELECT count(*) FROM runs").fetchone() == (4,)


def test_nightly_flow_on_postgres(postgres_url: str, tmp_path: Path, environment_untouched) -> None:
    import sqlalchemy as sa

    # A database of its own: other test packages share the session's server.
    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sa.text("DROP DATABASE IF EXISTS perfdash_nightly"))
        connection.execute(sa.text("CREATE DATABASE perfdash_nightly"))
    admin.dispose()
    _check_two_nights(postgres_url.rsplit("/", 1)[0] + "/perfdash_nightly", tmp_path)


def test_a_suite_that_stopped_before_its_first_model_does_not_block_the_night(tmp_path: Path) -> None:
    write_night(tmp_path, datetime(2026, 11, 22, 21, 30, tzinfo=UTC), 1.2)
    # huggingface was killed before its first model: a manifest and no CSV.
    config = RunConfig(suite="huggingface", backend="inductor", batch_size=2)
    Manifest(config=config, start_time=datetime(2026, 11, 22, 21, 30, tzinfo=UTC)).write(
        tmp_path / config.key().filename("manifest"))
    files, empty = nightly.ingest_files(tmp_path)
    assert empty == ["inductor_huggingface_float32_inference_cpu"]
    names = sorted(Path(f).name for f in files)
    assert len(names) == 6 and not any("huggingface" in n for n in names)
    assert sum(n.endswith("_manifest.json") for n in names) == 2
