"""Worker process: ``python -m runner.worker`` reads one Job (JSON) on stdin and reports on stdout (see protocol).

The protocol gets its own copy of stdout; file descriptor 1 then points at stderr, so whatever models, compilers or
libraries print cannot corrupt the JSON lines the parent reads.

Once the result is sent the worker runs its exit handlers and leaves with ``os._exit``: the interpreter's own
shutdown (tearing down torch's, Inductor's and the model's objects one by one) took 1.5 s here after a compiled
resnet18, more than a third of the harness's overhead for a small model (bench/README.md).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import sys
import time


def main() -> int:
    start = time.perf_counter()
    protocol = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    from runner.protocol import Job, phase_event

    job = Job.from_json(sys.stdin.read())

    def emit(phase: str) -> None:
        protocol.write(phase_event(phase) + "\n")
        protocol.flush()

    from runner.execute import configure_threads  # imports torch

    configure_threads(job.threads)
    imported = time.perf_counter()
    from runner.execute import run_job

    result = run_job(job, emit)
    timings = {"import": imported - start, **result.timings, "worker_total": time.perf_counter() - start}
    protocol.write(type(result)(**{**_fields(result), "timings": timings}).to_json() + "\n")
    protocol.flush()
    return 0


def _fields(result: object) -> dict[str, object]:
    return {name: getattr(result, name) for name in result.__dataclass_fields__}  # type: ignore[attr-defined]


def _exit_now(code: int) -> None:
    """Exit handlers (Inductor shuts its compile workers down in one), flushed output, and no interpreter teardown."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    ctypes.CDLL(None).fflush(None)  # what C and C++ code printed through stdio
    os._exit(code)


if __name__ == "__main__":
    _exit_now(main())
