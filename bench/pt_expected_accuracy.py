"""perfdash's accuracy statuses and graph breaks against what PyTorch's CI expects of the same suite on CPU.

PyTorch's ``cpu_inductor_freezing`` CI jobs (.ci/pytorch/test.sh, ``test_dynamo_benchmark`` ->
``test_single_dynamo_benchmark``; pytorch/pytorch at 0033967f) run

    python benchmarks/dynamo/<suite>.py --ci --accuracy --timing --explain --inductor --device cpu \\
        --inference --float32 --freezing --output <name>_<suite>.csv

and gate on ``check_accuracy.py`` (the status of every model) and ``check_graph_breaks.py`` (its graph-break
count) against ``benchmarks/dynamo/ci_expected_accuracy/cpu_inductor_freezing_<suite>_inference.csv`` (columns
``name,accuracy,graph_breaks[,recompiles]``). This bench runs the same check with perfdash, ``perfdash run --suite S
--accuracy --device cpu --dtype float32 --mode inference`` (perfdash turns Inductor's freezing on for CPU inference;
its accuracy batch sizes are PyTorch's), over the models of such a file, and lists every model where perfdash
disagrees, with the reason (perfdash's error, a model perfdash's list lacks, ...), and the share equal:

    python -m bench.pt_expected_accuracy --suite timm_models --expected FILE --expected-commit SHA \\
        [--only NAME ...] [--model-list default|extended] [--results DIR] [--workdir DIR] [--out FILE.md]

For torchbench, ``--model-list extended`` holds the 65 models of PyTorch's CPU file (perfdash's default torchbench
list is PyTorch's CPU list, 28 of them); they come from ``torchbenchmark`` and are checked at PyTorch's accuracy
batch size for the suite (4; TorchBench's own for a model that allows no other). A model this machine cannot build
(input data or pretrained weights TorchBench downloads, a requirement not installed) is listed apart with perfdash's
reason, and the report gives the share equal over the models that can run here as well as over all.

The expected file is PyTorch's, supplied by the user and never part of this repository; the report names it and
the commit given. ``--results DIR`` compares the accuracy CSV of an earlier ``perfdash run`` instead of running.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from runner.lifeline import dies_with_this_process

REPO = Path(__file__).resolve().parents[1]
SUITES = ("timm_models", "huggingface", "torchbench")
# What a failing model's log line starts with when it carries the exception (the worker prints tracebacks).
_ERROR_LINE = re.compile(r"^[A-Za-z_.]*(Error|Exception|Unsupported|Failure)\b.*")
# A model this machine cannot build, as perfdash's load error says it (runner/suites/builders.py): input data its
# TorchBench install.py downloads, pretrained weights its build downloads (a URLError without network), a requirement
# that is not installed. PyTorch's CI machines have all three; such a model is listed apart, not as a disagreement.
_CANNOT_RUN_HERE = re.compile(r"needs TorchBench input data|downloads pretrained weights|URLError|needs the module")


@dataclass(frozen=True, slots=True)
class Outcome:
    status: str
    graph_breaks: int | None


@dataclass(frozen=True, slots=True)
class Comparison:
    name: str
    expected: Outcome
    actual: Outcome | None  # None: perfdash has no row for it
    reason: str = ""
    runs_here: bool = True  # False: perfdash could not build it on this machine (data, weights, a requirement)

    @property
    def status_equal(self) -> bool:
        return self.actual is not None and self.actual.status == self.expected.status

    @property
    def breaks_equal(self) -> bool:
        return self.actual is not None and self.actual.graph_breaks == self.expected.graph_breaks

    @property
    def equal(self) -> bool:
        return self.status_equal and self.breaks_equal


def _int(text: str | None) -> int | None:
    try:
        return int(float(text)) if text not in (None, "") else None
    except ValueError:
        return None


def read_outcomes(path: Path) -> dict[str, Outcome]:
    """``name -> Outcome`` from a CSV with ``name``, ``accuracy`` and ``graph_breaks`` columns: PyTorch's expected
    file (blank lines between rows, as PyTorch writes them) or perfdash's accuracy CSV; the last row of a name wins."""
    with path.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("name")]
    if rows and "accuracy" not in rows[0]:
        raise SystemExit(f"{path}: no accuracy column (want name,accuracy,graph_breaks)")
    return {r["name"].strip(): Outcome(r["accuracy"].strip(), _int(r.get("graph_breaks"))) for r in rows}


