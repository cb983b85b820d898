"""Summary numbers on hand-computed fixtures, as PyTorch's benchmarks/dynamo/runner.py computes them."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data" / "pytorch_run"


def _fixture_files() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(DATA.glob("*.csv"))}


def test_summary_of_pytorch_csvs_matches_runner_py(upload, client):
    """tests/service/data/pytorch_run by hand (runner.py's passrate/geomean/comp_time/memory):

    performance CSV models: alexnet 2.0 pass, resnet18 0.5 pass_due_to_skip, vgg16 1.25 pass,
    mobilenet_v2 3.0 fail_accuracy (gated to 0), densenet121 failure row, shufflenet 0.0 measured with accuracy pass;
    squeezenet1_1 is only in the accuracy CSV, so runner.py does not count it.
    passrate 3/6 = 50%; geomean clipped (2 * 1 * 1.25)^(1/3) = 1.3572; unclipped (2 * 0.5 * 1.25)^(1/3) = 1.0772;
    compile time over accuracy-passing models with a value > 0: (20 + 40 + 60 + 12) / 4 = 33.00;
    memory likewise: (1.5 + 0.8 + 1.25 + 1.1) / 4 = 1.1625.
    """
    response = upload(_fixture_files(), machine="Xeon", timestamp="2026-05-01T01:00:00+00:00")
    assert response.status_code == 201, response.text
    body = client.get("/api/v1/summary").json()
    assert body["night"] == "2026-05-01"
    (row,) = body["rows"]
    summary = row["run"]["summary"]
    assert (summary["passed"], summary["total"]) == (3, 6)
    assert summary["passrate_text"] == "50%, 3/6"
    assert summary["geomean_speedup"] == pytest.approx(2.5 ** (1 / 3))
    assert summary["geomean_speedup_text"] == "1.36x"
    assert summary["geomean_speedup_unclipped"] == pytest.approx(1.25 ** (1 / 3))
    assert summary["geomean_speedup_unclipped_text"] == "1.08x"
    assert summary["mean_compile_time_s"] == pytest.approx(33.0)
    assert summary["compile_time_text"] == "33.00"
    assert summary["mean_compression_ratio"] == pytest.approx(1.1625)
    assert summary["compression_text"] == "1.16x"
    # a night's summary counts the warnings and lists them only when asked (issue 31: thousands a night)
    assert summary["warnings"] == []
    listed = client.get("/api/v1/summary", params={"warnings": "true"}).json()["rows"][0]["run"]["summary"]
    warned = {w["name"] for w in listed["warnings"]}
    assert {"mobilenet_v2", "densenet121", "resnet18", "squeezenet1_1"} <= warned
    assert "alexnet" not in warned
    assert summary["warnings_count"] == listed["warnings_count"] == len(listed["warnings"])
    assert {k: v for k, v in listed.items() if k != "warnings"} == {k: v for k, v in summary.items() if k != "warnings"}
    (one,) = client.get(f"/api/v1/summary/runs/{row['run']['id']}").json()["rows"]
    assert one["run"]["summary"]["warnings"] == listed["warnings"]  # one run's summary lists them
    assert row["previous"] is None


def test_previous_night_and_latest_night(upload, client, run_files, manifest):
    nights = {"2026-01-01": {"a": 2.0, "b": 1.0}, "2026-01-02": {"a": 2.0, "b": None},
              "2026-01-04": {"a": 1.0, "b": 4.0}}
    ids = {}
    for night, speedups in nights.items():
        response = upload(run_files(speedups, manifest=manifest(night=night, commit=night)))
        ids[night] = response.json()["runs"][0]["run_id"]
    # another configuration, only on the 2nd: not the previous night of anything above
    upload(run_files({"a": 9.0}, manifest=manifest(night="2026-01-03", dtype="bfloat16")))

    latest = client.get("/api/v1/summary", params={"dtype": "float32"}).json()
    assert latest["night"] == "2026-01-04"
    (row,) = latest["rows"]
    assert row["run"]["id"] == ids["2026-01-04"] and row["previous"]["id"] == ids["2026-01-02"]
    assert row["run"]["summary"]["passrate_text"] == "100%, 2/2"
    assert row["previous"]["summary"]["passrate_text"] == "50%, 1/2"
    assert row["run"]["summary"]["geomean_speedup"] == pytest.approx(2.0)  # sqrt(1 * 4)

    second = client.get("/api/v1/summary", params={"night": "2026-01-02"}).json()
    assert [r["run"]["id"] for r in second["rows"]] == [ids["2026-01-02"]]
    assert second["rows"][0]["previous"]["id"] == ids["2026-01-01"]

    everything = client.get("/api/v1/summary").json()  # latest night of any configuration
    assert everything["night"] == "2026-01-04"
    assert client.get("/api/v1/summary", params={"night": "2025-12-31"}).json()["rows"] == []
    assert client.get("/api/v1/summary", params={"suite": "huggingface"}).json() == {"night": None, "rows": []}

    one = client.get(f"/api/v1/summary/runs/{ids['2026-01-02']}").json()
    assert one["rows"][0]["previous"]["id"] == ids["2026-01-01"]
    assert client.get("/api/v1/summary/runs/999999").status_code == 404


def test_rerun_in_the_same_night_replaces_the_earlier_run(upload, client, run_files, manifest):
    from datetime import timedelta

    first = manifest(night="2026-02-02")
    rerun = first.model_copy(update={"start_time": first.start_time + timedelta(hours=3)})
    upload(run_files({"a": 1.1}, manifest=first))
    later = upload(run_files({"a": 1.6}, manifest=rerun)).json()["runs"][0]["run_id"]
    (row,) = client.get("/api/v1/summary").json()["rows"]
    assert row["run"]["id"] == later


def test_rows_per_suite_and_backend(upload, client, run_files, manifest):
    for suite in ("timm_models", "huggingface", "torchbench"):
        for backend in ("inductor", "aot_eager"):
            assert upload(run_files({"m": 1.2}, manifest=manifest(suite=suite, backend=backend))).status_code == 201
    rows = client.get("/api/v1/summary").json()["rows"]
    assert [(r["run"]["configuration"]["suite"], r["run"]["configuration"]["backend_variant"]) for r in rows] == [
        ("huggingface", "aot_eager"), ("huggingface", "inductor"), ("timm_models", "aot_eager"),
        ("timm_models", "inductor"), ("torchbench", "aot_eager"), ("torchbench", "inductor")]
    only = client.get("/api/v1/summary", params={"backend": "aot_eager", "suite": "torchbench"}).json()["rows"]
    assert len(only) == 1


def test_each_group_of_perfdash_summary_has_a_title_of_its_own():
    # `perfdash summary` groups by the axes that split its summary (perfdash.axes.SummaryScope.CLI) and the machine;
    # a title shared by two groups would print two sections alike, so each of them must show in the title.
    from types import SimpleNamespace

    from perfdash.axes import SUMMARY_AXES, SummaryScope
    from service.summary_cli import _section

    columns = {"device": "cuda", "dtype": "bfloat16", "mode": "inference", "thread_config": "all-cores",
               "compile_mode": "default", "dynamic_shapes": False, "batch_size_override": None}

    def title(**changes: object) -> str:
        values = {**columns, "machine": "h100", **changes}
        machine = SimpleNamespace(fingerprint=values.pop("machine"))
        return _section(SimpleNamespace(run=SimpleNamespace(configuration=SimpleNamespace(**values, machine=machine))))

    others = {str: "other", bool: True, int: 4}
    changed = {axis.stored_column: others[axis.type] for axis in SUMMARY_AXES[SummaryScope.CLI]}
    assert set(changed) <= set(columns)
    for column, value in [*changed.items(), ("machine", "a100")]:
        assert title(**{column: value}) != title(), column
