"""Running one job in its own worker process, under a timeout, and reading back what happened.

``ForkServer`` is the usual way: one server process per run imports torch and the suite's libraries once and forks a
worker per model (runner.zygote). ``run_worker`` starts a fresh interpreter per model instead; the server falls back
to it when it cannot start. Either way each model runs in a process group of its own, which is killed on a timeout
(with any compile workers), and a crash, abort or hang is seen as an exit status and the last phase announced.
A worker still in a diagnostic (runner.protocol.DIAGNOSTIC_PHASES) when its budget is spent is killed the same way;
the result it sent before the diagnostics (``WorkerOutcome.partial``) is kept.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypedDict

from runner.allocator import process_env
from runner.lifeline import PARENT_PID_ENV
from runner.protocol import DIAGNOSTIC_PHASES, PHASE_LOAD, Job, WorkerResult

_LOG_TAIL_CHARS = 1500
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


class ProtocolSink(TypedDict, total=False):
    """What a worker's protocol lines said so far: its phase, its result, what was wrong with a line."""

    phase: str
    phase_since: float  # when the phase's event arrived (time.perf_counter)
    result: WorkerResult
    partial: WorkerResult  # the result so far, sent before the diagnostics
    error: str


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
    partial: WorkerResult | None = None  # the result the worker sent before its diagnostics
    over_budget: bool = False  # killed in a diagnostic (last_phase) that ran past its budget
    last_phase_s: float | None = None  # seconds from the last phase's event to the worker's end, as the parent saw

    def salvaged(self) -> WorkerResult | None:
        """The partial result of a worker that ended in a diagnostic without its final result (over its budget,
        past the model's timeout, crashed), with that diagnostic recorded as cut; None otherwise."""
        if self.result is not None or self.partial is None or self.last_phase not in DIAGNOSTIC_PHASES:
            return None
        if self.over_budget:
            why = "over its budget: killed"
        elif self.timed_out:
            why = f"past the model's timeout after {self.wall_s:.0f} s: killed"
        elif self.signal_name is not None:
            why = f"the worker was killed by {self.signal_name}"
        else:
            why = f"the worker exited with status {self.returncode}"
        timings = dict(self.partial.timings)
        if self.last_phase_s is not None:  # the worker never reported it: the parent's clock
            timings[self.last_phase] = self.last_phase_s
        return replace(self.partial, timings=timings,
                       diagnostics_cut={**self.partial.diagnostics_cut, self.last_phase: why})

    @property
    def signal_name(self) -> str | None:
        if self.returncode is None or self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"


def _handle_line(line: str, on_phase: Callable[[str], None], sink: ProtocolSink) -> None:
    """One line of the worker protocol: a phase or the result."""
    line = line.strip()
    if not line:
        return
    try:
        event = json.loads(line)
        if event.get("event") == "phase":
            sink["phase"] = event["phase"]
            sink["phase_since"] = time.perf_counter()
            on_phase(event["phase"])
        elif event.get("event") == "result":
            sink["result"] = WorkerResult.from_dict(event)
        elif event.get("event") == "partial":
            sink["partial"] = WorkerResult.from_dict(event)
        else:
            sink["error"] = f"unknown worker event: {line[:200]}"
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        sink["error"] = f"bad worker message ({exc}): {line[:200]}"


def diagnostic_deadline(sink: ProtocolSink, budget_s: float) -> float | None:
    """When the diagnostic the worker is in must end (time.perf_counter); None outside the diagnostics."""
    if sink["phase"] not in DIAGNOSTIC_PHASES or "phase_since" not in sink:
        return None
    return sink["phase_since"] + budget_s


def _in_last_phase(sink: ProtocolSink) -> float | None:
    return time.perf_counter() - sink["phase_since"] if "phase_since" in sink else None


def _read_protocol(stream, on_phase: Callable[[str], None], sink: ProtocolSink) -> None:
    for raw in stream:
        _handle_line(raw.decode("utf-8", "replace"), on_phase, sink)


