"""Parity of perfdash with PyTorch's own harness (benchmarks/dynamo) on the same models, settings and machine.

For each round and model it runs PyTorch's harness (``DIR/<suite>.py --performance ...``, one process per model, as
its suite runner does) and ``perfdash run --performance`` on the same model, device, dtype, batch size, threads,
freezing and allocator environment, the order of the two swapped every round; each run gets an empty Inductor cache
(cold compile on both sides). Once per model it runs both accuracy checks. It prints, per model, the medians over the
rounds of speedup, abs_latency, compilation_latency, peak memory and compression ratio of each side with the ratio
perfdash / PyTorch, both accuracy statuses, every round's raw values, the one-time cost of Inductor's first use in a
fresh process (which PyTorch's compiled warm-up pays and perfdash's fork server pays before forking), the machine's
load (os.getloadavg) around every run, and abs_latency's account: a fixed calibration workload timed before and after
each side's performance run (bench.machine_calibration), recorded beside the side in results.jsonl, and per cell how
far the machine moved between the two sides next to the abs_latency ratio and that ratio corrected by it. Run it as a
module from the repository root:

    python -m bench.pt_parity --pytorch-dir DIR [--models timm_models:lcnet_050 ...] [--rounds 2] [--batch-size N]
    python -m bench.pt_parity --pytorch-dir DIR --sample-suite timm_models --sample-suite huggingface --sample 15 \
        --seed S

With ``--sample-suite`` the models are a seeded sample of PyTorch's current list of that suite, read from DIR
(bench.pt_lists: never the models already tuned on, never one PyTorch skips on the device, never a TorchBench model
that cannot be built here: missing input data, downloaded pretrained weights), at the suite's sample batch size; the
draw and what it left out (with why) are printed, and the report adds the share of cells within the issue's targets
per metric.

Every finished run is appended to ``--workdir``/results.jsonl as it ends. A sampled run of two rounds takes hours
on a small machine; stopped part-way, the same command with ``--resume`` keeps what it finished and runs the rest.

DIR is a checkout of PyTorch's benchmarks/dynamo (never part of this repository); bench/README.md says how to get
one and what this compares.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.machine_calibration import (
    MOVE_TOLERANCE,
    Calibration,
    CalibrationError,
    CellAccount,
    SideRun,
    account,
    calibrate,
)
from bench.pt_lists import LIST_FILES, MIN_SAMPLE, ListedModel, ListError, read_list, sample_suite
from runner.allocator import ALLOCATORS, DEFAULT_ALLOCATOR
from runner.lifeline import dies_with_this_process
from runner.options import DEFAULT_WARMUP

REPO = Path(__file__).resolve().parents[1]
# Issue 18's five models at the batch sizes of the recorded "before" table (small enough for a 2-core machine).
DEFAULT_MODELS = ("timm_models:lcnet_050@8", "timm_models:mobilenetv2_100@8", "timm_models:resnet18@8",
                  "huggingface:DistilBertForMaskedLM@2", "huggingface:BlenderbotSmallForCausalLM@4")
PT_SCRIPTS = {"timm_models": "timm_models.py", "huggingface": "huggingface.py", "torchbench": "torchbench.py"}
METRICS = ("speedup", "abs_latency", "compilation_latency", "compression_ratio", "eager_peak_mem", "dynamo_peak_mem")
# The targets: (metric, allowed relative difference of perfdash / PyTorch from 1).
TARGETS = {"speedup": 0.05, "abs_latency": 0.05, "compilation_latency": 0.10, "compression_ratio": 0.10}
SIDES = ("pytorch", "perfdash")
TIMED_OUT = "timed out"  # how a run past --timeout begins its error
# Sampled models run at these batch sizes (issue 32's settings for a 2-core machine) unless --batch-size is given.
SAMPLE_BATCH = {"timm_models": 8, "huggingface": 2, "torchbench": 4}
# The models parity was tuned on (issue 18's five, DEFAULT_MODELS): a sample never draws them.
TUNED = frozenset(spec.partition("@")[0] for spec in DEFAULT_MODELS)

# Timed in a fresh interpreter that has imported what PyTorch's common.py imports at its top. "import": importing
# Inductor's compiler modules, which the first compile does; "first use": the first compile of a trivial function
# minus the second (imports plus one-time set-up such as the C++ compiler and vector-ISA checks, which a fresh Inductor
# cache makes a process redo). PyTorch's compiled warm-up pays both in its one-model process; perfdash's fork server
# imports the modules once before forking.
FIRST_USE_PROBE = """
import time, torch, torch._dynamo, torch._inductor.config, torch._inductor.utils
t = time.perf_counter()
import torch._inductor.compile_fx, torch._inductor.graph, torch._inductor.scheduler, torch._inductor.lowering
import torch._inductor.codegen.cpp, torch._inductor.codegen.cpp_wrapper_cpu
imported = time.perf_counter() - t
def timed(fn, x):
    t = time.perf_counter(); torch.compile(fn, backend="inductor")(x); return time.perf_counter() - t
