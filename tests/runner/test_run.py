"""End to end: real worker processes on tiny real models (each model in its own process, as in production)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from rich.console import Console

from perfdash.cli import main
from perfdash.contract import read_accuracy_csv, read_performance_csv, read_samples
from perfdash.manifest import Manifest
from perfdash.metric_registry import EAGER_THROUGHPUT
from perfdash.torch_spec import installed_torch
from runner.api import RunReport, run_suite
from runner.options import RunOptions
from runner.process import ForkServer
from runner.summary import render

DATA = Path(__file__).parent / "data"
# PyTorch's current headers (benchmarks/dynamo/common.py: speedup_experiment's row and _write_accuracy_row).
PERF_HEADER = ("dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,eager_peak_mem,"
               "dynamo_peak_mem,calls_captured,unique_graphs,fallbacks_to_eager,graph_breaks,unique_graph_breaks,"
               "autograd_captures,autograd_compiles,cudagraph_skips")
ACC_HEADER = ("dev,name,batch_size,accuracy,calls_captured,unique_graphs,fallbacks_to_eager,graph_breaks,"
              "unique_graph_breaks,autograd_captures,autograd_compiles,cudagraph_skips,compilation_latency")
# Long enough for a worker to import torch and compile a tiny model on a busy 2-core machine.
TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def statuses(tmp_path_factory: pytest.TempPathFactory) -> RunReport:
    out = tmp_path_factory.mktemp("statuses")
    return run_suite(RunOptions(suite="torchbench", models_file=DATA / "statuses.toml", backend="aot_eager",
                                repeat=3, timeout_s=TIMEOUT_S, output_dir=out))


def test_failures_become_statuses_and_the_suite_goes_on(statuses: RunReport) -> None:
    got = {row.name: row.accuracy for row in read_accuracy_csv(statuses.paths.accuracy)}
    assert got == {
        "tiny_mlp": "pass",
        # A model that cannot run eagerly fails PyTorch's validation at load: eager_fail_to_run.
        "raises": "eager_fail_to_run",
        "aborts": "eager_fail_to_run",  # killed by SIGABRT in its validation run
        "missing_dependency": "model_fail_to_load",
        "nondeterministic": "eager_two_runs_differ",
        "perturbed": "fail_accuracy",
        "hangs": "timeout",
        "tiny_mlp_after_hang": "pass",
    }
    # runner.py's count leaves out the models that never ran (model_fail_to_load, eager_fail_to_run).
    assert statuses.summary.passrate_text == "40%, 2/5"


def test_result_files_have_pytorch_columns_and_failure_rows(statuses: RunReport) -> None:
    perf_lines = statuses.paths.performance.read_text().splitlines()
    acc_lines = statuses.paths.accuracy.read_text().splitlines()
    assert perf_lines[0] == PERF_HEADER
    assert acc_lines[0] == ACC_HEADER
    for name in ("raises", "aborts", "missing_dependency", "hangs"):
        assert f"cpu,{name},0,0.0,0.0" in perf_lines
    assert "cpu,missing_dependency,0,model_fail_to_load" + "," * 9 in acc_lines
    rows = {r.name: r for r in read_performance_csv(statuses.paths.performance)}
    assert len(rows) == 8 and len(perf_lines) == 9
    ok = rows["tiny_mlp"]
    assert ok.batch_size == 4 and ok.speedup > 0 and ok.abs_latency > 0
    assert ok.compilation_latency is not None and ok.stats.unique_graphs == 1 and ok.stats.graph_breaks == 0
    assert ok.eager_peak_mem is not None and ok.dynamo_peak_mem is not None
    assert ok.stats.fallbacks_to_eager == 0 and ok.stats.cudagraph_skips == 0
    accuracy = {r.name: r for r in read_accuracy_csv(statuses.paths.accuracy)}
    # The accuracy rows carry the check's own compile: its counters and compile seconds.
    assert accuracy["tiny_mlp"].stats.unique_graphs == 1 and accuracy["tiny_mlp"].stats.graph_breaks == 0
    assert accuracy["tiny_mlp"].compilation_latency is not None and accuracy["tiny_mlp"].compilation_latency > 0
    # A check that stopped before compiling compiled nothing; a model that never loaded has no check at all.
    assert accuracy["nondeterministic"].stats.calls_captured == 0
    assert accuracy["nondeterministic"].compilation_latency == 0.0
    assert accuracy["missing_dependency"].stats.calls_captured is None
    # The check runs at PyTorch's accuracy batch size for the suite (torchbench: 4), whatever the timed one.
    assert rows["tiny_mlp_after_hang"].batch_size == 2 and accuracy["tiny_mlp_after_hang"].batch_size == 4


def test_manifest_and_samples(statuses: RunReport) -> None:
    manifest = Manifest.read(statuses.paths.manifest)
    assert manifest.torch_version and manifest.torch_git_commit
    assert manifest.machine.cpu_model and manifest.machine.cpu_count
    assert "MALLOC_MMAP_THRESHOLD_" not in manifest.config.env  # no RSS-based memory process any more
    # The default allocator is PyTorch's CPU dashboard's: recorded by soname in the series, by path as run.
    assert manifest.config.env["MALLOC_CONF"].startswith("oversize_threshold:1,")
    preloaded = [Path(p) for p in manifest.environment["LD_PRELOAD"].split(":")]
    assert [p.name for p in preloaded] == manifest.config.env["LD_PRELOAD"].split(":") and all(map(Path.is_file,
                                                                                                 preloaded))
    assert manifest.start_time is not None and manifest.end_time is not None
    errors = manifest.model_errors
    assert set(errors) == {"raises", "aborts", "missing_dependency", "hangs"}  # verdicts are not errors
    assert "always raises" in errors["raises"]
    assert "SIGABRT" in errors["aborts"]
    assert "perfdash_no_such_module" in errors["missing_dependency"]
    assert "timed out" in errors["hangs"]
    samples = {s.name: s for s in read_samples(statuses.paths.samples)}
    assert {"tiny_mlp", "perturbed", "tiny_mlp_after_hang"} <= set(samples)
    assert len(samples["tiny_mlp"].eager_ms) == len(samples["tiny_mlp"].compiled_ms) == 3


def test_rerunning_a_finished_run_does_nothing(statuses: RunReport) -> None:
    before = statuses.paths.performance.read_text(), statuses.paths.accuracy.read_text()
    again = run_suite(RunOptions(suite="torchbench", models_file=DATA / "statuses.toml", backend="aot_eager",
                                 repeat=3, timeout_s=TIMEOUT_S, output_dir=statuses.paths.performance.parent))
    assert again.ran == ()
    assert (again.paths.performance.read_text(), again.paths.accuracy.read_text()) == before
    assert again.summary == statuses.summary


def test_an_interrupted_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    def options(pattern: str) -> RunOptions:
        return RunOptions(suite="torchbench", models_file=DATA / "statuses.toml", backend="eager", repeat=2,
                          timeout_s=TIMEOUT_S, output_dir=tmp_path, filters=(pattern,), performance=True)

    first = run_suite(options("^tiny_mlp$"))  # as if the run stopped after its first model
    assert first.ran == ("tiny_mlp",)
    first_row = first.paths.performance.read_text().splitlines()[1]
    resumed = run_suite(options("^tiny_mlp"))
    assert resumed.ran == ("tiny_mlp_after_hang",)
    lines = resumed.paths.performance.read_text().splitlines()
    assert lines[1] == first_row
    assert [line.split(",")[1] for line in lines[1:]] == ["tiny_mlp", "tiny_mlp_after_hang"]
    assert not resumed.paths.accuracy.exists()  # --performance only
    assert json.loads(resumed.paths.manifest.read_text())["start_time"] == \
        json.loads(first.paths.manifest.read_text())["start_time"]


def test_a_run_asked_for_another_torch_stops_before_any_model(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    version, _ = installed_torch()
    for flag in (["--torch", "2.13.0"], []):  # the flag, or the variable the runner images set
        env = {} if flag else {"PERFDASH_TORCH_SPEC": "2.13.0"}
        with pytest.MonkeyPatch.context() as patch:
            for key, value in env.items():
                patch.setenv(key, value)
            code = main(["run", "--suite", "timm_models", "--models-file", str(DATA / "tiny_real.toml"), "--only",
                         "tiny_mlp", *flag, "--output-dir", str(tmp_path), "--no-progress"])
        assert code == 2
        error = capsys.readouterr().err
        assert "asked for torch 2.13.0" in error and version in error and "nothing was run" in error
        assert list(tmp_path.iterdir()) == []


def test_perfdash_run_on_tiny_real_models(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """timm and transformers models built by the suites' own builders (tiny configs), compiled by Inductor; peak
    memory measured by the timing worker itself."""
    workers: list[str] = []

    forked = ForkServer.run

    def counted_run(server, job, *args, **kwargs):  # type: ignore[no-untyped-def]
        workers.append(job.spec.name)
        return forked(server, job, *args, **kwargs)

    monkeypatch.setattr(ForkServer, "run", counted_run)
    version, commit = installed_torch()
    asked = f"{version.split('+')[0]}@{commit[:12]}"  # the torch of this venv, as a build would name it
    code = main(["run", "--suite", "timm_models", "--models-file", str(DATA / "tiny_real.toml"), "-x", "tiny_mlp",
                 "--warmup", "3",
                 "--repeat", "5", "--torch", asked,
                 "--timeout", "300", "--output-dir", str(tmp_path), "--no-progress"])
    assert code == 0
    manifest = json.loads((tmp_path / "inductor_timm_models_float32_inference_cpu_manifest.json").read_text())
    assert (manifest["torch_requested"], manifest["torch_version"], manifest["torch_git_commit"]) == (
        asked, version, commit)
    printed = capsys.readouterr().out
    assert "100%, 4/4" in printed and "inductor_timm_models_float32_inference_cpu" in printed
    # one worker per model, no other
    assert sorted(workers) == ["BertForMaskedLM", "big_weight", "resnet10t", "wide_linear"]
    acc = {r.name: r.accuracy for r in read_accuracy_csv(tmp_path / "inductor_timm_models_float32_inference_cpu_"
                                                                   "accuracy.csv")}
    assert acc == {"resnet10t": "pass", "BertForMaskedLM": "pass", "wide_linear": "pass", "big_weight": "pass"}
    perf = {r.name: r for r in read_performance_csv(tmp_path / "inductor_timm_models_float32_inference_cpu_"
                                                               "performance.csv")}
    resnet = perf["resnet10t"]
    assert resnet.speedup > 0 and resnet.compilation_latency is not None and resnet.compilation_latency > 0
    # PyTorch's columns: the worker's resident memory after each warm-up (torch and the libraries are in it).
    for row in perf.values():
        assert row.eager_peak_mem is not None and row.eager_peak_mem > 0.1, row
        assert row.dynamo_peak_mem is not None and row.dynamo_peak_mem > 0.1, row
        assert row.compression_ratio == pytest.approx(row.eager_peak_mem / row.dynamo_peak_mem, rel=1e-3)
    weight_gb = 4096 * 8192 * 4 / 10**9
    big, wide = perf["big_weight"], perf["wide_linear"]
    # As in PyTorch's harness: the loaded model, the timed copy and (eager warm-up) the warm-up's copy are alive, three
    # weights in the eager reading and two in the compiled one (bounds with room for the allocator).
    assert big.eager_peak_mem - wide.eager_peak_mem > 1.8 * weight_gb  # type: ignore[operator]
    assert big.dynamo_peak_mem - wide.dynamo_peak_mem > 0.9 * weight_gb  # type: ignore[operator]
    # perfdash's activation peak, in its own samples file: one warm call's memory, weights excluded.
    samples = {s.name: s for s in read_samples(tmp_path / "inductor_timm_models_float32_inference_cpu_samples.jsonl")}
    wide_act = samples["wide_linear"]
    output_gb = 8 * 65536 * 4 / 10**9
    assert wide_act.eager_activation_peak_mem is not None and wide_act.dynamo_activation_peak_mem is not None
    # eager also holds relu's input
    assert output_gb <= wide_act.dynamo_activation_peak_mem <= wide_act.eager_activation_peak_mem < 4 * output_gb
    assert wide_act.activation_ratio is not None and 1.0 <= wide_act.activation_ratio <= 3.0
    big_act = samples["big_weight"]
    assert big_act.eager_activation_peak_mem is not None and big_act.eager_activation_peak_mem < 0.1 * weight_gb
    assert big_act.dynamo_activation_peak_mem is not None and big_act.dynamo_activation_peak_mem < 0.1 * weight_gb
    manifest = Manifest.read(tmp_path / "inductor_timm_models_float32_inference_cpu_manifest.json")
    assert manifest.config.env["TORCHINDUCTOR_FREEZING"] == "1"
    assert "timm" in manifest.suite_versions
    assert manifest.model_errors == {}
    assert manifest.config.warmup == 3
    assert "RSS" in manifest.memory_definitions["peak_memory"]
    assert "activation_peak" in manifest.memory_definitions


def test_training_single_thread(tmp_path: Path) -> None:
    report = run_suite(RunOptions(suite="huggingface", models_file=DATA / "tiny_real.toml", only="tiny_mlp",
                                  mode="training", threads=1, repeat=3, timeout_s=300, output_dir=tmp_path))
    assert report.paths.performance.name == "inductor_huggingface_float32_training_cpu_performance.csv"
    [outcome] = report.outcomes
    assert outcome.status == "pass", outcome.error
    assert outcome.performance is not None and outcome.performance.speedup > 0
    assert report.manifest.config.env["OMP_NUM_THREADS"] == "1"
    assert report.manifest.config.thread_config == "single-thread"
    assert "TORCHINDUCTOR_FREEZING" not in report.manifest.config.env
    # samples/s of each side: the batch over the median step, the compiled one consistent with the CSV's latency
    [samples] = report.samples
    batch = outcome.performance.batch_size
    assert samples.eager_throughput == pytest.approx(batch * 1000 / statistics.median(samples.eager_ms))
    assert samples.compiled_throughput == pytest.approx(batch * 1000 / outcome.performance.abs_latency, rel=1e-5)
    console = Console(width=200, record=True)
    console.print(render(report.config, report.summary, report.results, report.samples))
    assert EAGER_THROUGHPUT.text(samples.eager_throughput) in console.export_text()


def test_an_accuracy_only_run_fills_the_graph_counters(tmp_path: Path) -> None:
    report = run_suite(RunOptions(suite="torchbench", models_file=DATA / "statuses.toml", only="tiny_mlp",
                                  backend="eager", accuracy=True, timeout_s=TIMEOUT_S, output_dir=tmp_path))
    assert not report.paths.performance.exists()
    lines = report.paths.accuracy.read_text().splitlines()
    assert lines[0] == ACC_HEADER
    [row] = read_accuracy_csv(report.paths.accuracy)
    assert row.accuracy == "pass"
    assert row.stats.calls_captured and row.stats.unique_graphs == 1 and row.stats.fallbacks_to_eager == 0
    assert row.compilation_latency is not None and row.compilation_latency > 0
