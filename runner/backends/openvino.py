"""OpenVINO's ``torch.compile`` backend (worker side, imports torch and openvino).

Two settings differ from the backend's defaults, both recorded in the manifest (runner.backends.settings):
``aot_autograd`` on, because without it the backend's own ``make_fx`` trace leaves symbols without a source in
Dynamo's shape environment and torch 2.14 fails to build the guards ("sources must not be empty for symbol"); and the
CPU plugin's ``INFERENCE_PRECISION_HINT`` set from ``--dtype`` (it would run a float32 model in bf16 on CPUs with
AMX or AVX512-BF16). When OpenVINO cannot convert a graph the backend logs it at debug level and hands the graph to
Inductor instead: that is caught here and becomes the model's failure, so an Inductor number is never reported as
OpenVINO's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

from runner.backends import OPENVINO_PRECISION_HINT

_BACKEND_LOGGER = "openvino.frontend.pytorch.torchdynamo.backend"
_FALLBACK_MESSAGE = "Failed in OpenVINO execution"


class OpenVinoFellBack(RuntimeError):
    """OpenVINO could not compile a graph; its backend ran it with Inductor instead."""


class _FallbackRecorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.reasons: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(_FALLBACK_MESSAGE):
            self.reasons.append(message)


def build(module: torch.nn.Module, dtype: str) -> tuple[Callable[..., Any], dict[str, str]]:
    import openvino.torch  # noqa: F401 - registers the "openvino" backend with torch.compile

    threads = torch.get_num_threads()
    options: dict[str, Any] = {"device": "CPU", "aot_autograd": True,
               "config": {"INFERENCE_PRECISION_HINT": OPENVINO_PRECISION_HINT[dtype],
                          "INFERENCE_NUM_THREADS": str(threads)}}
    recorder = _FallbackRecorder()
    logger = logging.getLogger(_BACKEND_LOGGER)
    logger.addHandler(recorder)
    logger.setLevel(logging.DEBUG)
    compiled = torch.compile(module, backend="openvino", options=options)

    def run(*args: Any, **kwargs: Any) -> Any:
        out = compiled(*args, **kwargs)
        if recorder.reasons:
            raise OpenVinoFellBack("OpenVINO could not compile the model (its backend fell back to Inductor): "
                                   + recorder.reasons[0][:1500])
        return out

    return run, {"inference_num_threads": str(threads)}