x = torch.randn(8, 8)
first = timed(lambda a: a.sin() + 1, x)
second = timed(lambda a: a.cos() * 2, x)
print(imported, first - second)
"""


@dataclass(frozen=True)
class Model:
    suite: str
    name: str
    batch_size: int | None  # None: each side its own default

    @property
    def label(self) -> str:
        return f"{self.suite}:{self.name}"


@dataclass
class RunResult:
    side: str
    model: str
    round: int
    kind: str  # "performance" or "accuracy"
    row: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    load_before: float = 0.0
    load_after: float = 0.0
    error: str = ""
    # The machine calibration right before and after a performance run (bench.machine_calibration); None when not
    # measured (accuracy runs) or when it failed.
    calibration_before: Calibration | None = None
    calibration_after: Calibration | None = None


def parse_model(spec: str, batch_size: int | None) -> Model:
    suite, sep, rest = spec.partition(":")
    if not sep or suite not in PT_SCRIPTS or not rest:
        raise argparse.ArgumentTypeError(f"model {spec!r}: write SUITE:NAME[@BATCH], SUITE one of "
                                         f"{', '.join(PT_SCRIPTS)}")
    name, at, bs = rest.partition("@")
    if at and not bs.isdigit():
        raise argparse.ArgumentTypeError(f"model {spec!r}: batch size after @ must be a positive integer")
    return Model(suite, name, int(bs) if at else batch_size)


def perfdash_models(suite: str, model_list: str = "default") -> dict[str, int]:
    from runner.suites import get_suite  # torch-free: reads the suite's data file

    suite_obj = get_suite(suite)
    if model_list not in suite_obj.model_lists():
        return {}
    return {m.name: m.batch_size for m in suite_obj.models(model_list=model_list)}


def common_env(args: argparse.Namespace, cache_dir: Path) -> dict[str, str]:
    """What both sides start with: the settings of perfdash's CPU workers that PyTorch's harness reads from the
    environment, and the allocator and OpenMP runtime of ``--allocator`` exactly as perfdash's workers get them
    (runner.allocator.process_env), so that PyTorch's harness runs under the same."""
    from runner.allocator import INTEL_OPENMP, JEMALLOC, allocator_env, find_library, process_env

    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache_dir), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "bisect")])}
    if args.device == "cpu":
        env["TORCHINDUCTOR_FREEZING"] = "1"
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    env = process_env(allocator_env(args.allocator, args.device), base=env)
    if args.launcher != "none":  # xeon-launch preloads by path: the files perfdash's workers get
        env.setdefault("JEMALLOC_LIB", str(find_library(JEMALLOC)))
        env.setdefault("IOMP_LIB", str(find_library(INTEL_OPENMP)))
    return env


XEON_LAUNCH = REPO / "docker" / "xeon-launch.sh"


def launcher(args: argparse.Namespace) -> list[str]:
    """The prefix both sides run under: none, or the Xeon image's launcher with one of its thread configurations
    (jemalloc and Intel's OpenMP preloaded, KMP_* and OMP_NUM_THREADS set, pinned with numactl/taskset), which is how
    PyTorch's CPU dashboard runs its harness (test_inductor_set_cpu_affinity in PyTorch's .ci/pytorch/test.sh)."""
    return [] if args.launcher == "none" else ["bash", str(XEON_LAUNCH), args.launcher, "--"]


