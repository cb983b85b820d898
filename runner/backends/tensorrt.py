"""TensorRT (worker side, CUDA only): Torch-TensorRT when installed, else ONNX Runtime's TensorRT execution provider
(runner.backends.tensorrt_route decides, the manifest records which).

The float16 series builds float16 engines: Torch-TensorRT is asked for ``enabled_precisions={torch.float16}`` (its
default is float32 alone, and a float16 model would then be built in float32 layers where TensorRT chooses), ONNX
Runtime's provider for ``trt_fp16_enable``. Each build is checked against the precision the compiled module reports
(``precision_error``): a float16 series whose engines report no float16 fails the model instead of timing float32.

Torch-TensorRT runs as its ``torch.compile`` backend, called through a wrapper that keeps the modules it builds: their
TensorRT submodules carry the settings they were built with (``settings.enabled_precisions``). Not run on this
project's CPU machines (no GPU has been lent yet): the parent's check refuses the backend on ``--device cpu``;
tests/runner/test_tensorrt.py runs where torch_tensorrt imports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from runner.backends import onnx, tensorrt_route

# The engine precision each dtype's series asks TensorRT for (the manifest's settings say the same).
PRECISIONS: dict[str, str] = {"float32": "fp32", "float16": "fp16"}


def precision_name(value: Any) -> str:
    """``torch.float16``, Torch-TensorRT's ``dtype.f16``/``dtype.half``, "fp16" -> "fp16"; the float32 spellings ->
    "fp32"; anything else as written."""
    text = str(value).lower().rsplit(".", 1)[-1]
    if text in ("float16", "half", "f16", "fp16"):
        return "fp16"
    if text in ("float32", "float", "f32", "fp32"):
        return "fp32"
    return text


def precision_error(dtype: str, reported: Iterable[str]) -> str | None:
    """Why the engines do not match the series (None when they do): a float16 series needs fp16 among the precisions
    the compiled module reports; a float32 one must not have it (TensorRT would then be free to compute in fp16)."""
    names = set(reported)
    if not names:
        return "the compiled module reports no engine precision"
    wanted = PRECISIONS.get(dtype, dtype)
    if wanted == "fp16" and "fp16" not in names:
        return f"a float16 series built engines of precision {', '.join(sorted(names))}, not fp16"
    if wanted == "fp32" and "fp16" in names:
        return "a float32 series built engines that may compute in fp16"
    return None


def torch_tensorrt_precisions(compiled: torch.nn.Module) -> set[str]:
    """The precisions the TensorRT submodules of a Torch-TensorRT module were built with (each keeps its
    CompilationSettings as ``settings``)."""
    found: set[str] = set()
    for _, sub in compiled.named_modules():
        enabled = getattr(getattr(sub, "settings", None), "enabled_precisions", None)
        if enabled:
            found.update(precision_name(p) for p in enabled)
    return found


def _torch_tensorrt(module: torch.nn.Module, dtype: str) -> tuple[Callable[..., Any], dict[str, str]]:
    """Torch-TensorRT's ``torch.compile`` backend, asked for the series' precision; the first call (the compiled
    warm-up: compilation) checks what the modules it built report."""
    import torch_tensorrt  # noqa: F401 - registers the "tensorrt" backend with torch.compile

    # Callable[..., Any]: torch types a backend without the options Torch-TensorRT's takes
    trt_backend: Callable[..., Any] = torch._dynamo.lookup_backend("tensorrt")
    options = {"enabled_precisions": {torch.float16 if dtype == "float16" else torch.float32}}
    built: list[Any] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        out = trt_backend(gm, example_inputs, options=options)
        built.append(out)
        return out

    compiled = torch.compile(module, backend=backend)
    notes = {"integration": "torch_tensorrt"}
    checked: list[bool] = []

    def run(*args: Any, **kwargs: Any) -> Any:
        out = compiled(*args, **kwargs)
        if not checked:
            reported = set().union(*(torch_tensorrt_precisions(m) for m in built if isinstance(m, torch.nn.Module)))
            error = precision_error(dtype, reported)
            if error is not None:
                raise RuntimeError(f"Torch-TensorRT: {error}")
            notes["engine_precision"] = ",".join(sorted(reported))
            checked.append(True)
        return out

    return run, notes


def build(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], device: str,
          dtype: str = "float32") -> tuple[Callable[..., Any], dict[str, str]]:
    if tensorrt_route() == "torch_tensorrt":
        return _torch_tensorrt(module, dtype)
    run, notes = onnx.build(module, args, kwargs, device, "TensorrtExecutionProvider", quantize=None, dtype=dtype)
    error = precision_error(dtype, [notes.get("engine_precision", "")] if notes.get("engine_precision") else [])
    if error is not None:
        raise RuntimeError(f"ONNX Runtime TensorrtExecutionProvider: {error}")
    return run, {**notes, "integration": "onnxruntime_trt"}
