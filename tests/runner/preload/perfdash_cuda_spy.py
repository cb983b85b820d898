"""Test-only, preloaded first by a fork server under test: records every call that would initialise CUDA (torch's
lazy initialisation, the runtime's device count, which initialises the driver) with the pid that made it, one JSON
line each to $PERFDASH_TEST_CUDA_SPY_LOG. On a machine without a GPU these calls fail or return nothing, so
torch.cuda.is_initialized() alone could never show that the server tried; the record does."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from typing import Any

import torch
import torch.cuda


def _recorded(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        with open(os.environ["PERFDASH_TEST_CUDA_SPY_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps({"pid": os.getpid(), "call": name}) + "\n")
        return original(*args, **kwargs)

    return call


torch.cuda._lazy_init = _recorded("torch.cuda._lazy_init", torch.cuda._lazy_init)
torch._C._cuda_getDeviceCount = _recorded("torch._C._cuda_getDeviceCount", torch._C._cuda_getDeviceCount)