def pytorch_command(args: argparse.Namespace, model: Model, kind: str, out_csv: Path) -> list[str]:
    cmd = [sys.executable, str(args.pytorch_dir / PT_SCRIPTS[model.suite]), f"--{kind}", "--inference",
           "--backend", "inductor", "--devices", args.device, "--only", model.name, "--output", str(out_csv),
           "--repeat", str(args.repeat), "--dashboard"]
    if args.device == "cpu":
        cmd.append("--freezing")
    if model.batch_size:
        cmd += ["--batch-size", str(model.batch_size)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    return cmd


def perfdash_command(args: argparse.Namespace, model: Model, kind: str, out_dir: Path) -> list[str]:
    cmd = [str(Path(sys.executable).parent / "perfdash"), "run", "--suite", model.suite, f"--{kind}",
           "--device", args.device, "--repeat", str(args.repeat), "--output-dir", str(out_dir), "--no-progress",
           "--cold-start", "--allocator", args.allocator]
    if model.name in perfdash_models(model.suite):
        cmd += ["--only", model.name]
    elif model.name in perfdash_models(model.suite, "extended"):  # e.g. a model PyTorch's older lists had
        cmd += ["--model-list", "extended", "--only", model.name]
    else:  # a model perfdash's list lacks (timm resnet18): a one-model list in the suite's data-file format
        if model.batch_size is None:
            raise SystemExit(f"{model.label} is not in perfdash's {model.suite} list: give its batch size "
                             f"({model.label}@N or --batch-size N)")
        models_file = out_dir / "models.toml"
        out_dir.mkdir(parents=True, exist_ok=True)
        models_file.write_text(f'[[model]]\nname = "{model.name}"\nbatch_size = {model.batch_size}\n')
        cmd += ["--models-file", str(models_file)]
    if model.batch_size:
        cmd += ["--batch-size", str(model.batch_size)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    return cmd


def read_row(paths: list[Path], name: str) -> dict[str, str]:
    """The last row of ``name`` in the first of ``paths`` that has one (the harness appends)."""
    for path in paths:
        with path.open(newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if r.get("name") == name]
        if rows:
            return rows[-1]
    return {}


def run_one(args: argparse.Namespace, side: str, model: Model, kind: str, rnd: int, work: Path) -> RunResult:
    run_dir = work / f"r{rnd}_{side}_{kind}_{model.name.replace('/', '_')}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    env = common_env(args, run_dir / "inductor-cache")
    if side == "pytorch":
        env.update(args.pytorch_env)
        out_csv = run_dir / f"{kind}.csv"
        cmd = pytorch_command(args, model, kind, out_csv)
    else:
        cmd = perfdash_command(args, model, kind, run_dir / "out")
    result = RunResult(side, model.label, rnd, kind, load_before=os.getloadavg()[0])
    start = time.perf_counter()
    with (run_dir / "log.txt").open("w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        try:
            # The side dies with this bench even when the bench is killed outright (its timeout kills the side
            # itself): PyTorch's harness arms nothing of its own, and `nice` execs it.
            proc = subprocess.run(["nice", "-n", str(args.nice), *launcher(args), *cmd], cwd=run_dir, env=env,
                                  stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout,
                                  preexec_fn=dies_with_this_process())
            if proc.returncode:
                result.error = f"exit {proc.returncode} (log: {run_dir / 'log.txt'})"
        except subprocess.TimeoutExpired:
            result.error = f"{TIMED_OUT} after {args.timeout:.0f} s"
    result.wall_s = time.perf_counter() - start
    result.load_after = os.getloadavg()[0]
    csvs = [out_csv] if side == "pytorch" else sorted((run_dir / "out").glob(f"*_{kind}.csv"))
    csvs = [p for p in csvs if p.exists()]
    result.row = read_row(csvs, model.name)
    if not result.row and not result.error:
        result.error = f"no {kind} row for {model.name} (log: {run_dir / 'log.txt'})"
    return result


def first_use_cost(args: argparse.Namespace, work: Path) -> tuple[float, float] | None:
    """(Inductor import seconds, first-use seconds) in a fresh process with an empty Inductor cache."""
    cache = Path(tempfile.mkdtemp(prefix="first-use-", dir=work))
    proc = subprocess.run(["nice", "-n", str(args.nice), sys.executable, "-c", FIRST_USE_PROBE],
                          preexec_fn=dies_with_this_process(),
                          env=common_env(args, cache), capture_output=True, text=True, timeout=600)
    try:
        imported, first = proc.stdout.strip().splitlines()[-1].split()
        return float(imported), float(first)
    except (IndexError, ValueError):
        return None


def calibrate_machine(args: argparse.Namespace, work: Path) -> Calibration | None:
    """The calibration workload under the sides' niceness, launcher and environment; None (said on stderr) when it
    fails: the runs go on without it."""
    try:
        return calibrate(["nice", "-n", str(args.nice), *launcher(args)], common_env(args, work / "calibration"))
    except CalibrationError as exc:
        print(f"machine calibration: {exc}", file=sys.stderr)
        return None


def number(row: dict[str, str], key: str) -> float | None:
    if key == "eager_latency":  # not a CSV column: the eager median, ms (abs_latency is the compiled one)
        speedup, compiled = number(row, "speedup"), number(row, "abs_latency")
        return speedup * compiled if speedup and compiled else None
    try:
        value = float(row[key])
    except (KeyError, TypeError, ValueError):
        return None
    return value if value == value else None  # NaN is missing


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def ratio_cell(pd: float | None, pt: float | None, metric: str) -> str:
    if pd is None or pt is None or pt == 0:
        return "–"
    r = pd / pt
    mark = ""
    if metric in TARGETS:
        mark = " ✓" if abs(r - 1) <= TARGETS[metric] else " ✗"
    return f"{r:.3f}{mark}"


def summary_table(models: list[Model], results: list[RunResult], first_use: list[tuple[float, float]]) -> list[str]:
    fu = median([imported for imported, _ in first_use])
    lines = ["| model | batch pt / pd | metric | PyTorch | perfdash | perfdash / PyTorch |",
             "|---|---|---|---|---|---|"]
    for model in models:
        perf = {s: [r for r in results if r.model == model.label and r.side == s and r.kind == "performance"]
                for s in SIDES}
        acc = {s: next((r for r in results if r.model == model.label and r.side == s and r.kind == "accuracy"),
                       None) for s in SIDES}
        bs = " / ".join(next((r.row.get("batch_size", "?") for r in perf[s] if r.row), "?") for s in SIDES)
        first = True
        for metric in (*METRICS[:2], "eager_latency", *METRICS[2:]):
            med = {s: median([v for r in perf[s] if (v := number(r.row, metric)) is not None]) for s in SIDES}
            head = f"| {model.label} | {bs} " if first else "| | "
            first = False
            lines.append(f"{head}| {metric} | {fmt(med['pytorch'])} | {fmt(med['perfdash'])} | "
                         f"{ratio_cell(med['perfdash'], med['pytorch'], metric)} |")
            if metric == "compilation_latency" and fu is not None and med["pytorch"] is not None:
                adj = med["pytorch"] - fu
                lines.append(f"| | | compilation_latency − Inductor import ({fu:.2f} s) | {fmt(adj)} | "
                             f"{fmt(med['perfdash'])} | {ratio_cell(med['perfdash'], adj, metric)} |")
        statuses = {s: (r.row.get("accuracy") or r.error or "–") if (r := acc[s]) else "not run" for s in SIDES}
        same = ("–" if not any(acc.values()) else
                "equal ✓" if statuses["pytorch"] == statuses["perfdash"] else "differ ✗")
        lines.append(f"| | | accuracy | {statuses['pytorch']} | {statuses['perfdash']} | {same} |")
        errors = [f"{r.side} round {r.round}: {r.error}" for s in SIDES for r in perf[s] if r.error]
        for err in errors:
            lines.append(f"| | | error | {err} | | |")
    return lines


@dataclass(frozen=True)
class Share:
    """How many of a metric's cells (one per model: the medians over the rounds) are within the target."""

    metric: str
    within: int
    measured: int  # cells with a value on both sides
    total: int  # models compared; a cell missing on either side counts as not within

    @property
    def share(self) -> float | None:
        return self.within / self.total if self.total else None


def within_target(metric: str, pd: float | None, pt: float | None) -> bool | None:
    """Whether perfdash / PyTorch is within the issue's target for ``metric``; None when a side has no value."""
    if pd is None or pt is None or pt == 0:
        return None
    return abs(pd / pt - 1) <= TARGETS[metric] + 1e-12  # an exact 5 % is within


def accuracy_status(result: RunResult | None) -> str | None:
    if result is None:
        return None
    return result.row.get("accuracy") or None


def target_shares(models: list[Model], results: list[RunResult]) -> list[Share]:
    """Per metric of TARGETS and for the accuracy status, the share of models within target over the medians of
    the rounds (what the summary table marks ✓); a model one side did not measure counts against the share."""
    shares = []
    for metric in TARGETS:
        within = measured = 0
        for model in models:
            med = {s: median([v for r in results if r.model == model.label and r.side == s
                              and r.kind == "performance" and (v := number(r.row, metric)) is not None])
                   for s in SIDES}
            verdict = within_target(metric, med["perfdash"], med["pytorch"])
            measured += verdict is not None
            within += bool(verdict)
        shares.append(Share(metric, within, measured, len(models)))
    equal = measured = 0
    for model in models:
        status = {s: accuracy_status(next((r for r in results if r.model == model.label and r.side == s
                                           and r.kind == "accuracy"), None)) for s in SIDES}
        if status["pytorch"] is not None and status["perfdash"] is not None:
            measured += 1
            equal += status["pytorch"] == status["perfdash"]
    shares.append(Share("accuracy", equal, measured, len(models)))
    return shares


def shares_table(shares: list[Share]) -> list[str]:
    lines = ["| metric | target | within / models | share | measured on both sides |", "|---|---|---|---|---|"]
    for sh in shares:
        target = f"±{TARGETS[sh.metric]:.0%}" if sh.metric in TARGETS else "status equal"
        share = "–" if sh.share is None else f"{sh.share:.0%}"
        lines.append(f"| {sh.metric} | {target} | {sh.within} / {sh.total} | {share} | {sh.measured} |")
    return lines


def cell_account(model: Model, results: list[RunResult]) -> CellAccount:
    """The abs_latency account of one model's cell from its performance runs."""
    def runs(side: str) -> list[SideRun]:
        return [SideRun(number(r.row, "abs_latency"), r.calibration_before, r.calibration_after) for r in results
                if r.model == model.label and r.side == side and r.kind == "performance"]

    return account(runs("pytorch"), runs("perfdash"))


def account_table(models: list[Model], results: list[RunResult]) -> list[str]:
    """Per cell, abs_latency's ratio beside how far the machine moved between the two sides, the ratio in units of
    the machine's speed, and the largest move within one side run; then the counts over the cells."""
    lines = ["| model | abs_latency perfdash / PyTorch | machine perfdash / PyTorch | machine moved | "
             "abs_latency ÷ machine | largest move within a side |", "|---|---|---|---|---|---|"]
    raw_within = corrected_within = moved = measured = 0
    for model in models:
        acc = cell_account(model, results)
        raw_within += bool(within_target("abs_latency", acc.latency_ratio, 1.0))
        corrected_within += bool(within_target("abs_latency", acc.corrected_ratio, 1.0))
        measured += acc.moved is not None
        moved += bool(acc.moved)
        verdict = {None: "–", True: "moved ✗", False: "steady ✓"}[acc.moved]
        drift = "–" if acc.largest_drift is None else f"{acc.largest_drift:.1%}"
        lines.append(f"| {model.label} | {ratio_cell(acc.latency_ratio, 1.0, 'abs_latency')} | "
                     f"{fmt(acc.machine_ratio)} | {verdict} | {ratio_cell(acc.corrected_ratio, 1.0, 'abs_latency')} "
                     f"| {drift} |")
    lines += ["", f"abs_latency within ±{TARGETS['abs_latency']:.0%}: {raw_within} / {len(models)} cells; the machine "
              f"moved more than ±{MOVE_TOLERANCE:.0%} between the two sides in {moved} of the {measured} cells "
              f"calibrated; abs_latency ÷ machine within ±{TARGETS['abs_latency']:.0%}: {corrected_within} / "
              f"{len(models)} cells."]
    return lines


def compile_rounds(model: Model, results: list[RunResult]) -> list[float]:
    """perfdash's compile latency over PyTorch's in each round that measured both (the two runs of a round ran one
    after the other, so the machine's slower spells fall mostly between rounds, not between the sides)."""
    per_round: dict[int, dict[str, float]] = {}
    for r in results:
        if r.model == model.label and r.kind == "performance" and \
                (value := number(r.row, "compilation_latency")) is not None:
            per_round.setdefault(r.round, {})[r.side] = value
    return [sides["perfdash"] / sides["pytorch"] for _, sides in sorted(per_round.items())
            if sides.get("pytorch") and "perfdash" in sides]


def warmup_blocks_per_compile_second(model: Model, results: list[RunResult]) -> float | None:
    """Seconds of the two warm-up blocks whose difference compile latency is (DEFAULT_WARMUP eager steps and as many
    compiled ones, from PyTorch's medians) per second of that compile latency: a step noise of x % moves one round's
    compile latency by about this many times x %."""
    rows = [r.row for r in results if r.model == model.label and r.side == "pytorch" and r.kind == "performance"]
    speedup = median([v for row in rows if (v := number(row, "speedup")) is not None])
    compiled_ms = median([v for row in rows if (v := number(row, "abs_latency")) is not None])
    compile_s = median([v for row in rows if (v := number(row, "compilation_latency")) is not None])
    if speedup is None or compiled_ms is None or not compile_s:
        return None
    return DEFAULT_WARMUP * compiled_ms * (1 + speedup) / 1000 / compile_s


def compile_verdict(ratios: list[float]) -> str:
    """Settled within the compile target, or outside it on one side, when every round agrees; unsettled when the
    rounds disagree (one within and one outside, or outside on both sides: more rounds decide the median); not
    measured without a round."""
    if not ratios:
        return "not measured"
    places = {"within" if within_target("compilation_latency", ratio, 1.0) else
              "above" if ratio > 1 else "below" for ratio in ratios}
    if len(places) > 1:
        return "unsettled"
    return "within" if places == {"within"} else "outside"


def compile_account_table(models: list[Model], results: list[RunResult]) -> list[str]:
    """Per cell, compile latency's ratio in each round beside how much warm-up stepping it is the difference of, and
    whether the rounds agree on the verdict; then the counts."""
    lines = ["| model | compile perfdash / PyTorch, each round | median | warm-up blocks s per compile s | rounds |",
             "|---|---|---|---|---|"]
    counts: dict[str, int] = {}
    for model in models:
        ratios = compile_rounds(model, results)
        verdict = compile_verdict(ratios)
        counts[verdict] = counts.get(verdict, 0) + 1
        blocks = warmup_blocks_per_compile_second(model, results)
        lines.append(f"| {model.label} | {', '.join(f'{r:.3f}' for r in ratios) or '–'} | {fmt(median(ratios))} | "
                     f"{fmt(blocks, 2)} | {verdict} |")
    lines += ["", "Compile latency cells: " + ", ".join(f"{counts.get(v, 0)} {v}" for v in
                                                          ("within", "outside", "unsettled", "not measured")) + "."]
    return lines


def rounds_table(results: list[RunResult]) -> list[str]:
    lines = ["| round | side | model | speedup | abs_latency ms | compile s | compression | eager_peak_mem | "
             "dynamo_peak_mem | machine ms before → after | wall s | load before → after |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if r.kind != "performance":
            continue
        cells = " | ".join(fmt(number(r.row, m)) for m in METRICS)
        machine = " → ".join(fmt(c.figure_ms if c else None, 1) for c in (r.calibration_before, r.calibration_after))
        lines.append(f"| {r.round} | {r.side} | {r.model} | {cells} | {machine} | {r.wall_s:.0f} | "
                     f"{r.load_before:.2f} → {r.load_after:.2f} |")
    return lines


def report(args: argparse.Namespace, models: list[Model], results: list[RunResult],
           first_use: list[tuple[float, float]], loads: list[float]) -> str:
    cpu = os.cpu_count()
    head = [f"# perfdash / PyTorch harness parity, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
            f"device {args.device}, float32 inference, backend inductor"
            f"{' with freezing (TORCHINDUCTOR_FREEZING=1, --freezing)' if args.device == 'cpu' else ''}, "
            f"repeat {args.repeat}, threads {args.threads or f'default ({cpu} CPUs)'}, "
            f"allocator environment {args.allocator}, launcher {args.launcher}, PyTorch side's extra environment "
            f"{' '.join(f'{k}={v}' for k, v in args.pytorch_env) or 'none'}, cold Inductor cache for every run, "
            f"{args.rounds} round(s), "
            f"batch size {args.batch_size or 'each side its default unless given per model'}; "
            f"PyTorch harness: {args.pytorch_dir}.",
            f"Machine load (1-min os.getloadavg) around the runs: min {min(loads):.2f}, median "
            f"{statistics.median(loads):.2f}, max {max(loads):.2f}.",
            "Inductor in a fresh process, per round (PyTorch's compiled warm-up pays it, perfdash's fork server "
            "imports before forking): import "
            f"{', '.join(f'{i:.2f} s' for i, _ in first_use) or 'not measured'}; first use (import and one-time "
            f"set-up with an empty cache) {', '.join(f'{f:.2f} s' for _, f in first_use) or 'not measured'}.",
            "Medians over the rounds; ✓/✗: within the issue's target (speedup, abs_latency ±5 %; compilation "
            "latency, compression ratio ±10 %). Peak memory is in each side's own unit (PyTorch's CPU value is "
            "psutil memory_percent × total / 1e9, i.e. 100 × GB of RSS).", ""]
    if args.sampled:
        head += ["Sampled from PyTorch's lists (bench.pt_lists; tuned models, PyTorch's skips and what cannot run "
                 "here left out):", "", *(f"- {line}" for line in draw_lines(args)), ""]
    shares = ["Share of cells within target (medians over the rounds, one cell per model; a model one side did not "
              "measure counts as a miss):", "", *shares_table(target_shares(models, results)), ""]
    machine = ["The machine between the two sides (abs_latency's account): a fixed calibration workload "
               "(bench.machine_calibration) timed right before and after each side's run; machine = perfdash's "
               "figure / PyTorch's, medians over the rounds (above 1: the machine was slower while perfdash ran); "
               "abs_latency ÷ machine = the ratio with each run's latency divided by its own calibration figure; "
               f"moved: more than ±{MOVE_TOLERANCE:.0%}.", "", *account_table(models, results), ""]
    compile_part = [f"Compile latency by round: PyTorch's compilation_latency is the compiled warm-up block "
                    f"({DEFAULT_WARMUP} steps, the compile included) less the eager one ({DEFAULT_WARMUP} steps), so "
                    "a model whose steps are long carries their noise into it (the blocks' seconds per compile "
                    f"second); within / outside ±{TARGETS['compilation_latency']:.0%} when every round agrees, "
                    "unsettled when the rounds fall on both sides of the target (one more round decides it).", "",
                    *compile_account_table(models, results), ""]
    return "\n".join(head + shares + machine + compile_part + summary_table(models, results, first_use)
                     + ["", "Every round:", ""] + rounds_table(results)) + "\n"


def env_setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.pt_parity", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pytorch-dir", type=Path, required=True,
                   help="a checkout of PyTorch's benchmarks/dynamo (holds timm_models.py, huggingface.py, common.py)")
    p.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), metavar="SUITE:NAME[@BATCH]",
                   help=f"models to compare (default: {' '.join(DEFAULT_MODELS)})")
    p.add_argument("--rounds", type=int, default=2, help="performance rounds per model (default 2)")
    p.add_argument("--batch-size", type=int, help="batch size for every model on both sides (default: each side "
                                                  "its own default, shown in the table)")
    p.add_argument("--repeat", type=int, default=30, help="timed iterations on both sides (default 30, both defaults)")
    p.add_argument("--threads", type=int, help="threads on both sides (default: all)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--allocator", default=DEFAULT_ALLOCATOR, choices=ALLOCATORS,
                   help="perfdash's --allocator, and the same allocator environment for PyTorch's side "
                        f"(runner.allocator; default {DEFAULT_ALLOCATOR}: jemalloc and Intel OpenMP as PyTorch's CPU "
                        "dashboard)")
    p.add_argument("--launcher", default="none", choices=("none", "single", "socket"),
                   help="run both sides under docker/xeon-launch.sh with this thread configuration, the environment "
                        "of PyTorch's CPU dashboard (jemalloc, Intel OpenMP, KMP_*, pinned cores); default none")
    p.add_argument("--pytorch-env", type=env_setting, action="append", default=[], metavar="KEY=VALUE",
                   help="an environment variable for PyTorch's side only, e.g. TORCH_WARM_POOL=0: its harness "
                        "compiles through torch._dynamo.optimize('inductor'), whose backend starts Inductor's compile "
                        "subprocess pool (maybe_warm_pool), which torch.compile (perfdash) does not")
    p.add_argument("--sample-suite", action="append", default=[], choices=sorted(LIST_FILES), metavar="SUITE",
                   help="compare a seeded sample of PyTorch's current list of SUITE (read from --pytorch-dir) instead "
                        "of --models; repeat for several suites")
    p.add_argument("--sample", type=int, default=MIN_SAMPLE,
                   help=f"models per sampled suite (default and minimum {MIN_SAMPLE})")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0); record it with the run")
    p.add_argument("--no-accuracy", action="store_true", help="skip the accuracy runs")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per run (default 1800)")
    p.add_argument("--nice", type=int, default=5, help="niceness of every run (default 5)")
    p.add_argument("--workdir", type=Path, help="where runs write (default: a new temporary directory, kept)")
    p.add_argument("--resume", action="store_true",
                   help="go on from what an earlier, stopped run of the same --workdir (and the same other flags) "
                        "finished: its results are kept as they were, the runs it did not finish run now")
    p.add_argument("--out", type=Path, help="also write the markdown report here")
    return p


