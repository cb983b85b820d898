"""The worker's entry to the non-Dynamo backends: one compiled callable per model (imports torch)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from runner.backends import settings
from runner.protocol import Job


@dataclass(frozen=True, slots=True)
class BackendModel:
    """The model as the backend runs it, called like the module."""

    run: Callable[..., Any]
    notes: dict[str, str] = field(default_factory=dict)


def build(module: torch.nn.Module, job: Job, args: tuple[Any, ...], kwargs: dict[str, Any]) -> BackendModel:
    """Export or compile ``module`` for ``job.backend``; any failure raises (the model's fail_to_run row)."""
    if job.backend == "onnxruntime":
        from runner.backends import onnx

        provider = settings(job.backend, job.device, job.dtype, job.quantize)["execution_provider"]
        run, notes = onnx.build(module, args, kwargs, job.device, provider, job.quantize)
    elif job.backend == "openvino":
        from runner.backends import openvino

        run, notes = openvino.build(module, job.dtype)
    elif job.backend == "tensorrt":
        from runner.backends import tensorrt

        run, notes = tensorrt.build(module, args, kwargs, job.device, job.dtype)
    else:
        raise ValueError(f"{job.backend} is not an external backend")
    return BackendModel(run=run, notes=notes)


class LazyBackendModel:
    """Builds the backend's model on its first call, from that call's inputs: the compiled warm-up then times export
    and session creation as torch.compile's first call times compilation (compile latency = export + session
    creation + first run, minus eager's first run). ``notes`` receives what the backend reports (the exporter)."""

    def __init__(self, module: torch.nn.Module, job: Job, notes: dict[str, str]) -> None:
        self._module = module
        self._job = job
        self._notes = notes
        self._model: BackendModel | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._model is None:
            self._model = build(self._module, self._job, args, kwargs)
            self._notes.update(self._model.notes)
        return self._model.run(*args, **kwargs)
