"""Backends side by side on this machine, in the shape of the publication that compared PyTorch 2 with ONNX Runtime
and TensorRT (ResNet, batch sizes 1 and 8): per model and batch size, the median latency of eager and of each backend,
and each backend's speedup over the eager run interleaved with it. Every number comes from ``perfdash run`` runs made
by this script in one go (one run per suite, backend and batch size, the models' own suites and tolerances).

    .venv/bin/python -m bench.backends --output-dir /tmp/bench_backends
    .venv/bin/python -m bench.backends --output-dir DIR --no-run        # print the table of an earlier invocation
    .venv/bin/python -m bench.backends --device cuda --backends inductor,onnxruntime,tensorrt --dtype float16

Columns: eager ms is the median of the backends' eager medians (each backend is timed against its own interleaved
eager run); a backend's cell is "ms (speedup x)", or its status when it failed or failed accuracy; "fastest" names the
backend with the smallest passing latency, eager included. The figures last printed are in bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from perfdash.contract import read_accuracy_csv, read_performance_csv
from perfdash.manifest import Manifest
from runner.api import RunPaths, run_suite
from runner.options import RunOptions

# (suite, model): the publication's ResNet (torchbench's resnet18, the size that fits this CPU), a Hugging Face
# model and a timm model, from the suites' default lists.
DEFAULT_MODELS = ("torchbench:resnet18", "huggingface:ElectraForCausalLM", "timm_models:mobilenetv3_large_100")
# backend[+quantize]: each is its own series (onnxruntime+int8-dynamic is the variant onnxruntime_int8_dynamic).
DEFAULT_BACKENDS = ("inductor", "onnxruntime", "onnxruntime+int8-dynamic", "openvino")


@dataclass(frozen=True, slots=True)
class Cell:
    status: str
    latency_ms: float | None
    speedup: float | None
    eager_ms: float | None
    compile_s: float | None


def _options(suite: str, model: str, backend: str, batch_size: int, args: argparse.Namespace) -> RunOptions:
    name, _, quantize = backend.partition("+")
    return RunOptions(suite=suite, only=model, backend=name, quantize=quantize or None, batch_size=batch_size,
                      device=args.device, dtype=args.dtype, threads=args.threads, repeat=args.repeat,
                      warmup=args.warmup, timeout_s=args.timeout, output_dir=args.output_dir / f"bs{batch_size}")


def _cell(paths: RunPaths, model: str) -> Cell | None:
    if not paths.performance.exists():
        return None
    perf = {r.name: r for r in read_performance_csv(paths.performance)}.get(model)
    accuracy = ({r.name: r.accuracy for r in read_accuracy_csv(paths.accuracy)}.get(model)
                if paths.accuracy.exists() else None)
    if perf is None:
        return None
    measured = perf.speedup > 0 and perf.abs_latency > 0
    status = accuracy or ("pass" if measured else "fail_to_run")
    return Cell(status=status, latency_ms=perf.abs_latency if measured else None,
                speedup=perf.speedup if measured else None,
                eager_ms=perf.abs_latency * perf.speedup if measured else None,
                compile_s=perf.compilation_latency if measured else None)


def _text(cell: Cell | None) -> str:
    if cell is None:
        return "not run"
    if cell.latency_ms is None or cell.status not in ("pass", "pass_due_to_skip"):
        return cell.status if cell.latency_ms is None else f"{cell.status} ({cell.latency_ms:.2f})"
    return f"{cell.latency_ms:.2f} ({cell.speedup:.2f}x)"


def table(args: argparse.Namespace) -> str:
    header = ["model", "bs", "eager ms", *args.backends, "fastest"]
    rows = [header]
    notes: list[str] = []
    for entry in args.models:
        suite, _, model = entry.partition(":")
        for batch_size in args.batch_sizes:
            cells = {}
            for backend in args.backends:
                options = _options(suite, model, backend, batch_size, args)
                paths = RunPaths.for_config(options.output_dir, options.run_config())
                cells[backend] = _cell(paths, model)
                if paths.manifest.exists():
                    manifest = Manifest.read(paths.manifest)
                    if model in manifest.model_errors:
                        notes.append(f"{model} bs {batch_size} {backend}: {manifest.model_errors[model][:160]}")
            eagers = [c.eager_ms for c in cells.values() if c is not None and c.eager_ms is not None]
            eager = statistics.median(eagers) if eagers else None
            passing = {b: c.latency_ms for b, c in cells.items()
                       if c is not None and c.latency_ms is not None and c.status in ("pass", "pass_due_to_skip")}
            if eager is not None:
                passing["eager"] = eager
            fastest = min(passing, key=passing.__getitem__) if passing else "-"
            rows.append([model, str(batch_size), f"{eager:.2f}" if eager is not None else "-",
                         *(_text(cells[b]) for b in args.backends), fastest])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines + (["", *notes] if notes else []))


def run_all(args: argparse.Namespace) -> None:
    for entry in args.models:
        suite, _, model = entry.partition(":")
        for batch_size in args.batch_sizes:
            for backend in args.backends:
                started = time.perf_counter()
                report = run_suite(_options(suite, model, backend, batch_size, args))
                status = report.outcomes[0].status if report.outcomes else "resumed"
                print(f"{model} bs {batch_size} {backend}: {status} ({time.perf_counter() - started:.0f} s)",
                      file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--models", type=lambda s: s.split(","), default=list(DEFAULT_MODELS),
                        help="suite:model,... (default: %(default)s)")
    parser.add_argument("--backends", type=lambda s: s.split(","), default=list(DEFAULT_BACKENDS),
                        help="backend[+quantize],... (default: %(default)s)")
    parser.add_argument("--batch-sizes", type=lambda s: [int(v) for v in s.split(",")], default=[1, 8])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--no-run", action="store_true", help="only print the table of an earlier invocation")
    args = parser.parse_args(argv)
    start_load = os.getloadavg()
    started = time.perf_counter()
    if not args.no_run:
        run_all(args)
    print(table(args))
    end_load = os.getloadavg()
    print(f"\nrepeat {args.repeat}, warmup {args.warmup}, threads {args.threads or 'all'}, device {args.device}, "
          f"dtype {args.dtype}; {time.perf_counter() - started:.0f} s; load average (1/5/15 min) at start "
          f"{start_load[0]:.1f}/{start_load[1]:.1f}/{start_load[2]:.1f}, at end "
          f"{end_load[0]:.1f}/{end_load[1]:.1f}/{end_load[2]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