def run_worker(job: Job, env: dict[str, str], timeout_s: float, log_path: Path,
               on_phase: Callable[[str], None] = lambda phase: None) -> WorkerOutcome:
    """Start ``python -m runner.worker``, send the job, wait up to ``timeout_s``; kill its process group on timeout."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sink: ProtocolSink = {"phase": PHASE_LOAD}
    start = time.perf_counter()
    with log_path.open("ab") as log:
        log.write(f"=== {job.spec.name} ===\n".encode())
        log.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", "runner.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            env={**process_env(env), PARENT_PID_ENV: str(os.getpid())}, start_new_session=True)
        reader = threading.Thread(target=_read_protocol, args=(proc.stdout, on_phase, sink), daemon=True)
        reader.start()
        timed_out = over_budget = False
        send_job(proc, job)
        deadline = start + timeout_s
        try:
            while True:  # a diagnostic's budget starts when its phase arrives: look again at least every 0.5 s
                now = time.perf_counter()
                cap = diagnostic_deadline(sink, job.diagnostic_budget_s)
                if cap is not None and cap <= now and now < deadline:
                    over_budget = True
                elif now >= deadline:
                    timed_out = True
                if timed_out or over_budget:
                    _kill_group(proc)
                    proc.wait()
                    break
                try:
                    proc.wait(timeout=min(deadline, cap if cap is not None else deadline, now + 0.5) - now)
                    break
                except subprocess.TimeoutExpired:
                    continue
        except BaseException:  # interrupted (Ctrl-C, SIGTERM from Jenkins): leave no orphaned worker behind
            _kill_group(proc)
            proc.wait()
            raise
        reader.join(timeout=10)
    wall = time.perf_counter() - start
    return WorkerOutcome(result=sink.get("result"), last_phase=str(sink["phase"]),
                         returncode=proc.returncode, timed_out=timed_out, wall_s=wall, log_tail=_tail(log_path),
                         protocol_error=sink.get("error"), partial=sink.get("partial"), over_budget=over_budget,
                         last_phase_s=_in_last_phase(sink))


def send_job(proc: subprocess.Popen[bytes], job: Job) -> None:
    """Hand a freshly started worker its job on stdin, then close it."""
    try:
        assert proc.stdin is not None
        proc.stdin.write(job.to_json().encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass  # the worker died at start; its exit status tells why


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """The worker (or server) leads its own session; kill it and any compile workers it started."""
    _kill_pid_group(proc.pid)


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(size - _LOG_TAIL_CHARS, 0))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


# After a kill, how long the server may take to report the worker's end before it is given up on as well.
_KILL_GRACE_S = 30.0


class ForkServer:
    """``python -m runner.zygote`` for one run: started with the run's environment on the first job, it forks one
    worker per job. Use it as a context manager; it stops the server (and any worker left) on exit.

    If the server cannot start (or dies while starting), every job of the run gets a fresh interpreter instead
    (``run_worker``); if it dies later, the next job starts a new one.
    """

    def __init__(self, env: dict[str, str], preload: list[str], log_path: Path,
                 start_timeout_s: float = 600.0) -> None:
        self.env = dict(env)
        self.preload = list(preload)
        self.log_path = log_path
        self.start_timeout_s = start_timeout_s
        self.start_seconds = 0.0  # wall time spent starting servers (imports), for bench/harness.py
        self.failed_imports: dict[str, str] = {}
        self.cuda_state: dict[str, bool] = {}  # what the last server's imports did to CUDA (runner.zygote.cuda_state)
        self.refused: str | None = None  # why a server that started was not used
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._unavailable = False

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:  # interrupted (Ctrl-C, SIGTERM) or failed: the run ends now, with nothing of it left behind
            self.kill()

    def close(self) -> None:
        """Let the server finish (it exits when its stdin closes), killing it if it takes longer than 10 s."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.close()  # the server's signal to finish
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        _kill_group(proc)
        proc.wait()

    def kill(self, worker: int | None = None) -> None:
        """End the server and its worker now, without waiting for the job in progress: what an interrupted run
        does. ``worker``: the running worker's pid where the caller knows it; else the one in a "forked" message
        not read yet. A worker killed before its ``setsid`` is still in the server's group; one that has left it
        is killed as well, or dies with the server (runner.lifeline)."""
        proc, self._proc = self._proc, None
        workers = [worker] if worker is not None else _forked_pids(self._lines)
        for pid in workers:
            _kill_pid_group(pid)
        if proc is not None:
            _kill_group(proc)
            proc.wait()

    def _start(self) -> bool:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        with self.log_path.open("ab") as log:
            # NVML answers torch.cuda.is_available() in the server without initialising CUDA (fork-safe).
            proc = subprocess.Popen([sys.executable, "-m", "runner.zygote", *self.preload], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log,
                                    env={**process_env(self.env), NVML_CHECK: "1", PARENT_PID_ENV: str(os.getpid())},
                                    start_new_session=True)
        try:
            lines: queue.Queue[str | None] = queue.Queue()
            threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
            try:
                ready = json.loads(lines.get(timeout=self.start_timeout_s) or "null")
            except (queue.Empty, ValueError):
                ready = None
        except BaseException:  # interrupted while the server imports: it is not self._proc yet, so end it here
            _kill_group(proc)
            proc.wait()
            raise
        self.start_seconds += time.perf_counter() - start
        if not isinstance(ready, dict) or ready.get("event") != "ready":
            _kill_group(proc)
            proc.wait()
            return False
        self.failed_imports = dict(ready.get("failed") or {})
        self.cuda_state = {str(k): bool(v) for k, v in dict(ready.get("cuda") or {}).items()}
        if self.cuda_state.get("initialized"):
            # A child forked now could not use CUDA: the imports initialised it. Fresh interpreters instead.
            self.refused = "its imports initialised CUDA, which a forked worker could not use"
            _kill_group(proc)
            proc.wait()
            return False
        self._proc, self._lines = proc, lines
        return True

    def run(self, job: Job, env: dict[str, str], timeout_s: float, log_path: Path,
            on_phase: Callable[[str], None] = lambda phase: None, retry: bool = True) -> WorkerOutcome:
        """Run ``job`` in a forked worker with ``env`` on top of the run's; as ``run_worker`` does, in outcome.

        A server found dead before it forked the worker (it died idle, after the last job) is replaced and the job
        sent again, once.
        """
        if self._proc is not None and self._proc.poll() is not None:
            self._proc = None  # died since the last job
        if self._proc is None and not self._unavailable and not self._start():
            self._unavailable = True
            why = f"was refused: {self.refused}" if self.refused else f"did not start (see {self.log_path})"
            print(f"perfdash: the fork server {why}; each model gets a fresh interpreter", file=sys.stderr)
        if self._proc is None:
            return run_worker(job, {**self.env, **env}, timeout_s, log_path, on_phase)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            log.write(f"=== {job.spec.name} ===\n".encode())
        request = {"job": job.to_json(), "env": env, "log": str(log_path)}
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write((json.dumps(request) + "\n").encode())
            self._proc.stdin.flush()
        except OSError:  # the server died after its last job
            self.close()
            if retry:
                return self.run(job, env, timeout_s, log_path, on_phase, retry=False)
            return run_worker(job, {**self.env, **env}, timeout_s, log_path, on_phase)
        sink: ProtocolSink = {"phase": PHASE_LOAD}
        start = time.perf_counter()
        pid: int | None = None
        returncode: int | None = None
        timed_out = over_budget = False
        try:
            deadline = start + timeout_s
            while True:
                cap = None if timed_out or over_budget else diagnostic_deadline(sink, job.diagnostic_budget_s)
                try:
                    line = self._lines.get(timeout=max(min(deadline, cap or deadline) - time.perf_counter(), 0.0))
                except queue.Empty:
                    if timed_out or over_budget or pid is None:  # the server itself is stuck: give it up too
                        sink.setdefault("error", "the fork server stopped answering")
                        self.close()
                        break
                    if cap is not None and cap < deadline:
                        over_budget = True
                    else:
                        timed_out = True
                    _kill_pid_group(pid)
                    deadline = time.perf_counter() + _KILL_GRACE_S
                    continue
                if line is None:  # the server died; its worker goes too, and the next job starts a new server
                    self.close()
                    if pid is None and retry:  # before forking: the job never started
                        return self.run(job, env, timeout_s, log_path, on_phase, retry=False)
                    sink.setdefault("error", "the fork server exited while a worker ran")
                    if pid is not None:
                        _kill_pid_group(pid)
                    break
                event = _server_event(line)
                if event is not None and event[0] == "forked":
                    pid = event[1]
                elif event is not None and event[0] == "exited":
                    returncode = event[1]
                    break
                else:
                    _handle_line(line, on_phase, sink)
        except BaseException:  # interrupted (Ctrl-C, SIGTERM from Jenkins): leave no orphaned worker behind
            # Kill, not close(): the server is busy relaying this job and would read its closed stdin only after
            # the worker ends (never, for a hung one), so close() would wait its 10 s for nothing.
            self.kill(pid)
            raise
        wall = time.perf_counter() - start
        if returncode is None and (timed_out or over_budget):
            returncode = -signal.SIGKILL
        return WorkerOutcome(result=sink.get("result"), last_phase=str(sink["phase"]),
                             returncode=returncode, timed_out=timed_out, wall_s=wall, log_tail=_tail(log_path),
                             protocol_error=sink.get("error"), partial=sink.get("partial"), over_budget=over_budget,
                             last_phase_s=_in_last_phase(sink))


def _server_event(line: str) -> tuple[str, int] | None:
    """The server's own messages about a worker ("forked" with its pid, "exited" with its return code)."""
    if '"forked"' not in line and '"exited"' not in line:
        return None
    try:
        event = json.loads(line)
        if event.get("event") == "forked":
            return "forked", int(event["pid"])
        if event.get("event") == "exited":
            return "exited", int(event["returncode"])
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


def _forked_pids(lines: queue.Queue[str | None]) -> list[int]:
    """The workers named in "forked" messages still waiting in ``lines`` (taken out: the server is being killed)."""
    pids: list[int] = []
    while True:
        try:
            line = lines.get_nowait()
        except queue.Empty:
            return pids
        event = _server_event(line) if line is not None else None
        if event is not None and event[0] == "forked":
            pids.append(event[1])


def _pump(stream, lines: queue.Queue[str | None]) -> None:
    for raw in stream:
        lines.put(raw.decode("utf-8", "replace"))
    lines.put(None)


def _kill_pid_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
