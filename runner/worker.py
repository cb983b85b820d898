"""The worker: one Job in, phase events and one result out (see runner.protocol). Two ways to start one:

- forked by the fork server (runner.zygote), which has imported torch and the suite's libraries already: the usual
  way, see ``run_forked``;
- ``python -m runner.worker``, a fresh interpreter that reads the Job on stdin and reports on stdout: the fallback
  when the fork server cannot start.

Either way the protocol has a stream of its own and file descriptors 1 and 2 point at the model's log, so whatever
models, compilers or libraries print cannot corrupt the JSON lines the parent reads.

Once the result is sent the worker runs its exit handlers and leaves with ``os._exit``: the interpreter's own
shutdown (tearing down torch's, Inductor's and the model's objects one by one) took 1.5 s here after a compiled
resnet18, more than a third of the harness's overhead for a small model (bench/README.md).
"""

from __future__ import annotations

import atexit
import ctypes
import dataclasses
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from runner.lifeline import die_with_parent, parent_from_environment

if TYPE_CHECKING:
    from runner.protocol import Job, WorkerResult

# What a worker does with its job: runner.execute.run_job, or runner.rank.run_rank for one rank of a DDP run.
JobRunner = Callable[["Job", Callable[[str], None]], "WorkerResult"]


def serve(job_text: str, protocol: TextIO, start: float, run: JobRunner | None = None) -> None:
    """Run one job (with ``run``, by default runner.execute.run_job), announcing each phase, and write its result;
    ``start`` is when this worker began."""
    from runner.protocol import Job, phase_event

    job = Job.from_json(job_text)

    def emit(phase: str) -> None:
        protocol.write(phase_event(phase) + "\n")
        protocol.flush()

    from runner.execute import configure_threads  # imports torch (at once when forked: the server has it)

    configure_threads(job.threads)
    from runner.gpu_settings import apply

    apply(os.environ)  # the GPU settings of PyTorch's harness the run's environment records (timed phases)
    from runner import inductor_overrides

    inductor_overrides.apply(os.environ)  # perfdash run --inductor-config, as the configuration's env records it
    imported = time.perf_counter()

    def send(result: WorkerResult, event: str) -> None:
        protocol.write(dataclasses.replace(result, timings={"import": imported - start, **result.timings}
                                           ).to_json(event) + "\n")
        protocol.flush()

    if run is None:
        import functools

        from runner.execute import run_job

        # the timed results reach the parent before the diagnostics run (runner.protocol)
        run = functools.partial(run_job, partial=functools.partial(send, event="partial"))

    result = run(job, emit)
    send(dataclasses.replace(result, timings={**result.timings, "worker_total": time.perf_counter() - start}),
         "result")


def run_forked(job_text: str, env: dict[str, str], protocol_fd: int, log_path: str) -> None:
    """In a child the fork server just forked: become a process group of its own, then serve the job. Never returns.

    The group is what the parent kills on a timeout, with any compile workers the model started.
    """
    start = time.perf_counter()
    code = 1
    try:
        os.setsid()
        log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null_fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null_fd, 0)  # the server's control pipe from the parent is not this worker's business
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        os.close(null_fd)
        os.environ.update(env)
        from runner.measure import FORKED_FROM_ENV

        os.environ[FORKED_FROM_ENV] = str(os.getppid())  # peak memory counts the server's library pages too
        from runner.allocator import restart_jemalloc_threads

        restart_jemalloc_threads()  # the fork left them behind: run the recorded MALLOC_CONF, as a fresh process would
        protocol = os.fdopen(protocol_fd, "w", buffering=1, encoding="utf-8")
        serve(job_text, protocol, start)
        code = 0
    except BaseException:  # noqa: BLE001 - whatever happened, this process must not return into the server's loop
        import traceback

        traceback.print_exc()
    finally:
        exit_now(code)


def main(run: JobRunner | None = None) -> int:
    die_with_parent(parent_from_environment())
    start = time.perf_counter()
    protocol = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from perfdash import logs  # into the model's log, as the console script's lines are

    logs.configure(logs.LogOptions.from_environ())
    serve(sys.stdin.read(), protocol, start, run)
    return 0


def exit_now(code: int) -> None:
    """Exit handlers (Inductor shuts its compile workers down in one), flushed output, and no interpreter teardown."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    ctypes.CDLL(None).fflush(None)  # what C and C++ code printed through stdio
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
