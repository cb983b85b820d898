"""PyTorch's output directories ingest as the harness leaves them (hand-made files in tests/service/data):

- harness_ci/: a CI run of huggingface — result CSVs with a model written three times, their benchmark-database
  JSON records, *_performance_compilation_metrics.csv/.json, runner.py's passrate/geomean/comp_time/memory.csv;
- harness_by_hand/: the default names of a run by hand (speedup_inductor.csv, accuracy_inductor.csv, the
  compilation-metrics companion).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa

from perfdash.cli import main
from service.models import Result, Run, RunSummary

DATA = Path(__file__).parent / "data"
STEM = "inductor_huggingface_float32_inference_cpu"


@pytest.fixture(params=["sqlite", "postgres"])
def database(request, tmp_path, monkeypatch) -> str:
    url = f"sqlite:///{tmp_path / 'perfdash.db'}" if request.param == "sqlite" \
        else request.getfixturevalue("fresh_postgres")
    monkeypatch.setenv("DATABASE_URL", url)
    return url


def _stored(url: str) -> tuple[list[Run], dict[str, Result], RunSummary | None]:
    from sqlalchemy.orm import Session

    engine = sa.create_engine(url)
    try:
        with Session(engine) as session:
            runs = list(session.scalars(sa.select(Run)).unique())
            results = {r.name: r for r in session.scalars(sa.select(Result))}
            summary = session.scalars(sa.select(RunSummary)).first()
            session.expunge_all()
            return runs, results, summary
    finally:
        engine.dispose()


def test_a_ci_output_directory_ingests_as_it_is(database, capsys):
    code = main(["ingest", str(DATA / "harness_ci"), "--machine", "Xeon 8375C", "--timestamp", "2026-06-02T01:00"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "stored: huggingface inductor, 6 models" in out
    # every companion is named with the reason it was skipped
    for skipped in (f"skipped {STEM}_performance_compilation_metrics.csv: compile-phase times",
                    f"skipped {STEM}_performance_compilation_metrics.json: compile-phase times",
                    f"skipped {STEM}_performance.json: the same rows as {STEM}_performance.csv",
                    f"skipped {STEM}_accuracy.json: the same rows as {STEM}_accuracy.csv",
                    "skipped passrate.csv: runner.py's summary table", "skipped memory.csv"):
        assert skipped in out, skipped
    # the repeated model: the last row wins and the dropped lines are named with what they said
    assert (f"note: {STEM}_performance.csv: model 'DistilBertForMaskedLM' is written 3 times; kept the last "
            "(line 6: 0.50x), dropped line 4 (0.00x), line 5 (1.50x)") in out
    assert (f"note: {STEM}_accuracy.csv: model 'DistilBertForMaskedLM' is written 3 times; kept the last "
            "(line 6: fail_accuracy), dropped line 4 (timeout), line 5 (pass)") in out
    runs, results, summary = _stored(database)
    assert len(runs) == 1
    assert results["DistilBertForMaskedLM"].accuracy == "fail_accuracy"
    assert results["DistilBertForMaskedLM"].speedup == 0.5 and not results["DistilBertForMaskedLM"].passed
    # runner.py's rule: model_fail_to_load and eager_fail_to_run leave the total
    assert (summary.passed, summary.total) == (2, 4)


def test_benchmark_database_records_alone_ingest(database, tmp_path, capsys):
    for name in (f"{STEM}_performance.json", f"{STEM}_accuracy.json", f"{STEM}_performance_compilation_metrics.json"):
        shutil.copy(DATA / "harness_ci" / name, tmp_path / name)
    code = main(["ingest", str(tmp_path), "--machine", "Xeon 8375C", "--timestamp", "2026-06-02T01:00"])
    out, err = capsys.readouterr()
    assert code == 0, err
    # model_fail_to_load / eager_fail_to_run rows have no record (the harness writes none): 4 models
    assert "stored: huggingface inductor, 4 models" in out
    assert "model 'DistilBertForMaskedLM'" in out
    runs, results, summary = _stored(database)
    assert (runs[0].configuration.suite, runs[0].configuration.dtype) == ("huggingface", "float32")
    # the timeout row's record has no mode, dtype or backend: it takes the file's
    assert results["MobileBertForMaskedLM"].accuracy == "timeout"
    assert results["BertForMaskedLM"].speedup == pytest.approx(1.34)
    assert results["BertForMaskedLM"].compilation_latency == pytest.approx(28.7)
    assert results["BertForMaskedLM"].graph_breaks == 0
    assert (summary.passed, summary.total) == (2, 4)


def test_hand_run_names_need_the_run_named(database, capsys):
    code = main(["ingest", str(DATA / "harness_by_hand"), "--machine", "Xeon"])
    err = capsys.readouterr().err
    assert code == 1
    assert "speedup_inductor.csv" in err or "accuracy_inductor.csv" in err
    assert "--suite S --backend B --dtype D --mode M" in err
    assert _stored(database)[0] == []


def test_hand_run_names_with_flags(database, capsys):
    code = main(["ingest", str(DATA / "harness_by_hand"), "--suite", "timm_models", "--backend", "inductor",
                 "--dtype", "float32", "--mode", "inference", "--machine", "Xeon", "--timestamp", "2026-06-03T01:00"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "stored: timm_models inductor, 2 models" in out
    assert "skipped speedup_inductor_compilation_metrics.csv" in out
    runs, results, summary = _stored(database)
    assert runs[0].configuration.device == "cpu"
    assert results["resnet18"].abs_latency == pytest.approx(176.9) and results["resnet18"].passed
    assert (summary.passed, summary.total) == (2, 2)


def test_flags_must_name_the_whole_run(database, capsys):
    assert main(["ingest", str(DATA / "harness_by_hand"), "--suite", "timm_models"]) == 2
    assert "needs --backend, --dtype, --mode too" in capsys.readouterr().err


def test_api_reports_skipped_files_and_repeats(upload):
    folder = DATA / "harness_ci"
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix in (".csv", ".json")}
    response = upload(files, machine="Xeon", timestamp="2026-06-02T01:00:00+00:00")
    assert response.status_code == 201, response.text
    notices = response.json()["notices"]
    assert any(n.startswith("skipped passrate.csv") for n in notices)
    assert any("'DistilBertForMaskedLM' is written 3 times" in n for n in notices)


def test_repeated_models_in_a_json_upload_are_reported(client, auth, manifest):
    meta = json.loads(manifest().model_dump_json())
    body = {"manifest": meta, "results": [{"name": "a", "speedup": 1.5, "accuracy": "pass"},
                                          {"name": "a", "speedup": 0.5, "accuracy": "fail_accuracy"}]}
    response = client.post("/api/v1/runs", json=body, headers=auth)
    assert response.status_code == 201, response.text
    assert response.json()["notices"] == [
        "JSON upload: model 'a' is written 2 times; kept the last (results[1]: fail_accuracy), dropped "
        "results[0] (pass)"]


@pytest.mark.parametrize(("header", "message"), [
    ("dev,name,batch_size,speedup,compilation_latency,compression_ratio",
     "expected column 'abs_latency' at position 5, found 'compilation_latency'"),
    ("cpu,alexnet,4,2.0,10.0,20.0,1.5", "expected column 'dev' at position 1, found 'cpu'"),
])
def test_old_headers_get_one_line_naming_what_to_add(database, tmp_path, capsys, header, message):
    (tmp_path / "inductor_torchbench_float32_inference_cpu_performance.csv").write_text(
        header + "\ncpu,alexnet,4,2.0,10.0,20.0\n")
    assert main(["ingest", str(tmp_path), "--machine", "Xeon"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "line 1" in err


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_eager_and_aot_eager_backends(database, tmp_path, capsys, backend):
    for name in ("inductor_torchbench_float32_inference_cpu_performance.csv",
                 "inductor_torchbench_float32_inference_cpu_accuracy.csv"):
        shutil.copy(DATA / "pytorch_run" / name, tmp_path / name.replace("inductor_", backend + "_"))
    assert main(["ingest", str(tmp_path), "--machine", "Xeon", "--timestamp", "2026-06-03T01:00"]) == 0
    assert f"stored: torchbench {backend}, 7 models" in capsys.readouterr().out


def test_a_name_without_a_suite_gets_one_line_naming_it(database, tmp_path, capsys):
    # third-party files that leave the suite to be inferred from the model names
    shutil.copy(DATA / "pytorch_run" / "inductor_torchbench_float32_inference_cpu_performance.csv",
                tmp_path / "inductor_float32_inference_cpu_performance.csv")
    assert main(["ingest", str(tmp_path), "--machine", "Xeon"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "{backend}_{suite}_{dtype}_{mode}_{device}" in err and "--suite S" in err


def test_export_writes_records_that_ingest_back_the_same(tmp_path, monkeypatch, capsys):
    first, second = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    monkeypatch.setenv("DATABASE_URL", first)
    assert main(["ingest", str(DATA / "harness_ci"), "--machine", "Xeon", "--timestamp", "2026-06-02T01:00"]) == 0
    out_dir = tmp_path / "exported"
    assert main(["export", "--format", "pytorch-json", "--output-dir", str(out_dir)]) == 0
    assert sorted(p.name for p in out_dir.iterdir()) == [f"{STEM}_accuracy.json", f"{STEM}_performance.json"]
    record = json.loads((out_dir / f"{STEM}_accuracy.json").read_text().splitlines()[0])
    assert record["benchmark"]["name"] == "TorchInductor" and record["model"]["origins"] == ["huggingface"]
    assert record["metric"]["name"] == "accuracy" and record["metric"]["extra_info"]["benchmark_values"][0] == "pass"
    speedup = next(json.loads(line) for line in (out_dir / f"{STEM}_performance.json").read_text().splitlines()
                   if '"speedup"' in line and "BertForMaskedLM" in line)
    assert isinstance(speedup["metric"]["benchmark_values"][0], float)
    capsys.readouterr()

    monkeypatch.setenv("DATABASE_URL", second)
    assert main(["ingest", str(out_dir), "--machine", "Xeon", "--timestamp", "2026-06-02T01:00"]) == 0
    _, before, summary_before = _stored(first)
    _, after, summary_after = _stored(second)
    columns = ("accuracy", "passed", "speedup", "abs_latency", "compilation_latency", "compression_ratio",
               "eager_peak_mem", "dynamo_peak_mem", "graph_breaks", "batch_size")
    assert {n: [getattr(r, c) for c in columns] for n, r in before.items()} == \
        {n: [getattr(r, c) for c in columns] for n, r in after.items()}
    assert (summary_after.passed, summary_after.total) == (summary_before.passed, summary_before.total) == (2, 4)


def test_other_json_is_skipped_and_a_broken_record_file_is_refused(database, tmp_path, capsys):
    for name in (f"{STEM}_performance.csv", f"{STEM}_accuracy.csv"):
        shutil.copy(DATA / "harness_ci" / name, tmp_path / name)
    (tmp_path / "environment.json").write_text('{"python": "3.11"}\n')
    assert main(["ingest", str(tmp_path), "--machine", "Xeon", "--timestamp", "2026-06-02T01:00"]) == 0
    assert "skipped environment.json: JSON, but not benchmark-database records" in capsys.readouterr().out

    lines = (DATA / "harness_ci" / f"{STEM}_performance.json").read_text().splitlines()
    record = json.loads(lines[1])
    record["metric"]["benchmark_values"] = ["fast"]
    lines[1] = json.dumps(record)
    (tmp_path / "x_performance.json").write_text("\n".join(lines) + "\n")
    (tmp_path / "environment.json").unlink()
    for name in (f"{STEM}_performance.csv", f"{STEM}_accuracy.csv"):
        (tmp_path / name).unlink()
    assert main(["ingest", str(tmp_path), "--machine", "Xeon", "--timestamp", "2026-06-04T01:00"]) == 1
    err = capsys.readouterr().err
    assert "x_performance.json, line 2" in err and "abs_latency is not a number: 'fast'" in err


def test_flags_never_rename_a_file_named_for_another_run(database, tmp_path, capsys):
    shutil.copy(DATA / "pytorch_run" / "inductor_torchbench_float32_inference_cpu_performance.csv", tmp_path)
    assert main(["ingest", str(tmp_path), "--suite", "timm_models", "--backend", "inductor", "--dtype", "float32",
                 "--mode", "inference"]) == 2
    err = capsys.readouterr().err
    assert "the name says inductor_torchbench_float32_inference_cpu, the flags say " \
           "inductor_timm_models_float32_inference_cpu" in err
