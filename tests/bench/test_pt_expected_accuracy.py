"""bench.pt_expected_accuracy's comparison: perfdash's accuracy CSV against an expected-accuracy file in PyTorch's
format (both written here; PyTorch's own files are never part of the repository)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench.pt_expected_accuracy import Outcome, compare, error_line, main, read_outcomes, report, shares

# PyTorch writes its expected files with blank lines between rows, and the huggingface one with a recompiles column.
EXPECTED = ("name,accuracy,graph_breaks,recompiles\n\n\n\nalpha,pass,0,0\n\n\n\nbeta,pass,4,0\n\n\n\n"
            "gamma,pass_due_to_skip,0,0\n\n\n\ndelta,pass,0,0\n\n\n\nepsilon,pass,0,0\n\n\n\nzeta,pass,0,0\n")
# perfdash's accuracy CSV (the contract's columns, a failure row as PyTorch writes it).
ACTUAL = ("dev,name,batch_size,accuracy,calls_captured,unique_graphs,graph_breaks,unique_graph_breaks,"
          "autograd_captures,autograd_compiles,cudagraph_skips,compilation_latency\n"
          "cpu,alpha,8,pass,10,1,0,0,0,0,0,1.5\n"
          "cpu,beta,8,pass,10,3,2,2,0,0,0,1.5\n"
          "cpu,gamma,8,pass_due_to_skip,0,0,0,0,0,0,0,0\n"
          "cpu,delta,8,fail_accuracy,10,1,0,0,0,0,0,1.5\n"
          "cpu,zeta,8,eager_fail_to_run,0,0,0,0,0,0,0,0\n")


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_reads_both_formats(tmp_path: Path) -> None:
    expected = read_outcomes(write(tmp_path / "e.csv", EXPECTED))
    assert expected["beta"] == Outcome("pass", 4) and len(expected) == 6
    actual = read_outcomes(write(tmp_path / "a.csv", ACTUAL))
    assert actual["beta"] == Outcome("pass", 2) and actual["zeta"] == Outcome("eager_fail_to_run", 0)
    with pytest.raises(SystemExit, match="no accuracy column"):
        read_outcomes(write(tmp_path / "x.csv", "name,speedup\nalpha,1.2\n"))


def test_every_disagreement_has_its_reason(tmp_path: Path) -> None:
    expected = read_outcomes(write(tmp_path / "e.csv", EXPECTED))
    actual = read_outcomes(write(tmp_path / "a.csv", ACTUAL))
    in_perfdash = {"alpha", "beta", "gamma", "delta", "zeta"}  # epsilon: not in perfdash's list
    errors = {"zeta": "RuntimeError: boom"}
    rows = {r.name: r for r in compare(expected, actual, in_perfdash, errors)}
    assert rows["alpha"].equal and rows["gamma"].equal and not rows["alpha"].reason
    assert rows["beta"].status_equal and not rows["beta"].breaks_equal
    assert rows["beta"].reason == "graph breaks 2 where PyTorch expects 4"
    assert rows["delta"].reason == "status fail_accuracy" and not rows["delta"].status_equal
    assert rows["epsilon"].actual is None and rows["epsilon"].reason == "not in perfdash's list for this suite"
    assert rows["zeta"].reason == "status eager_fail_to_run: RuntimeError: boom"
    sh = shares(list(rows.values()))
    assert (sh.models, sh.status_equal, sh.breaks_equal, sh.both_equal) == (6, 3, 4, 2)


def test_a_listed_model_without_a_row(tmp_path: Path) -> None:
    rows = compare({"alpha": Outcome("pass", 0)}, {}, {"alpha"}, {"alpha": "TimeoutError: model"})
    assert rows[0].reason == "no accuracy row from perfdash: TimeoutError: model"
    assert not rows[0].equal


def test_error_line_is_the_last_exception_of_the_log(tmp_path: Path) -> None:
    log = write(tmp_path / "m.log", "Traceback (most recent call last):\n  File x\nValueError: first\n"
                                    "later\ntorch._dynamo.exc.Unsupported: graph break\nbye\n")
    assert error_line(log) == "torch._dynamo.exc.Unsupported: graph break"
    assert error_line(tmp_path / "missing.log") == ""


def test_report_names_the_file_and_commit(tmp_path: Path) -> None:
    expected = read_outcomes(write(tmp_path / "e.csv", EXPECTED))
    actual = read_outcomes(write(tmp_path / "a.csv", ACTUAL))
    rows = compare(expected, actual, set(expected) - {"epsilon"}, {})
    args = argparse.Namespace(suite="timm_models", expected=tmp_path / "e.csv", expected_commit="abc123",
                              model_list="default", results_dir=tmp_path)
    text = report(args, rows, (1.0, 2.0), 10.0)
    assert "pytorch/pytorch at abc123" in text and str(tmp_path / "e.csv") in text
    assert "status 3/6 (50%)" in text and "both 2/6 (33%)" in text
    assert "| epsilon | pass | – | 0 / – | not in perfdash's list for this suite |" in text
    assert "| alpha |" not in text  # equal rows are not disagreements


def test_main_compares_an_earlier_run_without_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--results: perfdash's real timm list decides what is missing; nothing is run."""
    expected = write(tmp_path / "e.csv", "name,accuracy,graph_breaks\nmobilenetv2_100,pass,0\n"
                                         "ghostnet_100,pass,0\nnot_a_perfdash_model,pass,0\nmobilenetv3_large_100,pass,0\n")
    results = tmp_path / "out"
    (results / "logs" / "run").mkdir(parents=True)
    write(results / "x_accuracy.csv", "dev,name,batch_size,accuracy,graph_breaks\ncpu,mobilenetv2_100,8,pass,0\n"
                                      "cpu,ghostnet_100,8,fail_to_run,0\ncpu,mobilenetv3_large_100,8,eager_fail_to_run,\n")
    write(results / "logs" / "run" / "ghostnet_100.log", "RuntimeError: compile failed\n")
    write(results / "logs" / "run" / "mobilenetv3_large_100.log", "=== mobilenetv3_large_100 ===\n")  # died silently
    write(results / "x_manifest.json", '{"model_errors": {"mobilenetv3_large_100": '
                                       '"worker killed by SIGKILL in phase eager_validate\\n=== header ==="}}')
    assert main(["--suite", "timm_models", "--expected", str(expected), "--expected-commit", "f00",
                 "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert "status 1/4 (25%)" in out
    assert ("| mobilenetv3_large_100 | pass | eager_fail_to_run | 0 / None | status eager_fail_to_run: worker killed "
            "by SIGKILL in phase eager_validate |") in out
    assert "| ghostnet_100 | pass | fail_to_run | 0 / 0 | status fail_to_run: RuntimeError: compile failed |" in out
    assert "| not_a_perfdash_model | pass | – | 0 / – | not in perfdash's list for this suite |" in out


def test_torchbench_models_that_cannot_run_here_are_listed_apart(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """--suite torchbench over the extended list: a model whose input data, pretrained weights or requirement this
    machine lacks is listed with perfdash's reason and left out of the share over the models that can run here; a
    load error of another kind stays a disagreement."""
    expected = write(tmp_path / "e.csv", "name,accuracy,graph_breaks\n\n\n\nlennard_jones,pass,0\n\n\n\n"
                                         "speech_transformer,pass,10\n\n\n\nalexnet,pass,0\n\n\n\n"
                                         "basic_gnn_gcn,pass,6\n\n\n\ndcgan,pass,0\n\n\n\ntts_angular,pass,2\n")
    results = tmp_path / "out"
    results.mkdir()
    write(results / "inductor_torchbench_float32_inference_cpu_accuracy.csv",
          "dev,name,batch_size,accuracy,graph_breaks\ncpu,lennard_jones,4,pass,0\ncpu,tts_angular,4,pass,1\n"
          "cpu,speech_transformer,0,model_fail_to_load,\ncpu,alexnet,0,model_fail_to_load,\n"
          "cpu,basic_gnn_gcn,0,model_fail_to_load,\ncpu,dcgan,0,model_fail_to_load,\n")
    write(results / "inductor_torchbench_float32_inference_cpu_manifest.json", json.dumps({"model_errors": {
        "speech_transformer": "load: ModelLoadError: needs TorchBench input data speech_transformer_inputs.tar.gz "
                              "(downloaded by its install.py; not at /x)",
        "alexnet": "load: URLError: <urlopen error [Errno -2] Name or service not known>",
        "basic_gnn_gcn": "load: ModelLoadError: basic_gnn_gcn needs the module 'torch_geometric', not installed here",
        "dcgan": "load: TypeError: bad argument"}}))
    assert main(["--suite", "torchbench", "--model-list", "extended", "--expected", str(expected),
                 "--expected-commit", "f00", "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert "Equal, over 6 expected models: status 2/6 (33%)" in out
    assert "over the 3 that can run here: status 2/3 (67%), graph breaks 1/3 (33%), both 1/3 (33%)" in out
    table, apart = out.split("Cannot run here")
    assert "| dcgan | pass | model_fail_to_load | 0 / None | status model_fail_to_load: load: TypeError" in table
    assert "| tts_angular | pass | pass | 2 / 1 | graph breaks 1 where PyTorch expects 2 |" in table
    assert "speech_transformer" not in table and "alexnet" not in table
    assert "| speech_transformer | pass | load: ModelLoadError: needs TorchBench input data" in apart
    assert "| alexnet | pass | load: URLError" in apart and "| basic_gnn_gcn | pass |" in apart
