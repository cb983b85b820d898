from __future__ import annotations

from pathlib import Path

import pytest

from perfdash.contract import (
    AccuracyRow,
    ContractError,
    GraphStats,
    PerformanceRow,
    ResultFileName,
    append_row,
    header_for,
    join_results,
    parse_accuracy_csv,
    parse_performance_csv,
    read_performance_csv,
)


@pytest.mark.parametrize(
    ("name", "backend", "variant", "suite", "dtype", "mode", "device", "kind"),
    [
        ("inductor_torchbench_float32_inference_cpu_performance.csv", "inductor", "", "torchbench", "float32",
         "inference", "cpu", "performance"),
        ("inductor_no_cudagraphs_timm_models_amp_training_cuda_accuracy.csv", "inductor", "no_cudagraphs",
         "timm_models", "amp", "training", "cuda", "accuracy"),
        ("aot_eager_huggingface_bfloat16_inference_cuda_performance.csv", "aot_eager", "", "huggingface", "bfloat16",
         "inference", "cuda", "performance"),
        ("inductor_cpp_wrapper_hf_vision_float16_inference_cuda_performance.csv", "inductor", "cpp_wrapper",
         "hf_vision", "float16", "inference", "cuda", "performance"),
    ],
)
def test_parse_file_names(name, backend, variant, suite, dtype, mode, device, kind):
    parsed = ResultFileName.parse(name)
    assert (parsed.key.backend, parsed.key.variant, parsed.key.suite) == (backend, variant, suite)
    assert (parsed.key.dtype, parsed.key.mode, parsed.key.device, parsed.kind) == (dtype, mode, device, kind)
    assert parsed.key.filename(kind) == name


@pytest.mark.parametrize("name", ["inductor_float32_inference_cpu_performance.csv", "x.txt",
                                  "inductor_torchbench_float32_sideways_cpu_performance.csv"])
def test_bad_file_names_are_rejected(name):
    with pytest.raises(ContractError):
        ResultFileName.parse(name)


def test_round_trip_with_failure_row(tmp_path: Path):
    path = tmp_path / "inductor_torchbench_float32_inference_cpu_performance.csv"
    ok = PerformanceRow(dev="cpu", name="resnet18", batch_size=4, speedup=1.5, abs_latency=3.25,
                        compilation_latency=20.0, compression_ratio=1.2, eager_peak_mem=0.02, dynamo_peak_mem=0.015)
    append_row(path, ok)
    append_row(path, PerformanceRow.failure("cpu", "broken"))
    lines = path.read_text().splitlines()
    assert lines[0].startswith("dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,"
                               "eager_peak_mem,dynamo_peak_mem")
    assert lines[2] == "cpu,broken,0,0.0,0.0"
    rows = read_performance_csv(path)
    assert rows[0] == ok
    assert rows[1].is_failure and rows[1].speedup == 0.0


def test_errors_name_line_and_column():
    header = (b"dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,"
              b"eager_peak_mem,dynamo_peak_mem")
    data = header + b"\ncpu,a,1,1.2,3.0,1,1,1,1\ncpu,b,1,fast,3.0,1,1,1,1\n"
    with pytest.raises(ContractError) as info:
        parse_performance_csv(data, "f.csv")
    assert (info.value.file, info.value.line, info.value.column) == ("f.csv", 3, "speedup")


def test_missing_column_empty_and_encoding():
    with pytest.raises(ContractError, match="abs_latency"):
        parse_performance_csv(b"dev,name,batch_size,speedup\ncpu,a,1,1.0\n", "f.csv")
    with pytest.raises(ContractError, match="empty"):
        parse_performance_csv(b"", "f.csv")
    with pytest.raises(ContractError, match="UTF-8") as info:
        parse_accuracy_csv(b"dev,name,batch_size,accuracy\ncpu,\xff\xfe,1,pass\n", "g.csv")
    assert info.value.line == 2


def test_status_shape_and_unknown_status():
    rows = parse_accuracy_csv(b"dev,name,batch_size,accuracy\ncpu,a,1,pass\ncpu,b,1,brand_new_status\n", "a.csv")
    assert [r.accuracy for r in rows] == ["pass", "brand_new_status"]
    assert not rows[1].is_known_status
    with pytest.raises(ContractError) as info:
        parse_accuracy_csv(b"dev,name,batch_size,accuracy\ncpu,a,1,0.93\n", "a.csv")
    assert info.value.column == "accuracy"


