"""Launching one DistributedDataParallel world as torchrun does: one process per rank (``python -m runner.rank``), each
told where the group meets (MASTER_ADDR, MASTER_PORT: a free port per world) and who it is (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE), each on its own device (CUDA: LOCAL_RANK's GPU) or its own slice of the CPU's cores.

Every rank speaks the worker protocol (runner.protocol) and is a process group of its own, as a model's worker is
(runner.process). The first rank to fail ends the world: a rank that exits without a result, with an error, or killed,
and every rank when the timeout passes. The others are killed at once (a collective with a dead peer waits for the
process group's own timeout, 30 min for gloo and nccl), so a failing world size costs seconds and the next one runs.
Torch-free: the launcher never imports torch.
"""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from runner.allocator import process_env
from runner.lifeline import PARENT_PID_ENV
from runner.process import ProtocolSink, WorkerOutcome, _handle_line, _kill_pid_group, _tail, send_job
from runner.protocol import PHASE_LOAD, Job

# The variable that gives a rank its cores (comma-separated ids); the rank pins itself to them before it starts
# any thread (runner.rank).
CPUS_VARIABLE = "PERFDASH_RANK_CPUS"


def process_group_backend(device: str) -> str:
    """torch.distributed's backend for the device: nccl between GPUs, gloo between CPU processes."""
    return "nccl" if device == "cuda" else "gloo"


def free_port() -> int:
    """A TCP port nobody listens on now (the kernel's choice); a new one per world, so a world's leftovers (a rank
    still closing its store) never meet the next."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_slices(available: Sequence[int], ranks: int, cores_per_rank: int) -> list[tuple[int, ...]]:
    """``ranks`` disjoint slices of ``cores_per_rank`` cores each, in the order the cores are numbered; ValueError
    when the cores do not go round."""
    cores = sorted(available)
    if cores_per_rank < 1 or ranks * cores_per_rank > len(cores):
        raise ValueError(f"{ranks} rank(s) of {cores_per_rank} core(s) need {ranks * cores_per_rank} cores, "
                         f"{len(cores)} available")
    return [tuple(cores[r * cores_per_rank:(r + 1) * cores_per_rank]) for r in range(ranks)]


def rank_environment(rank: int, world_size: int, port: int, cpus: Sequence[int] | None) -> dict[str, str]:
    """What torchrun gives each process (one node: local rank = rank), plus the rank's cores."""
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank), "WORLD_SIZE": str(world_size),
           "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world_size), "GROUP_RANK": "0"}
    if cpus:
        env[CPUS_VARIABLE] = ",".join(map(str, cpus))
        env["OMP_NUM_THREADS"] = str(len(cpus))
    return env


@dataclass(frozen=True, slots=True)
class WorldOutcome:
    """What the launcher saw of one world: each rank's outcome (index = rank), the rank whose failure ended the
    world (None: every rank sent its result), and when each rank announced its first phase (s after launch)."""

    ranks: tuple[WorkerOutcome, ...]
    culprit: int | None
    timed_out: bool
    wall_s: float
    started_s: tuple[float | None, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return self.culprit is None and not self.timed_out


@dataclass(slots=True)
class _Rank:
    proc: subprocess.Popen[bytes]
    log: Path
    sink: ProtocolSink
    reader: threading.Thread | None = None
    started: float | None = None
    exited_at: float | None = None


def _failed(rank: _Rank) -> bool:
    result = rank.sink.get("result")
    return rank.proc.returncode != 0 or result is None or getattr(result, "failure", None) is not None


def launch(job: Job, world_size: int, env: dict[str, str], timeout_s: float, log_dir: Path,
           cpus: Sequence[Sequence[int]] | None = None) -> WorldOutcome:
    """Run ``job`` on ``world_size`` ranks and wait for all of them, up to ``timeout_s`` in all; ``env`` goes to
    every rank, ``cpus[r]`` are rank r's cores (None: no pinning, e.g. one GPU per rank)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    exits: queue.Queue[int] = queue.Queue()
    ranks: list[_Rank] = []
    start = time.perf_counter()
    try:
        for r in range(world_size):
            ranks.append(_start_rank(job, r, world_size, port, env, cpus[r] if cpus else None, log_dir, exits, start))
        culprit, timed_out = _wait(ranks, exits, start + timeout_s)
    except BaseException:  # interrupted: leave no rank behind
        for rank in ranks:
            _kill_pid_group(rank.proc.pid)
            rank.proc.wait()
        raise
    for rank in ranks:  # the killed ranks' last lines, and their exit times
        if rank.reader is not None:
            rank.reader.join(timeout=10)
    wall = time.perf_counter() - start
    outcomes = []
    for rank in ranks:
        outcomes.append(WorkerOutcome(
            result=rank.sink.get("result"), last_phase=str(rank.sink["phase"]),
            returncode=rank.proc.returncode, timed_out=timed_out,
            wall_s=(rank.exited_at or wall), log_tail=_tail(rank.log),
            protocol_error=rank.sink.get("error")))
    return WorldOutcome(ranks=tuple(outcomes), culprit=culprit, timed_out=timed_out, wall_s=wall,
                        started_s=tuple(rank.started for rank in ranks))


def _start_rank(job: Job, r: int, world_size: int, port: int, env: dict[str, str], cpus: Sequence[int] | None,
                log_dir: Path, exits: queue.Queue[int], start: float) -> _Rank:
    log = log_dir / f"rank{r}.log"
    with log.open("ab") as handle:
        handle.write(f"=== {job.spec.name}: rank {r} of {world_size} ===\n".encode())
        handle.flush()
        proc = subprocess.Popen([sys.executable, "-m", "runner.rank"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=handle,
                                env={**process_env({**env, **rank_environment(r, world_size, port, cpus)}),
                                     PARENT_PID_ENV: str(os.getpid())},
                                start_new_session=True)
    sink: ProtocolSink = {"phase": PHASE_LOAD}
    rank = _Rank(proc=proc, log=log, sink=sink)

    def on_phase(phase: str) -> None:
        if rank.started is None:
            rank.started = time.perf_counter() - start

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            _handle_line(raw.decode("utf-8", "replace"), on_phase, sink)
        proc.wait()
        rank.exited_at = time.perf_counter() - start
        exits.put(r)

    rank.reader = threading.Thread(target=read, daemon=True)
    rank.reader.start()
    send_job(proc, job)
    return rank


def _wait(ranks: list[_Rank], exits: queue.Queue[int], deadline: float) -> tuple[int | None, bool]:
    """Until every rank has exited: the first rank that fails, or the deadline, kills the rest."""
    running = set(range(len(ranks)))
    while running:
        try:
            r = exits.get(timeout=max(deadline - time.perf_counter(), 0.0))
        except queue.Empty:
            for other in running:
                _kill_pid_group(ranks[other].proc.pid)
            for other in running:
                ranks[other].proc.wait()
            return None, True
        running.discard(r)
        if _failed(ranks[r]):
            for other in running:
                _kill_pid_group(ranks[other].proc.pid)
            for other in running:
                ranks[other].proc.wait()
            return r, False
        # a rank that is done with its job leaves its group; kill what it left running (compile workers)
        _kill_pid_group(ranks[r].proc.pid)
    return None, False
