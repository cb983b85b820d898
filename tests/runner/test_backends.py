"""The onnxruntime and openvino backends end to end on tiny real models (real exports, real sessions, real workers),
and the clear errors of a backend that cannot run here."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from perfdash.cli import main
from perfdash.contract import ResultFileName, read_accuracy_csv, read_performance_csv, read_samples
from perfdash.manifest import Manifest
from runner.api import RunReport, run_suite
from runner.backends import BackendUnavailable, check, tensorrt_route
from runner.options import OptionsError, RunOptions, validate

DATA = Path(__file__).parent / "data"
TIMEOUT_S = 180.0  # export + session creation of a tiny model on a busy 2-core machine


def _run(out: Path, backend: str, filters: tuple[str, ...] = (), **extra: object) -> RunReport:
    return run_suite(RunOptions(suite="torchbench", models_file=DATA / "backends.toml", backend=backend, repeat=3,
                                timeout_s=TIMEOUT_S, output_dir=out, filters=filters, **extra))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def onnxruntime_run(tmp_path_factory: pytest.TempPathFactory) -> RunReport:
    return _run(tmp_path_factory.mktemp("ort"), "onnxruntime")


def test_onnxruntime_statuses(onnxruntime_run: RunReport) -> None:
    got = {row.name: row.accuracy for row in read_accuracy_csv(onnxruntime_run.paths.accuracy)}
    assert got == {"tiny_conv": "pass", "two_inputs": "pass", "perturbed_export": "fail_accuracy",
                   "unexportable": "fail_to_run"}


def test_onnxruntime_files_are_named_and_filled_as_pytorchs(onnxruntime_run: RunReport) -> None:
    perf = onnxruntime_run.paths.performance
    assert perf.name == "onnxruntime_torchbench_float32_inference_cpu_performance.csv"
    parsed = ResultFileName.parse(perf.name)
    assert (parsed.key.backend, parsed.key.variant) == ("onnxruntime", "")
    rows = {r.name: r for r in read_performance_csv(perf)}
    ok = rows["tiny_conv"]
    assert ok.speedup > 0 and ok.abs_latency > 0 and ok.compilation_latency is not None
    # On CPU PyTorch's peak is the process's resident set, which holds ONNX Runtime's memory too.
    assert ok.eager_peak_mem and ok.dynamo_peak_mem and ok.compression_ratio
    # perfdash's activation peak replays torch's allocator, which never sees ONNX Runtime's: empty, never 0.
    samples = {s.name: s for s in read_samples(onnxruntime_run.paths.samples)}["tiny_conv"]
    assert samples.eager_activation_peak_mem is not None and samples.dynamo_activation_peak_mem is None
    assert ok.stats.unique_graphs is None  # no Dynamo graph: no graph stats
    assert rows["unexportable"].speedup == 0.0 and rows["unexportable"].batch_size == 0


def test_onnxruntime_manifest_records_packages_and_exporter(onnxruntime_run: RunReport) -> None:
    manifest = Manifest.read(onnxruntime_run.paths.manifest)
    assert manifest.backend is not None and manifest.backend.name == "onnxruntime"
    assert manifest.backend.packages["onnxruntime"] and manifest.backend.packages["onnxscript"]
    assert manifest.suite_versions["onnxruntime"] == manifest.backend.packages["onnxruntime"]
    assert manifest.backend.settings["execution_provider"] == "CPUExecutionProvider"
    assert manifest.backend.models["tiny_conv"]["exporter"] == "torch.onnx.export(dynamo=True)"
    assert manifest.backend.models["two_inputs"]["execution_provider"] == "CPUExecutionProvider"
    # Both exporters' reasons, for the model's log and the dashboard.
    error = manifest.model_errors["unexportable"]
    assert "cannot be exported to ONNX" in error and "dynamo=True" in error and "dynamo=False" in error


def test_onnxruntime_int8_dynamic_is_its_own_series(tmp_path: Path) -> None:
    report = _run(tmp_path, "onnxruntime", filters=("two_inputs",), quantize="int8-dynamic")
    assert report.paths.performance.name == "onnxruntime_int8_dynamic_torchbench_float32_inference_cpu_performance.csv"
    assert ResultFileName.parse(report.paths.performance.name).key.variant == "int8_dynamic"
    # Whether int8 passes the float32 tolerance is the CPU's: ONNX Runtime's U8S8 kernels on AVX2-only (and
    # AVX-512 without VNNI) machines use VPMADDUBSW, whose 16-bit intermediate sums saturate (ONNX Runtime's
    # quantization docs), and on such a CPU the model fails accuracy; with VNNI or AMX it passes. The status is
    # measured either way, and a crash or any other status fails the test.
    assert [(r.name, r.accuracy in ("pass", "fail_accuracy")) for r in read_accuracy_csv(report.paths.accuracy)] == [
        ("two_inputs", True)]
    manifest = Manifest.read(report.paths.manifest)
    assert manifest.config.variant == "int8_dynamic"
    assert manifest.backend is not None and "quantize_dynamic" in manifest.backend.settings["quantization"]
    assert int(manifest.backend.models["two_inputs"]["quantized_ops"]) > 0  # the int8 model really is int8


def test_openvino_runs_and_checks_accuracy(tmp_path: Path) -> None:
    report = _run(tmp_path, "openvino", filters=("tiny_conv", "perturbed_export"))
    assert report.paths.performance.name == "openvino_torchbench_float32_inference_cpu_performance.csv"
    got = {row.name: row.accuracy for row in read_accuracy_csv(report.paths.accuracy)}
    assert got == {"tiny_conv": "pass", "perturbed_export": "fail_accuracy"}
    row = next(r for r in read_performance_csv(report.paths.performance) if r.name == "tiny_conv")
    assert row.speedup > 0 and row.dynamo_peak_mem
    assert row.stats.unique_graphs == 1  # a torch.compile backend: Dynamo's graph stats hold
    manifest = Manifest.read(report.paths.manifest)
    assert manifest.backend is not None and manifest.backend.packages["openvino"]
    assert manifest.backend.settings["INFERENCE_PRECISION_HINT"] == "f32"


def test_tensorrt_on_cpu_fails_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = main(["run", "--suite", "torchbench", "--backend", "tensorrt", "--output-dir", str(out)])
    assert code == 2
    assert "needs an NVIDIA GPU (--device cuda)" in capsys.readouterr().err
    assert not out.exists()


def test_a_missing_tensorrt_names_the_package_to_install() -> None:
    with pytest.raises(BackendUnavailable, match=r"install torch-tensorrt==2\.14\.0"):
        tensorrt_route(has_module=lambda name: False)
    # ONNX Runtime without its TensorRT provider (the CPU wheel here) is no TensorRT either.
    with pytest.raises(BackendUnavailable, match="onnxruntime-gpu"):
        tensorrt_route(has_module=lambda name: name == "onnxruntime", providers=lambda: ["CPUExecutionProvider"])
    assert tensorrt_route(has_module=lambda name: name == "onnxruntime",
                          providers=lambda: ["TensorrtExecutionProvider"]) == "onnxruntime_trt"


@pytest.mark.parametrize(("changes", "message"), [
    ({"backend": "onnxruntime", "mode": "training"}, "inference only"),
    ({"backend": "onnxruntime", "dtype": "bfloat16"}, "supports --dtype float32, float16"),
    ({"backend": "openvino", "quantize": "int8-dynamic"}, "not available for --backend openvino"),
    ({"backend": "inductor", "quantize": "int8-dynamic"}, "only for --backend onnxruntime"),
    ({"backend": "onnxruntime", "compile_mode": "max-autotune"}, "no --compile-mode"),
])
def test_configurations_a_backend_cannot_run_are_refused(changes: dict[str, str], message: str) -> None:
    options = RunOptions(suite="torchbench", models_file=DATA / "backends.toml", **changes)  # type: ignore[arg-type]
    with pytest.raises(OptionsError, match=message):
        validate(options)


def test_onnxruntime_cuda_needs_the_gpu_package() -> None:
    # This machine has the CPU wheel: no CUDAExecutionProvider, and the message says which package has it.
    with pytest.raises(BackendUnavailable, match="install onnxruntime-gpu"):
        check("onnxruntime", "cuda", "float32", "inference", None, "default", False)


def test_openvino_falling_back_to_inductor_is_a_failure() -> None:
    """OpenVINO's backend logs a conversion failure and runs Inductor instead; that must not pass as OpenVINO."""
    import torch

    from runner.backends import openvino

    run, _ = openvino.build(torch.nn.Linear(4, 4).eval(), "float32")
    logging.getLogger("openvino.frontend.pytorch.torchdynamo.backend").debug(
        "Failed in OpenVINO execution: unsupported operation")
    with pytest.raises(openvino.OpenVinoFellBack, match="fell back to Inductor"), torch.no_grad():
        run(torch.randn(2, 4))
    torch._dynamo.reset()
