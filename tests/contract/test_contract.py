from __future__ import annotations

from pathlib import Path

import pytest

from perfdash.contract import (
    AccuracyRow,
    ContractError,
    PerformanceRow,
    ResultFileName,
    append_row,
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