# PyTorch's performance process holds a model's weights three times (the loaded model, the timed deep copy, the
# eager warm-up's copy of that: benchmarks/dynamo/common.py, bench/README.md "Peak memory"), and so does perfdash's.
WEIGHT_COPIES = 3


def _hf_weight_bytes(entries: list[tuple[str, str, dict[str, object]]]) -> dict[str, int]:
    """Each (name, builder, options) huggingface entry's weight bytes, built on the meta device (runs in a child)."""
    from runner.suites.base import ModelSpec
    from runner.suites.builders import hf_weight_bytes

    return {name: hf_weight_bytes(ModelSpec(name=name, batch_size=1, builder=builder, options=options))
            for name, builder, options in entries}


def hf_weight_sizes(entries: list[tuple[str, str, dict[str, object]]]) -> dict[str, int]:
    """``_hf_weight_bytes`` in a spawned child, which exits with what it imported."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as child:
        return child.submit(_hf_weight_bytes, entries).result()


def too_large_here(listed: list[ListedModel], memory_bytes: int | None = None) -> dict[str, str]:
    """The listed huggingface models whose weights, held WEIGHT_COPIES times, exceed this machine's memory, each
    with its size: both sides would be killed for memory while timing them (BlenderbotForCausalLM: two OOM kills at
    22.8 GB on a 24 GiB machine, bench/README.md), and the kills take the machine's page cache with them. Sizes are
    counted from perfdash's own list entries on the meta device, in a child process: torch and transformers stay
    out of the bench's process, which lives for hours."""
    from runner.suites import get_suite

    suite = get_suite("huggingface")
    specs = {m.name: m for model_list in ("default", "extended") if model_list in suite.model_lists()
             for m in suite.models(model_list=model_list)}
    entries = [(m.name, specs[m.name].builder, dict(specs[m.name].options)) for m in listed if m.name in specs]
    sizes = hf_weight_sizes(entries) if entries else {}
    memory = memory_bytes or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {name: f"its weights, {size / 1e9:.1f} GB, held {WEIGHT_COPIES} times as both harnesses hold them, exceed "
                  f"this machine's {memory / 2**30:.0f} GiB of memory"
            for name, size in sizes.items() if WEIGHT_COPIES * size > memory}


