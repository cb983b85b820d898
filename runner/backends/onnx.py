"""ONNX Runtime as a backend (worker side, imports torch): export with torch.onnx, run an ``InferenceSession``.

The exporter that works for the model is used and named in the result: torch.onnx's default (``dynamo=True``,
torch.export + onnxscript) first, the TorchScript-based exporter (``dynamo=False``) when that one fails. The session
is built with every graph optimisation on and as many intra-op threads as torch uses, so eager and ONNX Runtime get
the same cores. What this returns is called like the module and returns the outputs as torch tensors in the order
``runner.accuracy.flatten`` gives the eager outputs (both exporters flatten outputs that way).
"""

from __future__ import annotations

import inspect
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from runner.accuracy import flatten


class ExportError(RuntimeError):
    """Neither exporter could turn the model into ONNX; the message holds both exporters' reasons."""


def export(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], path: Path) -> str:
    """Write the model as ONNX to ``path`` (weights beside it when large); returns the exporter that worked."""
    reasons: list[str] = []
    try:
        program = torch.onnx.export(module, args, kwargs=kwargs or None, dynamo=True, verbose=False)
        assert program is not None  # dynamo=True without a file name always returns the program
        program.save(str(path), external_data=_needs_external_data(module))
        return "torch.onnx.export(dynamo=True)"
    except Exception as exc:  # noqa: BLE001 - any exporter failure: try the other exporter, then report both
        reasons.append(f"dynamo=True: {type(exc).__name__}: {str(exc)[:600]}")
    print(f"torch.onnx dynamo exporter failed, trying the TorchScript exporter: {reasons[0]}", flush=True)
    try:
        torch.onnx.export(module, args, str(path), kwargs=kwargs or None, dynamo=False)
        return "torch.onnx.export(dynamo=False)"
    except Exception as exc:  # noqa: BLE001
        reasons.append(f"dynamo=False: {type(exc).__name__}: {str(exc)[:600]}")
    raise ExportError("the model cannot be exported to ONNX; " + " | ".join(reasons))


# Protobuf's limit on one message: larger models must keep their weights in a file beside the graph.
_PROTOBUF_LIMIT_BYTES = 2**31 - 2**26


def _needs_external_data(module: torch.nn.Module) -> bool:
    """Weights inline when they fit: ONNX Runtime's quantization pre-processing copies the graph file alone."""
    size = sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))
    return size >= _PROTOBUF_LIMIT_BYTES


def quantize_int8_dynamic(source: Path, target: Path) -> None:
    """ONNX Runtime's dynamic quantization (int8 weights, activations quantized at run time), after its recommended
    pre-processing (shape inference and graph clean-up) when that succeeds."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    prepared = source.with_name("preprocessed.onnx")
    try:
        quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
    except Exception as exc:  # noqa: BLE001 - pre-processing is an optimisation; quantizing without it still works
        print(f"quantization pre-processing skipped: {type(exc).__name__}: {exc}", flush=True)
        prepared = source
    quantize_dynamic(str(prepared), str(target), weight_type=QuantType.QInt8)


def quantized_op_count(path: Path) -> int:
    """Nodes that compute in int8 (MatMulInteger, ConvInteger, DynamicQuantizeLinear, ...): 0 means the quantizer
    found nothing to quantize and the "int8" model is the float one."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return sum("Integer" in node.op_type or "Quantize" in node.op_type for node in graph.node)


