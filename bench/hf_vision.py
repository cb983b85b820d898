"""Print the hf_vision table as the publication lays it out, from a results directory of `perfdash run --suite
hf_vision` (optionally running it first).

    .venv/bin/python -m bench.hf_vision results/hf_vision_cpu            # print an existing run
    .venv/bin/python -m bench.hf_vision results/hf_vision_cpu --run -- --batch-size 1 --repeat 5 --performance \\
        --exclude '^(MaskFormer|DETR_ResNet-101|Conditional_DETR)$'

Per batch size: Task | Model | no compile (ms) | compile (ms) | improvement % for the mean (the publication's
statistic) and the median (the CSV's abs_latency), then compile time and accuracy. Figures last printed are in the
docstring's tail and in the issue's report; CPU figures on the shared 2-core machine swing up to 2x with its load.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

from perfdash.contract import ResultFileName, read_accuracy_csv, read_performance_csv, read_samples
from runner.suites.base import load_model_list
from runner.suites.hf_vision import DATA_FILE, parse_row_name


def table(results: Path) -> str:
    publication = {s.name: s for s in load_model_list(DATA_FILE, "module")}
    order = {name: i for i, name in enumerate(publication)}
    lines: list[str] = []
    for perf_path in sorted(results.glob("*_hf_vision_*_performance.csv")):
        key = ResultFileName.parse(perf_path).key
        stem = perf_path.name[: -len("_performance.csv")]
        perf = {r.name: r for r in read_performance_csv(perf_path)}
        acc_path = results / f"{stem}_accuracy.csv"
        acc = {r.name: r.accuracy for r in read_accuracy_csv(acc_path)} if acc_path.exists() else {}
        samples_path = results / f"{stem}_samples.jsonl"
        samples = {s.name: s for s in read_samples(samples_path)} if samples_path.exists() else {}
        by_batch: dict[int, list[str]] = {}
        for name in perf:
            parsed = parse_row_name(name)
            if parsed is not None:
                by_batch.setdefault(parsed.batch_size, []).append(name)
        for batch, names in sorted(by_batch.items()):
            lines.append(f"\n{key.stem} · batch size {batch}")
            lines.append(f"{'Task':<21} {'Model':<22} {'no compile':>11} {'compile':>9} {'impr. %':>8}   "
                         f"{'median: no':>10} {'compile':>9} {'impr. %':>8}  {'compile s':>9}  accuracy")
            for name in sorted(names, key=lambda n: order.get(parse_row_name(n).model, 99)):  # type: ignore[union-attr]
                model = parse_row_name(name).model  # type: ignore[union-attr]
                spec = publication.get(model)
                task = str(spec.options.get("task", "")) if spec else ""
                label = str(spec.options.get("label", model)) if spec else model
                row, s = perf[name], samples.get(name)
                if not row.speedup or s is None:
                    lines.append(f"{task:<21} {label:<22} {acc.get(name, 'failed'):>11}")
                    continue
                mean_e, mean_c = statistics.fmean(s.eager_ms), statistics.fmean(s.compiled_ms)
                med_e, med_c = statistics.median(s.eager_ms), statistics.median(s.compiled_ms)
                lines.append(f"{task:<21} {label:<22} {mean_e:>11.2f} {mean_c:>9.2f} "
                             f"{(mean_e - mean_c) / mean_e * 100:>8.1f}   {med_e:>10.2f} {med_c:>9.2f} "
                             f"{(med_e - med_c) / med_e * 100:>8.1f}  {row.compilation_latency or 0:>9.1f}  "
                             f"{acc.get(name, '-')}")
    return "\n".join(lines) if lines else f"no hf_vision results in {results}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="the results directory")
    parser.add_argument("--run", action="store_true", help="run `perfdash run --suite hf_vision` into it first")
    parser.add_argument("run_args", nargs="*", help="after --: more `perfdash run` flags")
    args = parser.parse_args(argv)
    if args.run:
        command = [sys.executable, "-m", "perfdash.cli", "run", "--suite", "hf_vision", "--output-dir",
                   str(args.results), *args.run_args]
        print("$", " ".join(command), flush=True)
        done = subprocess.run(command, check=False)
        if done.returncode != 0:
            return done.returncode
    print(table(args.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
