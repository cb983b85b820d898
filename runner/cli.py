"""``perfdash run``: benchmark one suite configuration into PyTorch-format results (flags in PyTorch's vocabulary)."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import date
from pathlib import Path
from typing import Any

from perfdash.axes import AXIS, add_choice_flags, run_axis_values
from runner.allocator import ALLOCATORS, DEFAULT_ALLOCATOR
from runner.backends import QUANTIZE_CHOICES, RUNNABLE_BACKENDS
from runner.options import DEFAULT_REPEAT, DEFAULT_TIMEOUT_S, DEFAULT_WARMUP, RunOptions
from runner.protocol import DEFAULT_DIAGNOSTIC_BUDGET_S, MAX_TIMED_PAIRS
from runner.suites import available_suites


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("run", help="benchmark a suite: eager vs torch.compile, into PyTorch-format CSVs",
                              description=__doc__)
    p.add_argument("--suite", required=True, choices=available_suites())
    sel = p.add_argument_group("model selection")
    sel.add_argument("--only", metavar="NAME", help="run only this model")
    sel.add_argument("--filter", "-k", metavar="REGEX", action="append", default=[],
                     help="run models whose name matches (repeatable)")
    sel.add_argument("--exclude", "-x", metavar="REGEX", action="append", default=[],
                     help="skip models whose name matches (repeatable)")
    sel.add_argument("--model-list", default="default", metavar="NAME",
                     help="a named list of the suite: default (PyTorch's current list) or, for timm_models and "
                          "huggingface, extended (also the models PyTorch's earlier lists had)")
    sel.add_argument("--models-file", type=Path, metavar="PATH",
                     help="a model list in the suite data-file format (e.g. tiny configs for tests)")
    sel.add_argument("--total-partitions", type=int, default=1, metavar="N")
    sel.add_argument("--partition-id", type=int, default=0, metavar="I")
    cfg = p.add_argument_group("configuration")
    cfg.add_argument("--backend", default=AXIS["backend"].default, choices=RUNNABLE_BACKENDS,
                     help="a torch.compile backend, or onnxruntime / openvino / tensorrt (pip install "
                          "'perfdash[backends]'; inference only)")
    cfg.add_argument("--quantize", choices=QUANTIZE_CHOICES,
                     help="onnxruntime: ONNX Runtime's dynamic int8 quantization (a series of its own)")
    add_choice_flags(cfg, ("compile_mode", "device", "dtype", "mode"))
    cfg.add_argument("--threads", type=int, metavar="N", help="1: single-core single-thread (pinned); default all")
    cfg.add_argument("--batch-size", type=int, metavar="N", help="override the suite's batch sizes")
    cfg.add_argument("--dynamic-shapes", action="store_true")
    cfg.add_argument("--disable-cudagraphs", action="store_true",
                     help="Inductor on CUDA without CUDA graphs: PyTorch's inductor_no_cudagraphs series (the "
                          "headline series captures them, as PyTorch's harness does)")
    cfg.add_argument("--torch", dest="torch_spec", default=os.environ.get("PERFDASH_TORCH_SPEC") or None,
                     metavar="SPEC",
                     help="the torch this run must measure (a release, nightly date or version, commit, or "
                          "version@commit; perfdash/torch_spec.py): checked against the importable torch before any "
                          "model and recorded in the manifest (default: $PERFDASH_TORCH_SPEC, which runner images set)")
    cfg.add_argument("--allocator", default=DEFAULT_ALLOCATOR, choices=ALLOCATORS,
                     help="CPU workers' allocator and OpenMP: dashboard = as PyTorch's CPU dashboard (jemalloc and "
                          "Intel OpenMP preloaded, KMP_*), glibc = C library defaults (PyTorch's harness run by hand), "
                          "perfdash = glibc without mmap/trim (MALLOC_*); part of the configuration (config env)")
    cfg.add_argument("--inductor-config", action="append", default=[], metavar="NAME=VALUE",
                     help="set an Inductor setting for this run's workers (e.g. cpp.simdlen=256; repeatable): "
                          "recorded in the manifest and part of the configuration (config env "
                          "PERFDASH_INDUCTOR_CONFIG), for experiments comparing the code a setting generates")
    cfg.add_argument("--night", type=_night, default=os.environ.get("PERFDASH_NIGHT") or None, metavar="YYYY-MM-DD",
                     help="the night this run belongs to: the UTC date its nightly started, so that every run of one "
                          "nightly (a Jenkins build, `perfdash nightly`) is one night even past midnight UTC "
                          "(default: $PERFDASH_NIGHT, else the date the run starts)")
    meas = p.add_argument_group("measurement")
    meas.add_argument("--accuracy", action="store_true", help="check accuracy (both when neither flag is given)")
    meas.add_argument("--performance", action="store_true", help="measure performance")
    meas.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, metavar="N", help="timed iterations")
    meas.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, metavar="N",
                      help="warm-up iterations of eager and of compiled, each timed as one block: compile latency is "
                           "their difference and peak memory is read over them, as in PyTorch's harness (default "
                           "%(default)s, its count)")
    meas.add_argument("--processes", type=int, default=1, metavar="K",
                      help="measure each model's performance in K worker processes, each timing its share of "
                           "--repeat, and pool their pairs into one result (pyperf's method: what differs between "
                           "processes averages out); compile latency and peak memory are the first (cold) worker's "
                           "(default %(default)s)")
    meas.add_argument("--min-loop-seconds", type=float, default=0.0, metavar="SECONDS", dest="min_loop_s",
                      help="pyperf's minimum time: a model whose --repeat pairs take less than SECONDS (its workers "
                           "together) goes on timing eager/compiled pairs until they have, up to "
                           f"{MAX_TIMED_PAIRS} pairs a worker; a tiny model's result then rests on hundreds of pairs "
                           "instead of 30 (default 0: exactly --repeat pairs, as PyTorch's harness)")
    meas.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS", help="per model")
    meas.add_argument("--diagnostic-budget", type=float, default=DEFAULT_DIAGNOSTIC_BUDGET_S, metavar="SECONDS",
                      help="seconds each diagnostic after the timed loop (kernel profile, code fingerprint) may take; "
                           "one that runs longer is cut and recorded in the manifest, the timed results are kept "
                           "(default %(default)s)")
    meas.add_argument("--cold-start", action="store_true", help="fresh Inductor cache per model (cold compile)")
    out = p.add_argument_group("output")
    out.add_argument("--output-dir", type=Path, default=Path("results"), metavar="DIR")
    out.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=handle)


def options_from_args(args: argparse.Namespace) -> RunOptions:
    return RunOptions(
        **run_axis_values(args), output_dir=args.output_dir, only=args.only, filters=tuple(args.filter),
        excludes=tuple(args.exclude), repeat=args.repeat, warmup=args.warmup, processes=args.processes,
        min_loop_s=args.min_loop_s, timeout_s=args.timeout,
        diagnostic_budget_s=args.diagnostic_budget,
        accuracy=args.accuracy, performance=args.performance, total_partitions=args.total_partitions,
        partition_id=args.partition_id, cold_start=args.cold_start, models_file=args.models_file,
        model_list=args.model_list, quantize=args.quantize, allocator=args.allocator,
        torch_spec=args.torch_spec, night=args.night,
        extra_env=_inductor_env(args.inductor_config))


def _night(text: str) -> date:
    from perfdash.manifest import parse_night

    try:
        return parse_night(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _inductor_env(pairs: list[str]) -> dict[str, str]:
    from runner import inductor_overrides

    try:
        return {inductor_overrides.ENV_NAME: inductor_overrides.encode(pairs)} if pairs else {}
    except ValueError as exc:
        raise SystemExit(f"perfdash run: error: {exc}") from None


class BarProgress:
    """One tqdm bar over the models; its postfix names the model and the phase it is in."""

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled
        self._bar: Any = None

    def start(self, total: int, resumed: int) -> None:
        from tqdm import tqdm

        if resumed:
            print(f"resuming: {resumed} model(s) already in the results", file=sys.stderr)
        self._bar = tqdm(total=total, unit="model", disable=not self._enabled, file=sys.stderr, dynamic_ncols=True)

    def phase(self, name: str, phase: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(f"{name}: {phase}")

    def finished(self, name: str, status: str) -> None:
        if self._bar is not None:
            self._bar.write(f"{name}: {status}")
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console

    from runner.api import run_suite
    from runner.lifeline import terminate_as_exception
    from runner.options import OptionsError
    from runner.summary import render

    options = options_from_args(args)
    progress = BarProgress(enabled=not args.no_progress)
    try:
        with terminate_as_exception():
            report = run_suite(options, progress)
    except OptionsError as exc:
        print(f"perfdash run: error: {exc}", file=sys.stderr)
        return 2
    finally:
        progress.close()
    console = Console()
    if not console.is_terminal:
        console = Console(width=140)  # logs (Jenkins) get full-width tables
    console.print(render(report.config, report.summary, report.results, report.samples))
    print(f"results: {report.paths.performance.parent}")
    return 0
