"""How much the runner costs and how noisy its speedups are, beside a bare timing loop of the same model.

For one small model (torchvision resnet18, the torchbench suite's builder, batch 4 at 224x224 unless told
otherwise) this runs the real harness (``runner.api.run_suite``: fork server, one worker process per model,
performance only, warm Inductor cache) on a list of ``--runs`` copies of the model, and after each copy a bare
in-process loop (eager and compiled interleaved, same repeat), so both see the machine at the same moments. The bench
runs the harness with ``allocator="perfdash"`` and restarts itself with those settings (runner.allocator.CPU_MALLOC_ENV)
so that the bare loop runs under them too. It prints:

- per model, the harness's overhead: the model's wall time outside the timed iterations and outside compilation, as
  a share of its wall time outside compilation, with where it goes: the worker's fork and exit, its imports, the model
  build, the warm-ups (the validation call after loading, as PyTorch's load_model makes, the first eager call and
  the untimed iterations), the peak-memory phase (whose calls are the
  timed loop's warm-up) and the parent's own work (CSV rows, manifest);
- the fork server's start (``import torch`` and the suite's libraries, once per run), and the share with it spread
  over the run's models, and for a run of this one model alone;
- the coefficient of variation of the speedup over the harness's models and over the bare loops.

Targets (issue 2): overhead under 10 %; harness speedup CV within 1.5x of the bare loop's.

    .venv/bin/python -m bench.harness [--repeat 30] [--batch-size 4] [--runs 5]

"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

MODEL_ENTRY = """
[[model]]
name = "{name}"
batch_size = {batch_size}
builder = "torchvision:resnet18"
"""


class BareLoop:
    """The same measurement with nothing around it: one process, one model, interleaved timing, medians."""

    def __init__(self, batch_size: int, repeat: int) -> None:
        import copy
        import os

        os.environ.setdefault("TORCHINDUCTOR_FREEZING", "1")  # as the harness runs CPU inference
        import torch
        import torchvision

        torch._inductor.config.freezing = True
        torch.manual_seed(0)
        self.torch = torch
        self.repeat = repeat
        self.model = torchvision.models.resnet18().eval()
        self.x = torch.randn(batch_size, 3, 224, 224)
        self.compiled = torch.compile(copy.deepcopy(self.model))
        with torch.no_grad():
            for _ in range(2):
                self.model(self.x)
                self.compiled(self.x)

    def speedup(self) -> float:
        eager_ms, compiled_ms = [], []
        with self.torch.no_grad():
            self.model(self.x)  # the loop's own warm-up after the harness's worker had the cores
            self.compiled(self.x)
            for _ in range(self.repeat):
                start = time.perf_counter()
                self.model(self.x)
                eager_ms.append(time.perf_counter() - start)
                start = time.perf_counter()
                self.compiled(self.x)
                compiled_ms.append(time.perf_counter() - start)
        return statistics.median(eager_ms) / statistics.median(compiled_ms)


class Interleave:
    """A runner.api.Progress that runs a bare loop after each model the harness finishes."""

    def __init__(self, bare: Callable[[], float]) -> None:
        self.bare = bare
        self.speedups: list[float] = []
        self.bare_seconds = 0.0

    def start(self, total: int, resumed: int) -> None:
        pass

    def phase(self, name: str, phase: str) -> None:
        pass

    def finished(self, name: str, status: str) -> None:
        start = time.perf_counter()
        self.speedups.append(self.bare())
        self.bare_seconds += time.perf_counter() - start


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values)


def main() -> None:
    from runner.allocator import CPU_MALLOC_ENV
    from runner.api import run_suite
    from runner.options import RunOptions

    if any(os.environ.get(k) != v for k, v in CPU_MALLOC_ENV.items()):
        # glibc reads these at start: the bare loop runs under the allocator settings the harness gives its workers.
        os.execve(sys.executable, [sys.executable, "-m", "bench.harness", *sys.argv[1:]],
                  {**os.environ, **CPU_MALLOC_ENV})

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=4)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="perfdash-bench-") as tmp:
        workdir = Path(tmp)

        def options(name: str, copies: list[str], repeat: int) -> RunOptions:
            models = workdir / f"{name}.toml"
            models.write_text("".join(MODEL_ENTRY.format(name=n, batch_size=args.batch_size) for n in copies))
            return RunOptions(suite="torchbench", models_file=models, performance=True, repeat=repeat,
                              output_dir=workdir / name, allocator="perfdash")

        run_suite(options("fill-cache", ["resnet18"], 1))  # compiles once so the measured runs hit a warm cache
        bare = BareLoop(args.batch_size, args.repeat)
        interleave = Interleave(bare.speedup)
        start = time.perf_counter()
        report = run_suite(options("measured", [f"resnet18_{i}" for i in range(1, args.runs + 1)], args.repeat),
                           interleave)
        suite_wall = time.perf_counter() - start - interleave.bare_seconds

    rows = []
    for outcome in report.outcomes:
        t = outcome.timings
        if outcome.status != "pass":
            raise SystemExit(f"harness run failed: {outcome.status}: {outcome.error}")
        rows.append(t)
    parent_total = suite_wall - report.server_start_s - sum(t["worker_wall"] for t in rows)
    parent = parent_total / len(rows)

    print(f"model: torchvision resnet18, batch {args.batch_size}, repeat {args.repeat}, CPU inference, "
          f"{args.runs} models in one run, a bare loop after each")
    print(f"{'model':>5} {'wall s':>7} {'compile s':>9} {'timed s':>8} {'overhead s':>10} {'share':>6} "
          f"{'fork':>6} {'import':>6} {'build':>6} {'warm-up':>7} {'memory':>6} {'parent':>6} {'speedup':>8}")
    shares, overheads, compiles, walls = [], [], [], []
    for i, (t, outcome) in enumerate(zip(rows, report.outcomes, strict=True), start=1):
        wall = t["worker_wall"] + parent
        compile_s = t.get("compile", 0.0)
        timed = t.get("timed", 0.0)
        overhead = wall - timed - compile_s
        shares.append(overhead / (wall - compile_s))
        overheads.append(overhead)
        compiles.append(compile_s)
        walls.append(wall)
        fork = t["worker_wall"] - t.get("worker_total", 0.0)  # fork, exit and the pipes, outside the worker's clock
        warmups = (t.get("eager_validate", 0.0) + t.get("eager_warmup", 0.0)
                   + (t.get("measure", 0.0) - t.get("timed_loop_wall", 0.0)))
        assert outcome.performance is not None
        print(f"{i:>5} {wall:>7.2f} {compile_s:>9.2f} {timed:>8.2f} {overhead:>10.2f} {shares[-1]:>6.1%} "
              f"{fork:>6.2f} {t.get('import', 0.0):>6.2f} {t.get('load', 0.0):>6.2f} {warmups:>7.2f} "
              f"{t.get('memory', 0.0):>6.2f} {parent:>6.2f} {outcome.performance.speedup:>7.3f}x")
    server = report.server_start_s
    spread = (sum(overheads) + server) / (sum(walls) + server - sum(compiles))
    alone = (overheads[0] + server) / (walls[0] + server - compiles[0])
    print(f"fork server start (import torch, torchvision, Dynamo, Inductor): {server:.2f} s, once per run")
    print(f"harness overhead share (outside compilation): per model mean {statistics.mean(shares):.1%}; "
          f"with the server's start spread over these {len(rows)} models {spread:.1%}; "
          f"a run of one model alone {alone:.1%} (target < 10%)")
    harness_speedups = [o.performance.speedup for o in report.outcomes if o.performance is not None]
    print(f"speedup harness: mean {statistics.mean(harness_speedups):.3f}x, CV {cv(harness_speedups):.2%}")
    print(f"speedup bare loop: mean {statistics.mean(interleave.speedups):.3f}x, CV {cv(interleave.speedups):.2%} "
          f"(ratio {cv(harness_speedups) / cv(interleave.speedups):.2f}, target <= 1.5)")


if __name__ == "__main__":
    main()
