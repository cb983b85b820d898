"""Retention of raw samples (service/retention.py) on real Postgres: which runs lose their raw timings, what every
reader still gets afterwards, and the command that applies it in batches."""

from __future__ import annotations

from datetime import date

import pytest
import sqlalchemy as sa

from perfdash.cli import main
from perfdash.confidence import speedup_interval
from perfdash.contract import ModelSamples
from service.models import Result, Run
from service.retention import SamplesRetention, compact_runs, runs_to_compact

NIGHTS = ("2026-03-01", "2026-03-02", "2026-03-03", "2026-03-04")


def _with_samples(run_files, meta) -> dict[str, bytes]:
    """resnet18 with raw timings of three worker processes (--processes 3) and activation peaks, vit with raw timings
    only."""
    files = run_files({"resnet18": 1.4, "vit": 2.0}, manifest=meta)
    lines = [ModelSamples("resnet18", 8, (2.0, 2.2, 2.1, 2.05, 2.15), (1.4, 1.5, 1.45, 1.42, 1.48),
                          eager_activation_peak_mem=0.024, dynamo_activation_peak_mem=0.015,
                          process=(0, 0, 1, 1, 2)).to_json(),
             ModelSamples("vit", 8, (4.0, 4.1, 4.2, 3.9, 4.05), (2.0, 2.1, 2.05, 1.95, 2.02)).to_json()]
    files[meta.config.key().stem + "_samples.jsonl"] = ("\n".join(lines) + "\n").encode()
    return files


@pytest.fixture
def history(upload, run_files, manifest) -> dict[str, list[int]]:
    """Four nights of one configuration and the last night of another, all with raw samples."""
    ids: dict[str, list[int]] = {"float32": [], "bfloat16": []}
    for night in NIGHTS:
        response = upload(_with_samples(run_files, manifest(night=night, commit=night)))
        assert response.status_code == 201, response.text
        ids["float32"].append(response.json()["runs"][0]["run_id"])
    response = upload(_with_samples(run_files, manifest(night=NIGHTS[-1], dtype="bfloat16")))
    ids["bfloat16"].append(response.json()["runs"][0]["run_id"])
    return ids


def _results(session, run_id: int) -> dict[str, Result]:
    session.expire_all()
    return {r.name: r for r in session.scalars(sa.select(Result).where(Result.run_id == run_id))}


def test_which_runs_the_policy_compacts(session, history):
    a, b = history["float32"], history["bfloat16"]
    today = date(2026, 3, 5)
    assert runs_to_compact(session, SamplesRetention(), today) == []  # nothing set: kept forever
    assert runs_to_compact(session, SamplesRetention(keep_runs=2), today) == a[:2]  # per configuration: b keeps its one
    assert runs_to_compact(session, SamplesRetention(keep_runs=0), today) == [*a, *b]
    # nights before 2026-03-03 (two days before the 5th)
    assert runs_to_compact(session, SamplesRetention(keep_days=2), today) == a[:2]
    assert runs_to_compact(session, SamplesRetention(keep_days=3), today) == a[:1]
    # a run is kept while either rule keeps it
    assert runs_to_compact(session, SamplesRetention(keep_days=1, keep_runs=3), today) == a[:1]


def test_compaction_drops_the_raw_timings_and_keeps_every_statistic(session, client, history):
    a = history["float32"]
    series = {s["name"]: s["id"] for s in client.get(
        "/api/v1/series", params={"configuration_id": client.get(f"/api/v1/runs/{a[0]}").json()["configuration"]["id"]}
    ).json()}
    before_history = client.get(f"/api/v1/series/{series['resnet18']}/history").json()
    before = _results(session, a[0])
    kept_columns = {name: {c: getattr(r, c) for c in ("speedup", "abs_latency", "speedup_ci_low", "speedup_ci_high",
                                                      "compilation_latency", "passed")}
                    for name, r in before.items()}
    assert before["resnet18"].speedup_ci_low is not None  # the interval was computed from the samples at ingest
    # ... resampling the worker processes of each pair, which the stored samples keep until compaction
    assert before["resnet18"].samples["process"] == [0, 0, 1, 1, 2]
    interval = speedup_interval(before["resnet18"].samples["eager_ms"], before["resnet18"].samples["compiled_ms"],
                                process=before["resnet18"].samples["process"])
    assert interval is not None
    assert (before["resnet18"].speedup_ci_low, before["resnet18"].speedup_ci_high) == pytest.approx(
        (interval.low, interval.high))
    assert before["vit"].samples["eager_ms"] == [4.0, 4.1, 4.2, 3.9, 4.05]

    assert compact_runs(session, a[:2]) == 4  # two runs x two results
    session.flush()
    after = _results(session, a[0])
    assert after["resnet18"].samples == {"eager_activation_peak_mem": 0.024, "dynamo_activation_peak_mem": 0.015}
    assert after["vit"].samples is None  # nothing but raw timings was stored
    assert {name: {c: getattr(r, c) for c in kept_columns[name]} for name, r in after.items()} == kept_columns
    # a kept run: untouched
    assert _results(session, a[2])["vit"].samples["compiled_ms"] == [2.0, 2.1, 2.05, 1.95, 2.02]
    marked = dict(session.execute(sa.select(Run.id, Run.samples_compacted_at).where(Run.id.in_(a))).all())
    assert [marked[i] is not None for i in a] == [True, True, False, False]

    # the Model page's history (activation peaks included) and the run API read the same as before
    assert client.get(f"/api/v1/series/{series['resnet18']}/history").json() == before_history
    run = client.get(f"/api/v1/runs/{a[0]}", params={"samples": "true"}).json()
    assert {r["name"]: r["samples"] for r in run["results"]}["vit"] is None
    # compacted runs are not picked again
    assert runs_to_compact(session, SamplesRetention(keep_runs=2), date(2026, 3, 5)) == []


