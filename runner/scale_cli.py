"""``perfdash scale``: one model's DistributedDataParallel training at world sizes 1..N (gloo on CPU, nccl on CUDA),
each world size a perfdash run of its own (``world_size_N/``, ingestible as it is) and the scaling factor
throughput(N) / (N x throughput(1)) of eager and compiled over them (``scaling.jsonl`` and a table)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from perfdash.axes import AXIS, add_choice_flags
from runner.allocator import ALLOCATORS, DEFAULT_ALLOCATOR
from runner.backends import RUNNABLE_BACKENDS
from runner.options import DEFAULT_REPEAT, DEFAULT_TIMEOUT_S, DEFAULT_WARMUP
from runner.suites import available_suites


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("scale", help="DDP training of one model at world sizes 1..N: throughput and scaling "
                                            "factor", description=__doc__)
    p.add_argument("--suite", required=True, choices=available_suites())
    p.add_argument("--model", required=True, metavar="NAME", help="the model (a name of the suite's lists)")
    p.add_argument("--nproc", type=int, required=True, metavar="N",
                   help="the largest world size: processes (CUDA: one GPU each; CPU: one slice of cores each)")
    p.add_argument("--models-file", type=Path, metavar="PATH", help="a model list in the suite data-file format")
    p.add_argument("--model-list", default="default", metavar="NAME", help="one of the suite's named lists")
    p.add_argument("--backend", default=AXIS["backend"].default,
                   choices=[b for b in RUNNABLE_BACKENDS if b not in ("onnxruntime", "openvino", "tensorrt")])
    add_choice_flags(p, ("compile_mode", "device", "dtype"))
    p.add_argument("--batch-size", type=int, metavar="N", help="per rank (default: the suite's training batch size)")
    p.add_argument("--cores-per-rank", type=int, metavar="N",
                   help="CPU: cores of each rank's slice, pinned (default: the usable cores divided by --nproc)")
    p.add_argument("--allocator", default=DEFAULT_ALLOCATOR, choices=ALLOCATORS)
    p.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, metavar="N", help="timed steps per side")
    p.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, metavar="N", help="warm-up steps per side")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help="per world size, all ranks together")
    p.add_argument("--output-dir", type=Path, default=Path("results/scale"), metavar="DIR")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console

    from runner.options import OptionsError
    from runner.scale import ScaleOptions, run_scaling
    from runner.scale_summary import scaling_table

    options = ScaleOptions(suite=args.suite, model=args.model, nproc=args.nproc, output_dir=args.output_dir,
                           backend=args.backend, compile_mode=args.compile_mode, device=args.device,
                           dtype=args.dtype, batch_size=args.batch_size, cores_per_rank=args.cores_per_rank,
                           repeat=args.repeat, warmup=args.warmup, timeout_s=args.timeout,
                           models_file=args.models_file, model_list=args.model_list, allocator=args.allocator)
    try:
        report = run_scaling(options, lambda point: print(f"world size {point.world_size}: {point.status}",
                                                          file=sys.stderr))
    except OptionsError as exc:
        print(f"perfdash scale: error: {exc}", file=sys.stderr)
        return 2
    console = Console()
    if not console.is_terminal:
        console = Console(width=180)
    console.print(scaling_table(report))
    print(f"results: {report.options.output_dir} (summary: {report.summary_path.name})")
    return 0
