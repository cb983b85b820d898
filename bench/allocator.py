"""How much ``perfdash run --allocator`` moves eager and compiled times on this machine (issue 12, part 3).

For every round and model it runs ``perfdash run --performance --only M --allocator A`` once per allocator
(runner.allocator: dashboard, glibc, perfdash), in a rotated order each round so that no allocator always goes first,
each in its own output directory with the persistent Inductor cache (the allocator does not change what Inductor
compiles). It prints per model and allocator the medians over the rounds of the eager and compiled latency (ms), the
speedup, and each against the default (dashboard), then every round's values and the 1-minute load around each run.
Run it as a module from the repository root:

    python -m bench.allocator [--models SUITE:NAME@BATCH ...] [--rounds 3] [--repeat 30] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.pt_parity import REPO, Model, number, parse_model, perfdash_models, read_row
from runner.allocator import ALLOCATORS, DEFAULT_ALLOCATOR, AllocatorUnavailable, allocator_env, check

DEFAULT_MODELS = ("timm_models:mobilenetv2_100@8", "huggingface:DistilBertForMaskedLM@2",
                  "huggingface:BlenderbotSmallForCausalLM@4")


@dataclass(slots=True)
class Timing:
    model: str
    allocator: str
    round: int
    row: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    load_before: float = 0.0
    load_after: float = 0.0

    def value(self, key: str) -> float | None:
        return number(self.row, key)


def command(args: argparse.Namespace, model: Model, allocator: str, out_dir: Path) -> list[str]:
    cmd = [str(Path(sys.executable).parent / "perfdash"), "run", "--suite", model.suite, "--performance",
           "--repeat", str(args.repeat), "--output-dir", str(out_dir), "--no-progress", "--allocator", allocator]
    if model.name in perfdash_models(model.suite):
        cmd += ["--only", model.name]
    else:  # outside perfdash's list: a one-model list in the suite's data-file format
        out_dir.mkdir(parents=True, exist_ok=True)
        models_file = out_dir / "models.toml"
        models_file.write_text(f'[[model]]\nname = "{model.name}"\nbatch_size = {model.batch_size}\n')
        cmd += ["--models-file", str(models_file)]
    if model.batch_size:
        cmd += ["--batch-size", str(model.batch_size)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    return cmd


def run_one(args: argparse.Namespace, model: Model, allocator: str, rnd: int, work: Path) -> Timing:
    out = work / f"r{rnd}_{allocator}_{model.name.replace('/', '_')}"
    timing = Timing(model.label, allocator, rnd, load_before=os.getloadavg()[0])
    cmd = command(args, model, allocator, out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "log.txt").open("w") as log:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "bisect")])}  # this checkout
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout, env=env)
    timing.load_after = os.getloadavg()[0]
    timing.row = read_row(sorted(out.glob("*_performance.csv")), model.name)
    if proc.returncode or not timing.row:
        timing.error = f"exit {proc.returncode}, no row (log: {out / 'log.txt'})"
    return timing


def med(timings: list[Timing], key: str) -> float | None:
    values = [v for t in timings if (v := t.value(key)) is not None]
    return statistics.median(values) if values else None


def report(models: list[Model], allocators: list[str], timings: list[Timing]) -> list[str]:
    lines = ["| model | allocator | eager ms | compiled ms | speedup | eager / dashboard | compiled / dashboard | "
             "speedup / dashboard |", "|---|---|---|---|---|---|---|---|"]
    for model in models:
        base = [t for t in timings if t.model == model.label and t.allocator == DEFAULT_ALLOCATOR]
        for allocator in allocators:
            mine = [t for t in timings if t.model == model.label and t.allocator == allocator]
            cells = []
            for key in ("eager_latency", "abs_latency", "speedup"):
                cells.append(f"{v:.3f}" if (v := med(mine, key)) is not None else "–")
            ratios = []
            for key in ("eager_latency", "abs_latency", "speedup"):
                a, b = med(mine, key), med(base, key)
                ratios.append(f"{a / b:.3f}" if a and b else "–")
            lines.append(f"| {model.label} | {allocator} | {' | '.join(cells)} | {' | '.join(ratios)} |")
    lines += ["", "| round | model | allocator | eager ms | compiled ms | speedup | load before → after |",
              "|---|---|---|---|---|---|---|"]
    for t in timings:
        values = [f"{v:.3f}" if (v := t.value(k)) is not None else (t.error or "–")
                  for k in ("eager_latency", "abs_latency", "speedup")]
        lines.append(f"| {t.round} | {t.model} | {t.allocator} | {' | '.join(values)} | "
                     f"{t.load_before:.2f} → {t.load_after:.2f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.allocator", description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), metavar="SUITE:NAME@BATCH")
    p.add_argument("--allocators", nargs="+", default=list(ALLOCATORS), choices=ALLOCATORS)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--threads", type=int)
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    p.add_argument("--workdir", type=Path, help="where runs write (default: a new temporary directory, kept)")
    p.add_argument("--out", type=Path, help="also write the markdown report here")
    args = p.parse_args(argv)
    for allocator in args.allocators:
        try:
            check(allocator_env(allocator, "cpu"))
        except AllocatorUnavailable as exc:
            raise SystemExit(f"--allocator {allocator}: {exc}") from None
    try:
        models = [parse_model(spec, None) for spec in args.models]
    except argparse.ArgumentTypeError as exc:
        raise SystemExit(str(exc)) from None
    work = args.workdir or Path(tempfile.mkdtemp(prefix="allocator-"))
    print(f"runs write under {work}", file=sys.stderr)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    timings: list[Timing] = []
    for rnd in range(1, args.rounds + 1):
        shift = (rnd - 1) % len(args.allocators)
        order = args.allocators[shift:] + args.allocators[:shift]
        for model in models:
            for allocator in order:
                timing = run_one(args, model, allocator, rnd, work)
                timings.append(timing)
                print(f"round {rnd} {model.label} {allocator}: eager {timing.value('eager_latency')} ms, compiled "
                      f"{timing.value('abs_latency')} ms (load {timing.load_after:.2f})", file=sys.stderr)
    lines = [f"{started}, {os.cpu_count()} CPUs, rounds {args.rounds}, repeat {args.repeat}, threads "
             f"{args.threads or 'all'}", "", *report(models, args.allocators, timings)]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