def unrunnable_here(suite: str, listed: list[ListedModel]) -> dict[str, str]:
    """The listed models that cannot run on this machine, each with why. TorchBench's: not in the installed
    TorchBench at all, input data their install.py downloads that this machine's TorchBench tree lacks, or pretrained
    weights their build downloads (runner.torchbench_weights; this machine has no network and no hub cache); they
    fail on both sides here (perfdash records model_fail_to_load naming the data or the download). Hugging Face's:
    too large for this machine's memory (``too_large_here``). A sample never draws them."""
    if suite == "huggingface":
        return too_large_here(listed)
    if suite != "torchbench":
        return {}
    from runner.suites.torchbench import installed_tree, missing_data
    from runner.torchbench_install import COMMIT, has_model
    from runner.torchbench_weights import pretrained_weights

    tree = installed_tree()
    if tree is None:
        return {}
    why: dict[str, str] = {}
    for m in listed:
        if not has_model(tree, m.name):
            why[m.name] = f"not in TorchBench {COMMIT[:8]} (PyTorch's list still names it)"
        elif missing := missing_data(tree, m.name):
            why[m.name] = f"input data {', '.join(missing)} not in the TorchBench tree"
        elif weights := pretrained_weights(tree, m.name):
            why[m.name] = f"downloads pretrained weights when built: {weights}"
    return why


