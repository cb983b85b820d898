"""One rank of a DistributedDataParallel training run (``python -m runner.rank``, started by runner.distributed).

The rank reads torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT), pins itself to its cores
(runner.distributed.CPUS_VARIABLE) before torch starts a thread, joins the process group (gloo on CPU, nccl on CUDA)
and measures the training step as the single-process worker does (runner.execute: the same model, inputs and step),
with the model wrapped as PyTorch's harness wraps it for ``--ddp`` (benchmarks/dynamo/common.py
``deepcopy_and_maybe_parallelize``: a deep copy in ``DistributedDataParallel(find_unused_parameters=True)``) and
Dynamo's DDP graph splitting on (``torch._dynamo.config.optimize_ddp``, ``ddp_optimizer`` as the harness's
``--optimize-ddp-mode`` default): warm-up of eager and of compiled, then eager and compiled steps interleaved. Every
step ends in the backward's all-reduce, so the ranks step together; the launcher takes the slowest rank's time of
each step. Accuracy is not checked here and perfdash's activation peak is not measured.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from perfdash.contract import GraphStats
from runner.distributed import CPUS_VARIABLE, process_group_backend
from runner.execute import SEED, Phases, compile_step, graph_stats, is_oom, make_step, prepare
from runner.measure import synchronize, timed, warmup
from runner.protocol import (
    PHASE_COMPILE,
    PHASE_EAGER_WARMUP,
    PHASE_LOAD,
    PHASE_MEASURE,
    Failure,
    Job,
    Performance,
    WorkerResult,
)
from runner.suites.builders import BuildContext, build

# Dynamo's DDP mode, the default of PyTorch's harness (--optimize-ddp-mode): split the graph at DDP's bucket
# boundaries so each bucket's all-reduce can start while the backward of the graph before it still runs.
OPTIMIZE_DDP = "ddp_optimizer"


@dataclass(frozen=True, slots=True)
class RankPlace:
    rank: int
    world_size: int
    local_rank: int
    cpus: tuple[int, ...] | None

    @classmethod
    def from_environ(cls) -> RankPlace:
        cpus = os.environ.get(CPUS_VARIABLE)
        return cls(rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]),
                   local_rank=int(os.environ.get("LOCAL_RANK", os.environ["RANK"])),
                   cpus=tuple(int(c) for c in cpus.split(",")) if cpus else None)


def pin(cpus: tuple[int, ...] | None) -> None:
    """This process and the threads it will start on ``cpus``, with as many intra-op threads as cores."""
    if cpus is None:
        return
    os.sched_setaffinity(0, cpus)
    torch.set_num_threads(len(cpus))


class FirstCall:
    """A step that remembers how long its first call took (the harness overhead of DDP's first iteration)."""

    def __init__(self, step: Callable[[], Any], device: str) -> None:
        self._step = step
        self._device = device
        self.seconds: float | None = None

    def __call__(self) -> Any:
        if self.seconds is not None:
            return self._step()
        seconds, out = timed(self._step, self._device)
        self.seconds = seconds
        return out


def run_rank(job: Job, emit: Callable[[str], None]) -> WorkerResult:
    import torch.distributed as dist

    timings: dict[str, float] = {}
    phases = Phases(emit, timings)
    place = RankPlace.from_environ()
    try:
        with phases.enter(PHASE_LOAD):
            pin(place.cpus)
            if job.device == "cuda":
                torch.cuda.set_device(place.local_rank)
            start = time.perf_counter()
            dist.init_process_group(process_group_backend(job.device), rank=place.rank,
                                    world_size=place.world_size)
            phases.record("init_process_group", time.perf_counter() - start)
            torch.manual_seed(SEED)  # every rank builds the same weights (DDP broadcasts rank 0's anyway)
            built = build(job.spec, BuildContext(device=job.device, batch_size=job.batch_size, training=True))
            base = prepare(built, job)
        performance = _measure(base, job, phases, place)
    except Exception as exc:  # noqa: BLE001 - the world's status row; the launcher ends the other ranks
        failure = Failure(phase=phases.current, kind="oom" if is_oom(exc) else "error",
                          message=f"rank {place.rank}: {type(exc).__name__}: {exc}"[:2000])
        return WorkerResult(name=job.spec.name, batch_size=job.batch_size, failure=failure, timings=timings)
    dist.destroy_process_group()  # only after success: with a dead peer it could wait for the group's timeout
    return WorkerResult(name=job.spec.name, batch_size=job.batch_size, performance=performance, timings=timings)


def _measure(base: Any, job: Job, phases: Phases, place: RankPlace) -> Performance:
    from torch._dynamo.utils import counters
    from torch.nn.parallel import DistributedDataParallel

    def parallel(module: torch.nn.Module) -> torch.nn.Module:
        ids = [place.local_rank] if job.device == "cuda" else None
        return DistributedDataParallel(module, device_ids=ids, find_unused_parameters=True)

    with torch._dynamo.config.patch(optimize_ddp=OPTIMIZE_DDP):
        with phases.enter(PHASE_EAGER_WARMUP):
            eager_step = FirstCall(make_step(parallel(copy.deepcopy(base.module)), base, job), job.device)
            eager_warm = warmup(eager_step, job.warmup, job.device)
        phases.record("first_step", eager_step.seconds or 0.0)
        with phases.enter(PHASE_COMPILE):
            torch._dynamo.reset()
            counters.clear()
            compiled_step = compile_step(parallel(base.module), base, job)
            compiled_warm = warmup(compiled_step, job.warmup, job.device)
            stats = graph_stats()
        with phases.enter(PHASE_MEASURE):
            eager_ms: list[float] = []
            compiled_ms: list[float] = []
            for _ in range(job.repeat):
                seconds, _ = timed(eager_step, job.device)
                eager_ms.append(seconds * 1000)
                seconds, _ = timed(compiled_step, job.device)
                compiled_ms.append(seconds * 1000)
            synchronize(job.device)
    return Performance(eager_ms=tuple(eager_ms), compiled_ms=tuple(compiled_ms),
                       compilation_latency=max(compiled_warm.seconds - eager_warm.seconds, 0.0),
                       eager_peak_mem=eager_warm.peak_mem, dynamo_peak_mem=compiled_warm.peak_mem,
                       stats=GraphStats(**stats))


def main() -> None:
    from runner.worker import exit_now
    from runner.worker import main as worker_main

    exit_now(worker_main(run_rank))


if __name__ == "__main__":
    main()