@pytest.fixture(params=["postgres", "sqlite"])
def database(request, tmp_path) -> str:
    return request.getfixturevalue("fresh_postgres") if request.param == "postgres" \
        else f"sqlite:///{tmp_path / 'perfdash.db'}"


def test_the_command_applies_the_settings_in_batches(database, monkeypatch, tmp_path, capsys, result_csv):
    """`perfdash db compact-samples` with PERFDASH_SAMPLES_KEEP_RUNS, in batches of one run, committed (Postgres
    strips the keys as jsonb, SQLite with json_remove)."""
    from datetime import datetime, timedelta

    from perfdash.contract import AccuracyRow, PerformanceRow
    from perfdash.manifest import MachineInfo, Manifest, RunConfig

    monkeypatch.setenv("DATABASE_URL", database)
    assert main(["db", "compact-samples"]) == 0
    assert "no retention set" in capsys.readouterr().out
    for night in NIGHTS:
        start = datetime.fromisoformat(night + "T01:00:00+00:00")
        meta = Manifest(source="perfdash", config=RunConfig(suite="timm_models", backend="inductor"),
                        machine=MachineInfo(host="agent-1", device="cpu", cpu_model="Test Xeon", cpu_count=2),
                        torch_version="2.14.1", torch_git_commit=night, start_time=start,
                        end_time=start + timedelta(hours=1))
        folder = tmp_path / night
        folder.mkdir()
        stem = meta.config.key().stem
        (folder / f"{stem}_performance.csv").write_bytes(result_csv("performance", [PerformanceRow(
            dev="cpu", name="vit", batch_size=8, speedup=2.0, abs_latency=2.0, compilation_latency=9.0,
            compression_ratio=1.0, eager_peak_mem=0.2, dynamo_peak_mem=0.2)]))
        (folder / f"{stem}_accuracy.csv").write_bytes(result_csv("accuracy", [AccuracyRow(
            dev="cpu", name="vit", batch_size=8, accuracy="pass")]))
        (folder / f"{stem}_manifest.json").write_text(meta.model_dump_json())
        (folder / f"{stem}_samples.jsonl").write_text(ModelSamples("vit", 8, (4.0, 4.1), (2.0, 2.1)).to_json() + "\n")
        assert main(["ingest", str(folder)]) == 0
    capsys.readouterr()

    monkeypatch.setenv("PERFDASH_SAMPLES_KEEP_RUNS", "1")
    assert main(["db", "compact-samples", "--batch-runs", "1"]) == 0
    captured = capsys.readouterr()
    assert "compacted the raw samples of 3 runs (3 results)" in captured.out
    assert "3/3 runs" in captured.err
    engine = sa.create_engine(database)
    try:
        with engine.connect() as connection:
            rows = connection.execute(sa.text(
                "SELECT r.night, s.samples IS NULL, r.samples_compacted_at IS NOT NULL FROM results s "
                "JOIN runs r ON r.id = s.run_id ORDER BY r.night")).all()
    finally:
        engine.dispose()
    assert [(str(n), dropped, marked) for n, dropped, marked in rows] == [
        ("2026-03-01", True, True), ("2026-03-02", True, True), ("2026-03-03", True, True),
        ("2026-03-04", False, False)]
    assert main(["db", "compact-samples", "--keep-runs", "1"]) == 0  # nothing left to do
    assert "of 0 runs" in capsys.readouterr().out