def sampled_models(args: argparse.Namespace) -> list[Model]:
    """The models of ``--sample-suite``: ``--sample`` of each suite's PyTorch list drawn with ``--seed``, never the
    tuned ones nor the ones that cannot run here, at ``--batch-size`` or the suite's SAMPLE_BATCH. Records the draw in
    ``args.sampled`` and what it left out as unrunnable, with why, in ``args.left_out``."""
    if args.sample < MIN_SAMPLE:
        raise ListError(f"--sample {args.sample}: at least {MIN_SAMPLE} models a suite (issue 32)")
    args.sampled, args.left_out = {}, {}
    models = []
    for suite in dict.fromkeys(args.sample_suite):
        tuned = {label.partition(":")[2] for label in TUNED if label.startswith(f"{suite}:")}
        left_out = unrunnable_here(suite, read_list(args.pytorch_dir, suite, args.device))
        names = sample_suite(args.pytorch_dir, suite, args.sample, args.seed, args.device,
                             exclude=tuned | set(left_out))
        args.sampled[suite] = names
        args.left_out[suite] = left_out
        models += [Model(suite, name, args.batch_size or SAMPLE_BATCH[suite]) for name in names]
    return models


def draw_lines(args: argparse.Namespace) -> list[str]:
    """The seeded draw of each sampled suite, with what it left out as unrunnable here and why."""
    lines = []
    for suite, names in args.sampled.items():
        short = f" (only {len(names)} of the {args.sample} asked: no more can run here)" if len(names) < args.sample \
            else ""
        lines.append(f"{suite} seed {args.seed}, {len(names)} models{short}: {', '.join(names)}.")
        if left_out := args.left_out.get(suite):
            lines.append(f"{suite}: left out as unrunnable here ({len(left_out)}): "
                         + "; ".join(f"{name} ({why})" for name, why in sorted(left_out.items())) + ".")
    return lines


