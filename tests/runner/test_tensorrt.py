"""TensorRT's float16 series builds float16 engines (runner.backends.tensorrt): the precision the compiled module
reports is checked. The build itself runs only where Torch-TensorRT imports and a GPU is present (not on this
project's machines so far); the check's rules and what it reads from a Torch-TensorRT module are tested everywhere."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from runner.backends import settings
from runner.backends.tensorrt import precision_error, precision_name, torch_tensorrt_precisions


def test_precision_names_and_the_rule() -> None:
    assert {precision_name(v) for v in (torch.float16, "dtype.f16", "dtype.half", "fp16")} == {"fp16"}
    assert {precision_name(v) for v in (torch.float32, "dtype.f32", "dtype.float")} == {"fp32"}
    assert precision_error("float16", {"fp16"}) is None
    assert precision_error("float16", {"fp16", "fp32"}) is None
    assert "not fp16" in str(precision_error("float16", {"fp32"}))
    assert "reports no engine precision" in str(precision_error("float16", set()))
    assert precision_error("float32", {"fp32"}) is None
    assert "fp16" in str(precision_error("float32", {"fp32", "fp16"}))


class _Settings:
    def __init__(self, precisions: set[torch.dtype]) -> None:
        self.enabled_precisions = precisions


class _Engine(torch.nn.Module):
    """What Torch-TensorRT's TensorRT submodules keep: the CompilationSettings they were built with."""

    def __init__(self, precisions: set[torch.dtype]) -> None:
        super().__init__()
        self.settings = _Settings(precisions)


def test_the_precisions_are_read_from_every_tensorrt_submodule() -> None:
    outer = torch.nn.Module()
    outer.add_module("_run_on_acc_0", _Engine({torch.float16}))
    outer.add_module("_run_on_gpu_1", torch.nn.Linear(2, 2))  # a part TensorRT left to torch: no settings
    assert torch_tensorrt_precisions(outer) == {"fp16"}
    assert torch_tensorrt_precisions(torch.nn.Linear(2, 2)) == set()


def test_float16_series_record_float16_engines_in_their_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    import runner.backends as backends

    monkeypatch.setattr(backends, "tensorrt_route", lambda: "onnxruntime_trt")
    assert settings("tensorrt", "cuda", "float16", None)["trt_fp16_enable"] == "True"
    assert settings("tensorrt", "cuda", "float32", None)["trt_fp16_enable"] == "False"


@pytest.mark.skipif(importlib.util.find_spec("torch_tensorrt") is None, reason="torch_tensorrt is not installed")
@pytest.mark.skipif(not torch.cuda.is_available(), reason="Torch-TensorRT builds engines on a GPU; none here")
def test_torch_tensorrt_builds_float16_engines_for_the_float16_series() -> None:
    from runner.backends.tensorrt import _torch_tensorrt

    module = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    module = module.cuda().half().eval()
    run, notes = _torch_tensorrt(module, "float16")
    with torch.no_grad():
        out = run(torch.randn(4, 32, device="cuda", dtype=torch.float16))
    assert out.dtype == torch.float16
    assert "fp16" in notes["engine_precision"].split(",")