def error_line(log: Path) -> str:
    """The last line of a model's log that names an exception, else ''."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    hits = [line.strip() for line in lines if _ERROR_LINE.match(line.strip())]
    return hits[-1][:300] if hits else ""


def manifest_errors(results: Path) -> dict[str, str]:
    """Each model's failure as the runs' manifests record it (``model_errors``), first line: what a worker that died
    without writing an exception left, e.g. "worker killed by SIGKILL in phase eager_validate" (the kernel's
    out-of-memory killer)."""
    errors: dict[str, str] = {}
    for path in sorted(results.glob("*_manifest.json")):
        try:
            recorded = json.loads(path.read_text()).get("model_errors") or {}
        except (OSError, ValueError):
            continue
        errors.update({name: str(text).splitlines()[0][:300] for name, text in recorded.items() if str(text).strip()})
    return errors


def compare(expected: dict[str, Outcome], actual: dict[str, Outcome], in_perfdash: set[str],
            errors: dict[str, str]) -> list[Comparison]:
    """One comparison per expected model, in name order, each disagreement with its reason."""
    out = []
    for name in sorted(expected):
        exp, act = expected[name], actual.get(name)
        if name not in in_perfdash:
            reason = "not in perfdash's list for this suite"
        elif act is None:
            reason = "no accuracy row from perfdash" + (f": {errors[name]}" if errors.get(name) else "")
        elif act.status != exp.status:
            detail = errors.get(name) or ""
            reason = f"status {act.status}" + (f": {detail}" if detail else "")
            if act.status == "model_fail_to_load" and _CANNOT_RUN_HERE.search(detail):
                out.append(Comparison(name, exp, act, detail, runs_here=False))
                continue
        elif act.graph_breaks != exp.graph_breaks:
            reason = f"graph breaks {act.graph_breaks} where PyTorch expects {exp.graph_breaks}"
        else:
            reason = ""
        out.append(Comparison(name, exp, act, reason))
    return out


@dataclass(frozen=True, slots=True)
class Shares:
    models: int
    status_equal: int
    breaks_equal: int
    both_equal: int


def shares(rows: list[Comparison]) -> Shares:
    return Shares(len(rows), sum(r.status_equal for r in rows), sum(r.breaks_equal for r in rows),
                  sum(r.equal for r in rows))


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({n / d:.0%})" if d else "0/0"


def report(args: argparse.Namespace, rows: list[Comparison], loads: tuple[float, float], wall_s: float) -> str:
    sh, here = shares(rows), shares([r for r in rows if r.runs_here])
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [f"# perfdash accuracy against PyTorch's expected statuses, {when}",
             "",
             f"suite {args.suite}; expected file {args.expected} (pytorch/pytorch at {args.expected_commit}); "
             f"perfdash: `perfdash run --suite {args.suite} --accuracy --device cpu --dtype float32 --mode inference` "
             f"(freezing on), model list {args.model_list}; results {args.results_dir}; "
             f"wall {wall_s:.0f} s, 1-min load {loads[0]:.2f} before, {loads[1]:.2f} after.",
             "",
             f"Equal, over {sh.models} expected models: status {_pct(sh.status_equal, sh.models)}, graph breaks "
             f"{_pct(sh.breaks_equal, sh.models)}, both {_pct(sh.both_equal, sh.models)}.",
             f"Equal, over the {here.models} that can run here: status {_pct(here.status_equal, here.models)}, graph "
             f"breaks {_pct(here.breaks_equal, here.models)}, both {_pct(here.both_equal, here.models)}.",
             "",
             "| model | PyTorch expects | perfdash | graph breaks expected / perfdash | reason |",
             "|---|---|---|---|---|"]
    for r in rows:
        if r.equal or not r.runs_here:
            continue
        act = r.actual
        lines.append(f"| {r.name} | {r.expected.status} | {act.status if act else '–'} | "
                     f"{r.expected.graph_breaks} / {act.graph_breaks if act else '–'} | {r.reason} |")
    if here.both_equal == here.models:
        lines.append("| (none) | | | | |")
    elsewhere = [r for r in rows if not r.runs_here]
    if elsewhere:
        lines += ["", "Cannot run here (perfdash's model_fail_to_load row says why):", "",
                  "| model | PyTorch expects | why not here |", "|---|---|---|"]
        lines += [f"| {r.name} | {r.expected.status} | {r.reason} |" for r in elsewhere]
    lines += ["", "Equal: " + (", ".join(r.name for r in rows if r.equal) or "none") + "."]
    return "\n".join(lines) + "\n"


def perfdash_names(suite: str, model_list: str) -> set[str]:
    from runner.suites import get_suite  # torch-free: reads the suite's data file

    return {m.name for m in get_suite(suite).models(model_list=model_list)}


def run_perfdash(args: argparse.Namespace, names: list[str], out_dir: Path) -> None:
    cmd = ["nice", "-n", str(args.nice), str(Path(sys.executable).parent / "perfdash"), "run", "--suite", args.suite,
           "--accuracy", "--device", "cpu", "--dtype", "float32", "--mode", "inference", "--model-list",
           args.model_list, "--output-dir", str(out_dir), "--no-progress", "--timeout", str(args.timeout),
           "--filter", "^(" + "|".join(re.escape(n) for n in names) + ")$"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "bisect")])}
    with (out_dir.parent / "perfdash.log").open("w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        # dies with this bench, killed or not (runner.lifeline): a left-over run would skew the next measurement
        subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, check=False,
                       preexec_fn=dies_with_this_process())


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.pt_expected_accuracy", description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", required=True, choices=SUITES)
    p.add_argument("--expected", type=Path, required=True,
                   help="PyTorch's ci_expected_accuracy/cpu_inductor_freezing_<suite>_inference.csv (a copy)")
    p.add_argument("--expected-commit", required=True, help="the pytorch/pytorch commit the expected file is from")
    p.add_argument("--only", nargs="+", default=[], metavar="NAME", help="compare only these models of the file")
    p.add_argument("--model-list", default="default", help="perfdash's list the models are taken from")
    p.add_argument("--results", type=Path, help="an earlier perfdash run's output directory: compare, do not run")
    p.add_argument("--workdir", type=Path, help="where the run writes (default: a new temporary directory, kept)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per model (default 3600)")
    p.add_argument("--nice", type=int, default=19, help="niceness of the perfdash run (default 19)")
    p.add_argument("--out", type=Path, help="also write the markdown report here")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    expected = read_outcomes(args.expected)
    if args.only:
        unknown = sorted(set(args.only) - set(expected))
        if unknown:
            raise SystemExit(f"not in {args.expected}: {', '.join(unknown)}")
        expected = {n: expected[n] for n in args.only}
    in_perfdash = perfdash_names(args.suite, args.model_list)
    loads = (os.getloadavg()[0], 0.0)
    start = time.perf_counter()
    if args.results is None:
        work = args.workdir or Path(tempfile.mkdtemp(prefix="pt-expected-"))
        args.results = work / "out"
        args.results.mkdir(parents=True, exist_ok=True)
        print(f"perfdash writes under {args.results}", file=sys.stderr)
        runnable = sorted(set(expected) & in_perfdash)
        if runnable:
            run_perfdash(args, runnable, args.results)
    args.results_dir = args.results
    wall = time.perf_counter() - start
    loads = (loads[0], os.getloadavg()[0])
    actual: dict[str, Outcome] = {}
    for path in sorted(args.results.glob("*_accuracy.csv")):
        actual.update(read_outcomes(path))
    logged = {name: error_line(log) for name in expected
              for log in args.results.glob(f"logs/*/{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.log")}
    recorded = manifest_errors(args.results)
    errors = {name: logged.get(name) or recorded.get(name, "") for name in expected}
    text = report(args, compare(expected, actual, in_perfdash, errors), loads, wall)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
