"""Whatever ends a `perfdash run` (a timeout, Ctrl-C, a Jenkins abort, a closed terminal, SIGKILL of the run), no
process of it outlives it: neither the fork server nor the worker it forked, nor anything they started (issue 42)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

STATUSES = Path(__file__).parent / "data" / "statuses.toml"
START_TIMEOUT_S = 240.0  # the fork server imports torch and transformers before it forks: seconds, minutes when busy
GONE_TIMEOUT_S = 30.0


def _ctrl_c(run: psutil.Process) -> None:
    os.killpg(run.pid, signal.SIGINT)  # a terminal's Ctrl-C goes to the foreground process group: the run's


def _jenkins_abort(run: psutil.Process) -> None:
    # Jenkins ends a step's whole process tree: SIGTERM to every process it finds, the run's children included
    for process in [run, *run.children(recursive=True)]:
        try:
            process.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass


WAYS: dict[str, Callable[[psutil.Process], None]] = {
    "timeout (SIGTERM)": lambda run: run.send_signal(signal.SIGTERM),
    "Ctrl-C": _ctrl_c,
    "Jenkins abort": _jenkins_abort,
    "terminal closed (SIGHUP)": lambda run: run.send_signal(signal.SIGHUP),
    "SIGKILL of the run": lambda run: run.send_signal(signal.SIGKILL),
}


def _worker_started(run: psutil.Process) -> list[psutil.Process]:
    """The run's processes once a model's worker is running (the fork server's child that leads a session of its
    own, as runner.worker.run_forked makes it: not a tool the server runs while importing, such as ldconfig)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        assert run.is_running() and run.status() != psutil.STATUS_ZOMBIE, "the run ended before its model started"
        processes = run.children(recursive=True)
        pids = {p.pid for p in processes}
        if any(_parent(p) in pids and _leads_session(p) for p in processes):
            return processes
        time.sleep(0.2)
    raise AssertionError(f"no worker within {START_TIMEOUT_S} s")


def _parent(process: psutil.Process) -> int | None:
    try:
        return process.ppid()
    except psutil.NoSuchProcess:
        return None


def _leads_session(process: psutil.Process) -> bool:
    try:
        return os.getsid(process.pid) == process.pid
    except ProcessLookupError:
        return False


def _sessions(processes: list[psutil.Process]) -> set[int]:
    out = set()
    for process in processes:
        try:
            out.add(os.getsid(process.pid))
        except ProcessLookupError:
            pass
    return out


def _alive_in(sessions: set[int]) -> list[str]:
    """Living processes of these sessions (the server and workers each lead one; what they start joins it)."""
    out = []
    for process in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if os.getsid(process.pid) in sessions and process.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(f"{process.pid} {' '.join(process.info['cmdline'] or [])[:120]}")
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return out


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("way", list(WAYS))
def test_no_process_of_a_run_outlives_it(way: str, tmp_path: Path) -> None:
    perfdash = Path(sys.executable).with_name("perfdash")
    command = [str(perfdash), "run", "--suite", "huggingface", "--models-file", str(STATUSES), "--only", "hangs",
               "--timeout", "600", "--no-progress", "--output-dir", str(tmp_path / "out")]
    # its own process group and session, as a shell gives a foreground job, and Ctrl-C's default action: a test
    # run started where SIGINT is ignored (a background job of a script, a CI step) would pass that on, and the
    # run, as any Python program, would keep ignoring it
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=_default_sigint)
    run = psutil.Process(proc.pid)
    sessions: set[int] = set()
    try:
        processes = _worker_started(run)
        sessions = _sessions(processes) - {os.getsid(proc.pid)}
        assert len(sessions) >= 1 and len(processes) >= 2  # the fork server and the worker it forked
        WAYS[way](run)
        proc.wait(timeout=60)
        deadline = time.monotonic() + GONE_TIMEOUT_S
        while (alive := _alive_in(sessions)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert alive == [], f"{way}: left running: {alive}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for session in sessions:  # whatever a failure left: each session's leader leads its process group too
            try:
                os.killpg(session, signal.SIGKILL)
            except ProcessLookupError:
                pass
