"""TensorRT (worker side, CUDA only): Torch-TensorRT's ``torch.compile`` backend when installed, else ONNX Runtime's
TensorRT execution provider (runner.backends.tensorrt_route decides, the manifest records which).

Not run on this project's CPU machines: the code path is exercised up to the parent's check, which refuses the
backend on ``--device cpu``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from runner.backends import onnx, tensorrt_route


def build(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
          device: str) -> tuple[Callable[..., Any], dict[str, str]]:
    if tensorrt_route() == "torch_tensorrt":
        import torch_tensorrt  # noqa: F401 - registers the "tensorrt" backend with torch.compile

        return torch.compile(module, backend="tensorrt"), {"integration": "torch_tensorrt"}
    run, notes = onnx.build(module, args, kwargs, device, "TensorrtExecutionProvider", quantize=None)
    return run, {**notes, "integration": "onnxruntime_trt"}