RESULTS_FILE = "results.jsonl"


@dataclass(frozen=True, slots=True)
class Finished:
    """What an earlier run of the same ``--workdir`` finished before it stopped (``--resume``): its results by
    (side, model, round, kind) and each round's first-use cost."""

    results: dict[tuple[str, str, int, str], RunResult]
    first_use: dict[int, tuple[float, float]]


def read_finished(work: Path) -> Finished:
    """The results.jsonl of ``work`` as a stopped run left it: one line per finished run or first-use cost, written
    as each came, so a run cut off mid-way wrote nothing and runs again. A last line cut off mid-write is dropped;
    any other line that does not read stops the resume with its file and line."""
    path = work / RESULTS_FILE
    lines = path.read_text().splitlines() if path.is_file() else []
    results: dict[tuple[str, str, int, str], RunResult] = {}
    first_use: dict[int, tuple[float, float]] = {}
    for number, line in enumerate(lines, start=1):
        try:
            data = json.loads(line)
            if "inductor_import_s" in data:
                first_use[int(data["round"])] = (float(data["inductor_import_s"]),
                                                 float(data["inductor_first_use_s"]))
                continue
            for name in ("calibration_before", "calibration_after"):
                if data.get(name) is not None:
                    data[name] = Calibration(**data[name])
            result = RunResult(**data)
        except (ValueError, TypeError, KeyError) as exc:
            if number == len(lines):
                print(f"{path}:{number}: a line cut off mid-write, dropped: that run runs again", file=sys.stderr)
                break
            raise SystemExit(f"{path}:{number}: not a result of bench.pt_parity ({exc}); cannot resume") from None
        results[(result.side, result.model, result.round, result.kind)] = result
    return Finished(results, first_use)