def test_join_gates_on_accuracy():
    perf = [PerformanceRow(dev="cpu", name=n, batch_size=1, speedup=s, abs_latency=1.0, compilation_latency=1.0)
            for n, s in (("a", 1.5), ("b", 2.0), ("c", 1.1))]
    acc = [AccuracyRow(dev="cpu", name="a", batch_size=1, accuracy="pass"),
           AccuracyRow(dev="cpu", name="b", batch_size=1, accuracy="fail_accuracy")]
    joined = {r.name: r for r in join_results(perf, acc)}
    assert joined["a"].gated_speedup == 1.5
    assert joined["b"].gated_speedup == 0.0
    assert joined["c"].gated_speedup == 0.0  # missing from the accuracy file: not passing
    assert {r.name: r.gated_speedup for r in join_results(perf, [])} == {"a": 1.5, "b": 2.0, "c": 1.1}


def test_rows_reject_impossible_values():
    with pytest.raises(ValueError):
        PerformanceRow(dev="cpu", name="a", batch_size=1, speedup=-1.0, abs_latency=1.0)
    with pytest.raises(ValueError):
        PerformanceRow(dev="cpu", name="a", batch_size=1, speedup=float("nan"), abs_latency=1.0)


# PyTorch's current headers, written out by hand from benchmarks/dynamo/common.py (pytorch/pytorch main): the
# performance row of speedup_experiment (dev, name, batch_size, speedup, abs_latency, then compilation_latency,
# compression_ratio, eager_peak_mem, dynamo_peak_mem, then the keys of get_dynamo_stats in order) and the accuracy
# row of BenchmarkRunner._write_accuracy_row (dev, name, batch_size, accuracy, the same counters, then
# compilation_latency).
PYTORCH_PERFORMANCE_HEADER = (
    "dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,eager_peak_mem,dynamo_peak_mem,"
    "calls_captured,unique_graphs,fallbacks_to_eager,graph_breaks,unique_graph_breaks,autograd_captures,"
    "autograd_compiles,cudagraph_skips"
)
PYTORCH_ACCURACY_HEADER = (
    "dev,name,batch_size,accuracy,calls_captured,unique_graphs,fallbacks_to_eager,graph_breaks,unique_graph_breaks,"
    "autograd_captures,autograd_compiles,cudagraph_skips,compilation_latency"
)


def test_headers_are_pytorch_current_ones(tmp_path: Path):
    assert ",".join(header_for("performance")) == PYTORCH_PERFORMANCE_HEADER
    assert ",".join(header_for("accuracy")) == PYTORCH_ACCURACY_HEADER
    stats = GraphStats(calls_captured=40, unique_graphs=2, graph_breaks=1, unique_graph_breaks=1, fallbacks_to_eager=3,
                       autograd_captures=0, autograd_compiles=0, cudagraph_skips=5)
    perf_path, acc_path = tmp_path / "p.csv", tmp_path / "a.csv"
    perf = PerformanceRow(dev="cpu", name="m", batch_size=4, speedup=1.5, abs_latency=3.25, compilation_latency=20.0,
                          compression_ratio=1.2, eager_peak_mem=0.02, dynamo_peak_mem=0.015, stats=stats)
    acc = AccuracyRow(dev="cpu", name="m", batch_size=4, accuracy="pass", stats=stats, compilation_latency=7.5)
    append_row(perf_path, perf)
    append_row(acc_path, acc)
    assert perf_path.read_text().splitlines() == [
        PYTORCH_PERFORMANCE_HEADER, "cpu,m,4,1.500000,3.250000,20.000000,1.200000,0.020000,0.015000,40,2,3,1,1,0,0,5"]
    assert acc_path.read_text().splitlines() == [PYTORCH_ACCURACY_HEADER, "cpu,m,4,pass,40,2,3,1,1,0,0,5,7.500000"]
    assert read_performance_csv(perf_path) == [perf]
    assert parse_accuracy_csv(acc_path.read_bytes(), "a.csv") == [acc]


def test_files_with_older_headers_still_read():
    """Before the last four counters (and the accuracy row's compile time) existed, files ended earlier."""
    old_perf = (b"dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,eager_peak_mem,"
                b"dynamo_peak_mem,calls_captured,unique_graphs,graph_breaks,unique_graph_breaks\n"
                b"cpu,m,4,1.5,3.0,20.0,1.2,0.02,0.015,40,2,1,1\n")
    [row] = parse_performance_csv(old_perf, "old.csv")
    assert (row.stats.calls_captured, row.stats.graph_breaks, row.stats.unique_graph_breaks) == (40, 1, 1)
    assert row.stats.fallbacks_to_eager is None and row.stats.cudagraph_skips is None
    old_acc = b"dev,name,batch_size,accuracy,calls_captured,unique_graphs,graph_breaks,unique_graph_breaks\n" \
              b"cpu,m,4,pass,40,2,1,1\n"
    [acc] = parse_accuracy_csv(old_acc, "old.csv")
    assert acc.stats.unique_graphs == 2 and acc.compilation_latency is None
    [bare] = parse_accuracy_csv(b"dev,name,batch_size,accuracy\ncpu,m,4,pass\n", "bare.csv")
    assert bare.stats == GraphStats() and bare.compilation_latency is None
