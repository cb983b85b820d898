"""Backends other than Dynamo's own (eager, aot_eager, inductor): what each needs and supports (torch-free).

The parent process checks a run against this table before any work starts (``check``), so a missing library or a
device the backend cannot use is one clear error naming the package to install, never a suite of failed models.
The worker side (runner.backends.onnx, .openvino, .tensorrt) imports torch and the backend's library.

- ``onnxruntime``: the model exported with torch.onnx, run by an ONNX Runtime ``InferenceSession``
  (CPUExecutionProvider on CPU, CUDAExecutionProvider on CUDA). ``--quantize int8-dynamic`` adds ONNX Runtime's
  dynamic int8 quantization of the exported model, as its own series (variant ``int8_dynamic``).
- ``openvino``: OpenVINO's ``torch.compile`` backend (``import openvino.torch``), CPU only here.
- ``tensorrt``: Torch-TensorRT's ``torch.compile`` backend when the wheel for the pinned torch is
  installed, else ONNX Runtime's TensorRT execution provider (onnxruntime-gpu); CUDA only. Which one ran, and the
  engines' precision (float16 engines for the float16 series), is in the manifest.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata

# Dynamo's own backends: no library beyond torch, every device, dtype and mode.
DYNAMO_BACKENDS: tuple[str, ...] = ("eager", "aot_eager", "inductor")
QUANTIZE_CHOICES: tuple[str, ...] = ("int8-dynamic",)

# The Torch-TensorRT wheel built for the pinned torch (torch_tensorrt 2.14.0 requires torch>=2.14,<2.15).
TORCH_TENSORRT_REQUIREMENT = "torch-tensorrt==2.14.0"


class BackendUnavailable(ValueError):
    """A backend that cannot run here; the message says what to install or which flag to change."""


@dataclass(frozen=True, slots=True)
class BackendSpec:
    name: str
    packages: tuple[str, ...]  # distributions whose versions go into the manifest (when installed)
    devices: tuple[str, ...]
    dtypes: tuple[str, ...]
    quantize: tuple[str, ...] = ()
    # Modules the fork server may import before forking (no threads started, no device touched at import).
    preload: tuple[str, ...] = ()
    # Dynamo captures the graph (a torch.compile backend): its graph stats mean what they mean for Inductor.
    dynamo_graph: bool = False
    # Whether torch's allocator sees the backend's memory: ONNX Runtime and OpenVINO allocate their own, so their
    # peak is left empty rather than reported as the few bytes of output torch sees.
    torch_allocator: bool = False
    # Whether a worker may preload jemalloc (--allocator dashboard). OpenVINO may not: with jemalloc preloaded its
    # compiled run frees memory through glibc that jemalloc handed out, and the worker aborts ("munmap_chunk():
    # invalid pointer", "double free or corruption"); with Intel's OpenMP alone it runs.
    jemalloc: bool = True


BACKEND_SPECS: dict[str, BackendSpec] = {
    "onnxruntime": BackendSpec(
        name="onnxruntime", packages=("onnxruntime", "onnxruntime-gpu", "onnxscript", "onnx"),
        devices=("cpu", "cuda"), dtypes=("float32", "float16"), quantize=QUANTIZE_CHOICES,
        # Not onnxruntime itself: its import starts a native thread, which a fork would not carry over (and it
        # imports in 0.07 s here, against onnxscript's 0.8 s).
        preload=("onnxscript", "torch.onnx")),
    # openvino.torch imports in 2.8 s here and starts no thread (its TBB workers start with the first compile), so
    # the fork server takes it: else every model's compile latency would include the import.
    "openvino": BackendSpec(name="openvino", packages=("openvino",), devices=("cpu",),
                            dtypes=("float32", "bfloat16", "float16"), preload=("openvino.torch",),
                            dynamo_graph=True, jemalloc=False),
    "tensorrt": BackendSpec(name="tensorrt", packages=("torch-tensorrt", "tensorrt", "onnxruntime-gpu", "onnxscript"),
                            devices=("cuda",), dtypes=("float32", "float16")),
}
RUNNABLE_BACKENDS: tuple[str, ...] = DYNAMO_BACKENDS + tuple(BACKEND_SPECS)


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def package_versions(backend: str) -> dict[str, str]:
    """Versions of the backend's installed packages, for the manifest."""
    spec = BACKEND_SPECS.get(backend)
    out: dict[str, str] = {}
    for package in spec.packages if spec else ():
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return out


def onnxruntime_providers() -> list[str]:
    """The execution providers of the installed ONNX Runtime (CPU-only wheel: CPUExecutionProvider alone)."""
    import onnxruntime

    return list(onnxruntime.get_available_providers())


