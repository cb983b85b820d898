"""The fork server: ``python -m runner.zygote MODULE...`` imports torch and the given modules once, then forks one
worker per job (runner.worker.run_forked), so no model pays the 2-3 s of ``import torch`` and its suite's library.

Messages, one JSON object per line. From the parent on stdin: ``{"job": JOB_JSON, "env": {...}, "log": PATH}``.
To the parent on stdout: ``{"event": "ready", "seconds": S, "preloaded": [...], "failed": {...}}`` once the imports
are done; per job ``{"event": "forked", "pid": N}``, then the worker's own protocol lines as it writes them, then
``{"event": "exited", "pid": N, "returncode": RC}`` (negative: the signal that ended it, as subprocess reports).
Jobs run one at a time. The server ends when its stdin closes (the parent is gone or done).

What the server must not do before forking: initialise CUDA (a forked child cannot use it) or run any parallel
torch operation (OpenMP's thread pool does not survive a fork). Its ready message says what it did to CUDA
(``cuda_state``); the parent refuses a server that initialised it, and the run's workers then start as fresh
interpreters. The server runs with ``PYTORCH_NVML_BASED_CUDA_CHECK=1``, so a library that asks
``torch.cuda.is_available()`` at import is answered through NVML, without initialising the driver. It imports
modules and nothing else. Inductor's configuration is read when it is imported (torchvision imports it), so the
server is started with the run's environment (runner.options.RunOptions.worker_env: freezing, CUDA graphs) and only
per-job settings read later (the cold-start cache directories) go in a job's ``env``.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import time
from typing import Any, TextIO

from runner.lifeline import die_with_parent, parent_from_environment


def preload(modules: list[str]) -> tuple[list[str], dict[str, str]]:
    """Import what the workers will need; a module that fails here is left for the worker to fail on, with the
    model's own error message and status."""
    loaded: list[str] = []
    failed: dict[str, str] = {}
    # What PyTorch's benchmarks/dynamo/common.py imports at its top (Dynamo, Inductor's config and utils), never
    # Inductor's compiler (torch._inductor.compile_fx, graph, lowering, codegen): a fresh process of PyTorch's
    # harness imports that inside its first compile, so compile latency must pay it here too (issue 42; 0.8 s here).
    # runner.execute is the worker's own code (20 ms a model); it imports the compiler only when it compiles.
    for name in ["torch", "torch._dynamo", "torch._inductor.config", "torch._inductor.utils", "runner.execute",
                 *modules]:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except Exception as exc:  # noqa: BLE001 - any import error is the model's to report
            failed[name] = f"{type(exc).__name__}: {exc}"[:500]
    return loaded, failed


def cuda_state() -> dict[str, bool]:
    """What the server did to CUDA before its first fork, for the parent to check (runner.process.ForkServer refuses a
    server that initialised it): torch's lazy initialisation, and whether the driver library is mapped into the
    process (cuInit by any path, e.g. cudaGetDeviceCount; reported, not refused: it may be mapped without cuInit)."""
    import torch

    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as handle:
            maps = handle.read()
    except OSError:
        maps = ""
    return {"initialized": bool(torch.cuda.is_initialized()), "driver_loaded": "libcuda.so" in maps}


def _send(control: TextIO, message: dict[str, object]) -> None:
    control.write(json.dumps(message) + "\n")
    control.flush()


def run_one(request: dict[str, Any], control: TextIO) -> None:
    """Fork the worker, relay its protocol lines to the parent until it closes them, then report how it ended."""
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    server = os.getpid()
    pid = os.fork()
    if pid == 0:  # the worker
        die_with_parent(server)
        os.close(read_fd)
        os.close(control.fileno())  # else the parent would not see the server's end while a worker lives
        from runner.worker import run_forked

        run_forked(str(request["job"]), dict(request.get("env") or {}),
                   write_fd, str(request["log"]))
    os.close(write_fd)
    _send(control, {"event": "forked", "pid": pid})
    with os.fdopen(read_fd, "rb") as lines:
        for raw in lines:
            control.write(raw.decode("utf-8", "replace").rstrip("\n") + "\n")
            control.flush()
    _, status = os.waitpid(pid, 0)
    _send(control, {"event": "exited", "pid": pid, "returncode": os.waitstatus_to_exitcode(status)})


def main(argv: list[str]) -> int:
    die_with_parent(parent_from_environment())
    start = time.perf_counter()
    control = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # what an import prints goes to the server's log, never into the protocol
    sys.stdout = sys.stderr
    from perfdash import logs  # into the server's log; the workers it forks inherit the setup

    logs.configure(logs.LogOptions.from_environ())
    loaded, failed = preload(argv)
    # The imports' objects (several hundred thousand) move to the collector's permanent generation: else a worker's
    # first full collection walks them all, writing to every page that holds one and so copying it from the server
    # (0.5 s a model here). The workers inherit the frozen state; a worker never frees these objects anyway.
    gc.freeze()
    _send(control, {"event": "ready", "seconds": time.perf_counter() - start, "preloaded": loaded,
                    "failed": failed, "cuda": cuda_state()})
    for line in sys.stdin:
        if line.strip():
            run_one(json.loads(line), control)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stderr.flush()
    os._exit(code)  # the interpreter's teardown of torch and friends would keep the parent waiting for nothing