def run_rounds(args: argparse.Namespace, models: list[Model], work: Path,
               run: Callable[..., RunResult] = run_one,
               calibrate: Callable[[argparse.Namespace, Path], Calibration | None] = calibrate_machine,
               first_use_of: Callable[[argparse.Namespace, Path], tuple[float, float] | None] = first_use_cost,
               finished: Finished | None = None,
               ) -> tuple[list[RunResult], list[tuple[float, float]], list[float]]:
    """Every round of every model on both sides (``run``, ``calibrate`` and ``first_use_of``: what runs them,
    replaceable in tests), each result appended to ``work``/results.jsonl as it comes; the results, the first-use
    costs and the loads seen. ``finished``: what an earlier, stopped run of this workdir finished (``--resume``),
    taken as it was instead of run again (a timeout in it still gives the model up)."""
    results: list[RunResult] = []
    first_use: list[tuple[float, float]] = []
    loads = [os.getloadavg()[0]]
    done = finished or Finished({}, {})
    with (work / RESULTS_FILE).open("a") as raw:
        # A model one of whose runs ran past --timeout is not run again, on either side or in a later round: it cannot
        # be measured on this machine within the timeout, and every further try would cost the timeout again.
        gave_up: dict[str, str] = {}
        for rnd in range(1, args.rounds + 1):
            if rnd in done.first_use:
                first_use.append(done.first_use[rnd])
            elif (cost := first_use_of(args, work)) is not None:
                first_use.append(cost)
                raw.write(json.dumps({"round": rnd, "inductor_import_s": cost[0],
                                      "inductor_first_use_s": cost[1]}) + "\n")
            for i, model in enumerate(models):
                order = SIDES if (rnd + i) % 2 else tuple(reversed(SIDES))  # swap who goes first each round
                kinds = ["performance"] + (["accuracy"] if rnd == 1 and not args.no_accuracy else [])
                for kind in kinds:
                    # Before the first side, between the two (the first's after, the second's before), after the second.
                    calibration, calibrated = None, False
                    for side in order:
                        earlier = done.results.get((side, model.label, rnd, kind))
                        if earlier is not None:
                            if earlier.error.startswith(TIMED_OUT):
                                gave_up[model.label] = f"its {side} {kind} run in round {rnd} {earlier.error}"
                            results.append(earlier)
                            loads += [earlier.load_before, earlier.load_after]
                            continue  # the side after it is calibrated anew: the machine may have moved since
                        skipped = model.label in gave_up
                        if kind == "performance" and not skipped and not calibrated:
                            calibration, calibrated = calibrate(args, work), True
                        if skipped:
                            res = RunResult(side, model.label, rnd, kind, error=f"not run: {gave_up[model.label]}",
                                            load_before=os.getloadavg()[0], load_after=os.getloadavg()[0])
                        else:
                            res = run(args, side, model, kind, rnd, work)
                            if res.error.startswith(TIMED_OUT):
                                gave_up[model.label] = f"its {side} {kind} run in round {rnd} {res.error}"
                        if kind == "performance" and not skipped:
                            res.calibration_before = calibration
                            res.calibration_after = calibration = calibrate(args, work)
                        results.append(res)
                        loads += [res.load_before, res.load_after]
                        raw.write(json.dumps(asdict(res)) + "\n")
                        raw.flush()
                        shown = res.row.get("speedup") or res.row.get("accuracy") or res.error
                        machine = " → ".join(fmt(c.figure_ms if c else None, 1)
                                             for c in (res.calibration_before, res.calibration_after))
                        print(f"round {rnd} {side:8} {kind:11} {model.label}: {shown} ({res.wall_s:.0f} s, load "
                              f"{res.load_after:.2f}{f', machine {machine} ms' if kind == 'performance' else ''})",
                              file=sys.stderr)
    return results, first_use, loads


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.sampled, args.left_out = {}, {}
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    if not (args.pytorch_dir / "common.py").is_file():
        raise SystemExit(f"--pytorch-dir {args.pytorch_dir}: no common.py there (want PyTorch's benchmarks/dynamo)")
    from runner.allocator import AllocatorUnavailable, allocator_env, check

    if args.launcher != "none" and args.allocator != "dashboard":
        raise SystemExit(f"--launcher {args.launcher} preloads jemalloc and Intel's OpenMP into both sides: it goes "
                         "with --allocator dashboard")
    try:
        check(allocator_env(args.allocator, args.device))
    except AllocatorUnavailable as exc:
        raise SystemExit(f"--allocator {args.allocator}: {exc}") from None
    if args.rounds < 1 or args.repeat < 1:
        raise SystemExit("--rounds and --repeat must be >= 1")
    try:
        models = sampled_models(args) if args.sample_suite else [parse_model(spec, args.batch_size)
                                                                 for spec in args.models]
    except (argparse.ArgumentTypeError, ListError) as exc:
        raise SystemExit(str(exc)) from None
    for line in draw_lines(args):
        print(line, file=sys.stderr)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="pt-parity-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"runs write under {work}", file=sys.stderr)
    finished = None
    if args.resume:
        finished = read_finished(work)
        print(f"resuming: {len(finished.results)} run(s) finished before are kept, the rest run", file=sys.stderr)
    elif (work / RESULTS_FILE).is_file() and (work / RESULTS_FILE).stat().st_size:
        raise SystemExit(f"{work / RESULTS_FILE} holds an earlier run's results: --resume to go on from them, or a "
                         "new --workdir")
    results, first_use, loads = run_rounds(args, models, work, finished=finished)
    text = report(args, models, results, first_use, loads)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