def tensorrt_route(has_module: Callable[[str], bool] = installed,
                   providers: Callable[[], list[str]] = onnxruntime_providers) -> str:
    """``torch_tensorrt`` or ``onnxruntime_trt``: which TensorRT integration this machine has, else an error."""
    if has_module("torch_tensorrt"):
        return "torch_tensorrt"
    if has_module("onnxruntime") and "TensorrtExecutionProvider" in providers():
        return "onnxruntime_trt"
    raise BackendUnavailable(
        f"--backend tensorrt: neither Torch-TensorRT nor ONNX Runtime's TensorRT execution provider is installed; "
        f"install {TORCH_TENSORRT_REQUIREMENT} (the wheel for torch 2.14), or onnxruntime-gpu with TensorRT")


def check(backend: str, device: str, dtype: str, mode: str, quantize: str | None, compile_mode: str,
          dynamic_shapes: bool) -> None:
    """Raise BackendUnavailable when ``backend`` cannot run this configuration on this machine."""
    spec = BACKEND_SPECS.get(backend)
    if spec is None:
        if quantize is not None:
            raise BackendUnavailable(f"--quantize {quantize}: only for --backend onnxruntime")
        return
    flag = f"--backend {backend}"
    if device not in spec.devices:
        need = "an NVIDIA GPU (--device cuda)" if spec.devices == ("cuda",) else f"--device {'/'.join(spec.devices)}"
        raise BackendUnavailable(f"{flag} needs {need}; it cannot run on --device {device}")
    if mode != "inference":
        raise BackendUnavailable(f"{flag} measures inference only (--mode inference)")
    if dtype not in spec.dtypes:
        raise BackendUnavailable(f"{flag} supports --dtype {', '.join(spec.dtypes)}, not {dtype}")
    if quantize is not None and quantize not in spec.quantize:
        raise BackendUnavailable(f"--quantize {quantize} is not available for {flag}")
    if compile_mode != "default" or dynamic_shapes:
        raise BackendUnavailable(f"{flag} has no --compile-mode or --dynamic-shapes variants")
    if backend == "onnxruntime":
        if not installed("onnxruntime") or not installed("onnxscript"):
            raise BackendUnavailable(f"{flag}: ONNX Runtime is not installed; install onnxruntime and onnxscript "
                                     "(pip install 'perfdash[backends]'; onnxruntime-gpu on CUDA agents)")
        if device == "cuda" and "CUDAExecutionProvider" not in onnxruntime_providers():
            raise BackendUnavailable(f"{flag} --device cuda: this ONNX Runtime has no CUDAExecutionProvider; "
                                     "install onnxruntime-gpu instead of onnxruntime")
    elif backend == "openvino":
        if not installed("openvino"):
            raise BackendUnavailable(f"{flag}: OpenVINO is not installed; install openvino "
                                     "(pip install 'perfdash[backends]')")
    elif backend == "tensorrt":
        tensorrt_route()
    if device == "cuda":
        from runner.cuda_extras import installed_mismatches  # reads package files: no torch, no GPU

        errors = installed_mismatches(backend)
        if errors:
            raise BackendUnavailable(f"{flag} --device cuda: " + "; ".join(errors))


# OpenVINO's CPU plugin runs fp32 models in bf16 on CPUs with AMX or AVX512-BF16 unless told otherwise: the hint keeps
# a float32 series in float32, as every other backend's float32 is.
OPENVINO_PRECISION_HINT: dict[str, str] = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}


def settings(backend: str, device: str, dtype: str, quantize: str | None) -> dict[str, str]:
    """How the backend is set up for this run (the manifest records it; it is part of the series)."""
    if backend == "onnxruntime":
        out = {"execution_provider": "CUDAExecutionProvider" if device == "cuda" else "CPUExecutionProvider",
               "graph_optimization_level": "ORT_ENABLE_ALL", "session.intra_op.allow_spinning": "0"}
        if quantize == "int8-dynamic":
            out["quantization"] = "onnxruntime.quantization.quantize_dynamic(weight_type=QInt8)"
        return out
    if backend == "openvino":
        return {"integration": "torch.compile(backend='openvino')", "device": "CPU", "aot_autograd": "true",
                "INFERENCE_PRECISION_HINT": OPENVINO_PRECISION_HINT.get(dtype, "f32")}
    if backend == "tensorrt":
        route = tensorrt_route()
        precision = "fp16" if dtype == "float16" else "fp32"  # the engines' precision (runner.backends.tensorrt)
        if route == "torch_tensorrt":
            return {"integration": "torch.compile(backend='tensorrt') (Torch-TensorRT)",
                    "enabled_precisions": precision}
        return {"integration": "ONNX Runtime TensorrtExecutionProvider",
                "execution_provider": "TensorrtExecutionProvider", "trt_fp16_enable": str(precision == "fp16")}
    return {}
