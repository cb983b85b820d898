"""How much the runner costs and how noisy its speedups are, beside a bare timing loop of the same model.

For one small model (torchvision resnet18, the torchbench suite's builder, batch 4 at 224x224 unless told
otherwise) this runs the real harness (``runner.api.run_suite``: worker process, performance only, warm Inductor
cache) five times and a bare in-process loop (eager and compiled interleaved, same repeat) five times, then prints:

- the harness's overhead: wall time outside the timed iterations and outside compilation, as a share of the run's
  wall time outside compilation, with where it goes: the worker's process start and exit, ``import torch``, the model
  build, the warm-ups, the in-process peak-memory phase, and the parent's own work (options, manifest, CSVs);
- the coefficient of variation of the speedup over the five harness runs and over the five bare loops.

Targets (issue 2): overhead under 10 %; harness speedup CV within 1.5x of the bare loop's.

    .venv/bin/python -m bench.harness [--repeat 30] [--batch-size 4] [--runs 5]

(Run it as a module: started as a script, bench/ comes first on sys.path and bench/bisect.py shadows the standard
library's bisect.)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

MODELS_TOML = """
[[model]]
name = "resnet18"
batch_size = {batch_size}
builder = "torchvision:resnet18"
"""


def harness_runs(runs: int, repeat: int, batch_size: int, workdir: Path) -> list[dict[str, float]]:
    from runner.api import run_suite
    from runner.options import RunOptions

    models = workdir / "models.toml"
    models.write_text(MODELS_TOML.format(batch_size=batch_size))
    out: list[dict[str, float]] = []
    for index in range(runs + 1):  # the first run fills the Inductor cache and is not counted
        options = RunOptions(suite="torchbench", models_file=models, performance=True, repeat=repeat,
                             output_dir=workdir / f"run{index}")
        start = time.perf_counter()
        report = run_suite(options)
        wall = time.perf_counter() - start
        [outcome] = report.outcomes
        if outcome.performance is None or outcome.performance.speedup == 0:
            raise SystemExit(f"harness run failed: {outcome.status}: {outcome.error}")
        if index:
            out.append({"wall": wall, "speedup": outcome.performance.speedup, **outcome.timings})
    return out


def bare_runs(runs: int, repeat: int, batch_size: int) -> list[float]:
    """The same measurement with nothing around it: one process, one model, interleaved timing, medians."""
    import copy
    import os

    import torch
    import torchvision

    os.environ.setdefault("TORCHINDUCTOR_FREEZING", "1")  # as the harness runs CPU inference
    torch._inductor.config.freezing = True
    torch.manual_seed(0)
    model = torchvision.models.resnet18().eval()
    x = torch.randn(batch_size, 3, 224, 224)
    compiled = torch.compile(copy.deepcopy(model))
    speedups = []
    with torch.no_grad():
        for _ in range(2):
            model(x)
            compiled(x)
        for _ in range(runs):
            eager_ms, compiled_ms = [], []
            for _ in range(repeat):
                start = time.perf_counter()
                model(x)
                eager_ms.append(time.perf_counter() - start)
                start = time.perf_counter()
                compiled(x)
                compiled_ms.append(time.perf_counter() - start)
            speedups.append(statistics.median(eager_ms) / statistics.median(compiled_ms))
    return speedups


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=4)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="perfdash-bench-") as tmp:
        runs = harness_runs(args.runs, args.repeat, args.batch_size, Path(tmp))
    bare = bare_runs(args.runs, args.repeat, args.batch_size)

    print(f"model: torchvision resnet18, batch {args.batch_size}, repeat {args.repeat}, CPU inference, "
          f"{args.runs} runs each")
    print(f"{'run':>4} {'wall s':>7} {'compile s':>9} {'timed s':>8} {'overhead s':>10} {'share':>6} "
          f"{'start':>6} {'import':>6} {'build':>6} {'warm-up':>7} {'memory':>6} {'parent':>6} {'speedup':>8}")
    shares = []
    for i, r in enumerate(runs, start=1):
        compile_s = r.get("compile", 0.0)
        timed = r.get("timed", 0.0)
        overhead = r["wall"] - timed - compile_s
        share = overhead / (r["wall"] - compile_s)
        shares.append(share)
        start = r.get("worker_wall", 0.0) - r.get("worker_total", 0.0)  # interpreter start and exit, pipes
        warmups = r.get("eager_warmup", 0.0) + (r.get("measure", 0.0) - r.get("timed_loop_wall", 0.0))
        parent = r["wall"] - r.get("worker_wall", 0.0)
        print(f"{i:>4} {r['wall']:>7.2f} {compile_s:>9.2f} {timed:>8.2f} {overhead:>10.2f} {share:>6.1%} "
              f"{start:>6.2f} {r.get('import', 0.0):>6.2f} {r.get('load', 0.0):>6.2f} {warmups:>7.2f} "
              f"{r.get('memory', 0.0):>6.2f} {parent:>6.2f} {r['speedup']:>7.3f}x")
    harness_speedups = [r["speedup"] for r in runs]
    print(f"harness overhead share (outside compilation): mean {statistics.mean(shares):.1%} "
          f"(target < 10%)")
    print(f"speedup harness: mean {statistics.mean(harness_speedups):.3f}x, CV {cv(harness_speedups):.2%}")
    print(f"speedup bare loop: mean {statistics.mean(bare):.3f}x, CV {cv(bare):.2%} "
          f"(ratio {cv(harness_speedups) / cv(bare):.2f}, target <= 1.5)")


if __name__ == "__main__":
    main()