@dataclass(frozen=True, slots=True)
class _Feed:
    """How the module's call arguments become the session's named inputs."""

    names: tuple[str, ...]
    by_name: bool  # True: session input names are the forward's parameter names; False: flattened order

    def tensors(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
        if self.by_name:
            bound = _bound_tensors(module, args, kwargs)
            return [bound[name] for name in self.names]
        return [t for t in flatten((args, kwargs)) if isinstance(t, torch.Tensor)]


def _bound_tensors(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, torch.Tensor]:
    try:
        bound = inspect.signature(module.forward).bind(*args, **kwargs).arguments
    except (TypeError, ValueError):
        return {}
    return {name: value for name, value in bound.items() if isinstance(value, torch.Tensor)}


def _feed(session: Any, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Feed:
    names = tuple(i.name for i in session.get_inputs())
    if set(names) <= set(_bound_tensors(module, args, kwargs)):
        return _Feed(names, by_name=True)
    count = sum(isinstance(t, torch.Tensor) for t in flatten((args, kwargs)))
    if count != len(names):
        raise RuntimeError(f"the ONNX model takes {len(names)} inputs ({', '.join(names)}) but the module is called "
                           f"with {count} tensors; cannot match them")
    return _Feed(names, by_name=False)


def session_options(threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    # ONNX Runtime's pool spins after each run by default: in the interleaved loop it would take the cores from the
    # eager call that follows (tiny_conv's eager ran 6x slower beside a spinning session here).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def _providers(provider: str, device: str, dtype: str = "float32") -> list[Any]:
    if provider == "TensorrtExecutionProvider":
        # float16 engines for the float16 series (TensorRT's default is float32 alone)
        options = {"device_id": torch.cuda.current_device(), "trt_fp16_enable": dtype == "float16"}
        return [(provider, options), "CUDAExecutionProvider"]
    if provider == "CUDAExecutionProvider":
        return [(provider, {"device_id": torch.cuda.current_device()})]
    return [provider]


def build(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], device: str, provider: str,
          quantize: str | None, dtype: str = "float32") -> tuple[Callable[..., list[torch.Tensor]], dict[str, str]]:
    """Export, optionally quantize, and open a session; returns the callable and notes for the manifest."""
    import onnxruntime as ort

    notes: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="perfdash-onnx-") as tmp:
        path = Path(tmp, "model.onnx")
        with torch.no_grad():
            notes["exporter"] = export(module, args, kwargs, path)
        if quantize == "int8-dynamic":
            quantized = Path(tmp, "model.int8.onnx")
            quantize_int8_dynamic(path, quantized)
            path = quantized
            notes["quantized_ops"] = str(quantized_op_count(path))
        threads = torch.get_num_threads()
        session = ort.InferenceSession(str(path), session_options(threads),
                                       providers=_providers(provider, device, dtype))
    used = session.get_providers()
    if used[0] != provider:
        raise RuntimeError(f"ONNX Runtime did not use {provider} (it chose {', '.join(used)})")
    if provider == "TensorrtExecutionProvider":  # the precision the session reports it builds engines in
        fp16 = session.get_provider_options().get(provider, {}).get("trt_fp16_enable")
        notes["engine_precision"] = "fp16" if str(fp16).lower() in ("1", "true") else "fp32"
    notes.update(execution_provider=used[0], intra_op_num_threads=str(threads))
    feed = _feed(session, module, args, kwargs)
    output_names = [o.name for o in session.get_outputs()]

    def run_on_cpu(*call_args: Any, **call_kwargs: Any) -> list[torch.Tensor]:
        inputs = feed.tensors(module, call_args, call_kwargs)
        outputs = session.run(output_names, {n: t.detach().numpy() for n, t in zip(feed.names, inputs, strict=True)})
        return [torch.from_numpy(o) for o in outputs]

    run_bound = bound_runner(session, feed.names, output_names, device)

    def run_on_cuda(*call_args: Any, **call_kwargs: Any) -> list[torch.Tensor]:
        # As PyTorch's harness runs ONNX Runtime on CUDA: inputs and outputs bound where torch keeps them, so no
        # host copy is timed.
        return run_bound(feed.tensors(module, call_args, call_kwargs))

    return (run_on_cuda if device == "cuda" else run_on_cpu), notes


def bound_runner(session: Any, input_names: tuple[str, ...], output_names: list[str],
                 device: str) -> Callable[[list[torch.Tensor]], list[torch.Tensor]]:
    """Run ``session`` on tensors bound in place (I/O binding) on ``device`` ("cuda" or "cpu"). The outputs are
    allocated by ONNX Runtime on the first call (which learns their shapes through host memory), then bound again on
    every call: the same buffers each call, as PyTorch's harness binds them (the accuracy check copies them).

    Every bound buffer stays referenced until the run returns: binding only records an address, ONNX Runtime reads
    it when it runs, and the contiguous copy of a non-contiguous input, were it dropped when the next input is bound,
    could be freed and its memory handed to the next copy (torch's caching allocator on CUDA, malloc on CPU)."""

    outputs: list[torch.Tensor] = []

    def run(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        binding = session.io_binding()
        bound: list[torch.Tensor] = []  # alive until run_with_iobinding has read them
        for name, tensor in zip(input_names, inputs, strict=True):
            bound.append(tensor.contiguous())
            binding.bind_input(name, device, _device_index(bound[-1]), _numpy_dtype(bound[-1].dtype),
                               list(bound[-1].shape), bound[-1].data_ptr())
        if not outputs:
            for name in output_names:
                binding.bind_output(name, device)
            session.run_with_iobinding(binding)
            outputs.extend(torch.from_numpy(o).to(device) for o in binding.copy_outputs_to_cpu())
            return list(outputs)
        for name, out in zip(output_names, outputs, strict=True):
            binding.bind_output(name, device, _device_index(out), _numpy_dtype(out.dtype), list(out.shape),
                                out.data_ptr())
        session.run_with_iobinding(binding)
        return list(outputs)

    return run


def _device_index(tensor: torch.Tensor) -> int:
    return tensor.device.index or 0


def _numpy_dtype(dtype: torch.dtype) -> Any:
    return torch.empty((), dtype=dtype).numpy().dtype  # bfloat16 never gets here (runner.backends.check)
