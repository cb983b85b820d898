"""Running one job in its own worker process, under a timeout, and reading back what happened."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner.protocol import PHASE_LOAD, Job, WorkerResult

_LOG_TAIL_CHARS = 1500


@dataclass(frozen=True, slots=True)
class WorkerOutcome:
    """What the parent saw: the worker's result if it sent one, else how and where it died."""

    result: WorkerResult | None
    last_phase: str
    returncode: int | None
    timed_out: bool
    wall_s: float
    log_tail: str
    protocol_error: str | None = None

    @property
    def signal_name(self) -> str | None:
        if self.returncode is None or self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"


def _read_protocol(stream, on_phase: Callable[[str], None], sink: dict[str, object]) -> None:
    import json

    for raw in stream:
        line = raw.decode("utf-8", "replace").strip()
        if not line:
            continue
        try:
            event = json.loads(line)
            if event.get("event") == "phase":
                sink["phase"] = event["phase"]
                on_phase(event["phase"])
            elif event.get("event") == "result":
                sink["result"] = WorkerResult.from_dict(event)
            else:
                sink["error"] = f"unknown worker event: {line[:200]}"
        except (ValueError, KeyError, TypeError) as exc:
            sink["error"] = f"bad worker message ({exc}): {line[:200]}"


def run_worker(job: Job, env: dict[str, str], timeout_s: float, log_path: Path,
               on_phase: Callable[[str], None] = lambda phase: None) -> WorkerOutcome:
    """Start ``python -m runner.worker``, send the job, wait up to ``timeout_s``; kill its process group on timeout."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sink: dict[str, object] = {"phase": PHASE_LOAD}
    start = time.perf_counter()
    with log_path.open("ab") as log:
        log.write(f"=== {job.spec.name} ===\n".encode())
        log.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", "runner.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            env={**os.environ, **env}, start_new_session=True)
        reader = threading.Thread(target=_read_protocol, args=(proc.stdout, on_phase, sink), daemon=True)
        reader.start()
        timed_out = False
        try:
            assert proc.stdin is not None
            proc.stdin.write(job.to_json().encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass  # the worker died at start; its exit status tells why
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            proc.wait()
        except BaseException:  # interrupted (Ctrl-C, SIGTERM from Jenkins): leave no orphaned worker behind
            _kill_group(proc)
            proc.wait()
            raise
        reader.join(timeout=10)
    wall = time.perf_counter() - start
    return WorkerOutcome(result=sink.get("result"), last_phase=str(sink["phase"]),  # type: ignore[arg-type]
                         returncode=proc.returncode, timed_out=timed_out, wall_s=wall, log_tail=_tail(log_path),
                         protocol_error=sink.get("error"))  # type: ignore[arg-type]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """The worker leads its own session; kill it and any compile workers it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(size - _LOG_TAIL_CHARS, 0))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
