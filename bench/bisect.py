"""Bench: how often does perfbisect name the right culprit, and in how many steps, on noisy simulated histories?

Each history has N commits after the good one (N from 16 to 256); the culprit (uniform over them) makes the metric
worse by the regression size; every measurement is the commit's true value times (1 + noise * N(0, 1)) and, with
probability 1 %, an outlier 30 % slower (a busy machine); 10 % of the other commits do not build. The same
histories go to perfbisect (confirm, then N repeats per step with Mann-Whitney decisions) and to the single-sample,
fixed-10 % rule of the existing Jenkins bisect scripts (one run of good as reference, one run per step, bad when
10 % worse; no confirmation). "null" histories have no regression at all: the right answer is "not reproduced".

No git: the search core is driven in-process through the same Bisector the CLI uses.

    .venv/bin/python bench/bisect.py [--histories 100] [--seed 1] [--repeats 5]

"correct" counts the culprit named, or, when the commits just before it do not build, "one of" exactly those and the
culprit (no bisection can do better; git bisect answers the same). perfbisect runs with --threshold 2.5 (half the
smaller simulated regression), alpha 0.01, at most 3 rounds per commit.

Last printed (2026-11-22, `--histories 200 --sizes 16 32 64 128 256`, seed 1):

   perfbisect vs single-sample fixed-10% rule (200 histories per row, repeats=5, 10% broken builds, 1% outliers)
┏━━━━━┳━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━┳━━━━━━━━┓
┃   N ┃ noise ┃ regression ┃ ceil(log2 N) ┃ perfbisect correct ┃ steps ┃ measurements ┃ fixed-10% correct ┃  steps ┃
┡━━━━━╇━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━┩
│  16 │    2% │       null │            4 │              99.5% │  4.00 │         23.3 │              0.0% │   4.54 │
│  16 │    2% │         5% │            4 │              99.0% │  4.25 │         44.5 │              9.0% │   4.42 │
│  16 │    2% │        20% │            4 │             100.0% │  4.28 │         43.1 │             97.5% │   4.28 │
│  16 │    5% │       null │            4 │              98.5% │  4.67 │         30.5 │              0.0% │   4.43 │
│  16 │    5% │         5% │            4 │              50.5% │  4.23 │         69.7 │             12.0% │   4.32 │
│  16 │    5% │        20% │            4 │             100.0% │  4.22 │         42.6 │             66.5% │   4.23 │
│  32 │    2% │       null │            5 │              99.5% │  5.00 │         23.2 │              0.0% │   5.60 │
│  32 │    2% │         5% │            5 │              98.5% │  5.29 │         50.9 │              2.5% │   5.65 │
│  32 │    2% │        20% │            5 │             100.0% │  5.27 │         49.0 │             97.0% │   5.28 │
│  32 │    5% │       null │            5 │              97.5% │  5.80 │         31.1 │              0.0% │   5.59 │
│  32 │    5% │         5% │            5 │              58.5% │  5.33 │         77.8 │             12.0% │   5.48 │
│  32 │    5% │        20% │            5 │             100.0% │  5.42 │         48.9 │             61.5% │   5.43 │
│  64 │    2% │       null │            6 │             100.0% │     - │         23.7 │              0.0% │   6.88 │
│  64 │    2% │         5% │            6 │              98.5% │  6.46 │         57.4 │              2.5% │   6.70 │
│  64 │    2% │        20% │            6 │             100.0% │  6.39 │         53.6 │             95.0% │   6.41 │
│  64 │    5% │       null │            6 │              95.0% │  6.50 │         31.4 │              0.0% │   6.74 │
│  64 │    5% │         5% │            6 │              46.0% │  6.38 │         90.0 │              4.5% │   6.64 │
│  64 │    5% │        20% │            6 │             100.0% │  6.51 │         54.5 │             57.0% │   6.46 │
│ 128 │    2% │       null │            7 │             100.0% │     - │         22.3 │              0.0% │   7.92 │
│ 128 │    2% │         5% │            7 │              99.5% │  7.45 │         62.1 │              0.5% │   7.83 │
│ 128 │    2% │        20% │            7 │             100.0% │  7.49 │         59.1 │             94.5% │   7.48 │
│ 128 │    5% │       null │            7 │              99.0% │  8.00 │         29.4 │              0.0% │   7.95 │
│ 128 │    5% │         5% │            7 │              42.5% │  7.53 │         96.7 │              2.5% │   7.79 │
│ 128 │    5% │        20% │            7 │             100.0% │  7.62 │         59.2 │             54.5% │   7.55 │
│ 256 │    2% │       null │            8 │              99.5% │  8.00 │         23.0 │              0.0% │   9.36 │
│ 256 │    2% │         5% │            8 │              97.0% │  8.74 │         69.0 │              1.0% │   9.10 │
│ 256 │    2% │        20% │            8 │             100.0% │  8.61 │         65.5 │             94.5% │   8.59 │
│ 256 │    5% │       null │            8 │              98.0% │  8.25 │         34.0 │              0.0% │   9.05 │
│ 256 │    5% │         5% │            8 │              43.5% │  8.80 │        106.4 │              1.5% │   8.88 │
│ 256 │    5% │        20% │            8 │             100.0% │  8.57 │         66.2 │             49.0% │   8.60 │
└─────┴───────┴────────────┴──────────────┴────────────────────┴───────┴──────────────┴───────────────────┴────────┘
steps: commits probed after the confirmation (skipped builds included), mean over bisections run;
measurements: all runs of the measure command, confirmation included. 387 s

With `--repeats 10 --sizes 64 --histories 100` (what 5 % noise needs):

  perfbisect vs single-sample fixed-10% rule (100 histories per row, repeats=10, 10% broken builds, 1% outliers)
┏━━━━┳━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━┳━━━━━━━━┓
┃  N ┃ noise ┃ regression ┃ ceil(log2 N) ┃ perfbisect correct ┃ steps ┃ measurements ┃ fixed-10% correct ┃  steps ┃
┡━━━━╇━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━┩
│ 64 │    2% │       null │            6 │             100.0% │     - │         42.0 │              0.0% │   6.72 │
│ 64 │    2% │         5% │            6 │             100.0% │  6.43 │        106.0 │              2.0% │   6.83 │
│ 64 │    2% │        20% │            6 │             100.0% │  6.46 │        108.4 │             97.0% │   6.44 │
│ 64 │    5% │       null │            6 │              96.0% │  6.00 │         63.1 │              0.0% │   6.58 │
│ 64 │    5% │         5% │            6 │              87.0% │  6.39 │        150.5 │              6.0% │   6.60 │
│ 64 │    5% │        20% │            6 │             100.0% │  6.48 │        106.3 │             59.0% │   6.45 │
└────┴───────┴────────────┴──────────────┴────────────────────┴───────┴──────────────┴───────────────────┴────────┘
steps: commits probed after the confirmation (skipped builds included), mean over bisections run;
measurements: all runs of the measure command, confirmation included. 59 s
"""

from __future__ import annotations

import os
import sys

# Run as a script, this file's folder comes first on sys.path and this file would shadow the standard library's
# `bisect` (which random and statistics import): drop the folder before importing anything else.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

import argparse  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402

from perfbisect.procedure import Bisector  # noqa: E402
from perfbisect.search import search  # noqa: E402
from perfbisect.state import BisectState  # noqa: E402
from perfbisect.stats import Policy  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from perfdash.bisection import StepDecision  # noqa: E402

BROKEN_SHARE = 0.10
OUTLIER_SHARE = 0.01
OUTLIER_SIZE = 0.30


@dataclass(frozen=True, slots=True)
class History:
    n: int
    culprit: int | None  # index in commits (0 = first after good); None: no regression
    broken: frozenset[int]
    regression: float
    noise: float

    @property
    def commits(self) -> list[str]:
        return [f"c{i}" for i in range(self.n)]


def make_history(rng: random.Random, n: int, regression: float, noise: float) -> History:
    culprit = rng.randrange(n) if regression > 0 else None
    broken = frozenset(i for i in range(n - 1) if i != culprit and rng.random() < BROKEN_SHARE)
    return History(n, culprit, broken, regression, noise)


class SimulatedOracle:
    """Builds fail for the broken commits; measurements are latencies (lower is better) with noise and outliers."""

    def __init__(self, history: History, rng: random.Random) -> None:
        self.history = history
        self.rng = rng

    def true_value(self, sha: str) -> float:
        index = -1 if sha == "good" else int(sha[1:])
        culprit = self.history.culprit
        return 100.0 * (1 + self.history.regression) if culprit is not None and index >= culprit else 100.0

    def build(self, sha: str) -> str | None:
        return "simulated build failure" if sha != "good" and int(sha[1:]) in self.history.broken else None

    def measure(self, sha: str, index: int) -> float:
        value = self.true_value(sha) * (1 + self.history.noise * self.rng.gauss(0, 1))
        return value * (1 + OUTLIER_SIZE) if self.rng.random() < OUTLIER_SHARE else value


@dataclass(frozen=True, slots=True)
class Trial:
    correct: bool
    steps: int
    measurements: int


def run_perfbisect(history: History, rng: random.Random, policy: Policy) -> Trial:
    oracle = SimulatedOracle(history, rng)
    bisector = Bisector(oracle, policy, BisectState(identity={}))
    outcome = bisector.run("good", history.commits)
    if history.culprit is None:
        correct = outcome.verdict == "not_reproduced"
    else:
        correct = right_answer(history, outcome.culprit, outcome.candidates)
    return Trial(correct, len(outcome.steps), bisector.measurements)


def right_answer(history: History, culprit: str | None, candidates: tuple[str, ...]) -> bool:
    """The culprit named, or, when the commits just before it do not build, "one of" exactly those and the culprit:
    no bisection can tell which of them caused it (git bisect answers the same)."""
    want = f"c{history.culprit}"
    if culprit is not None:
        return culprit == want
    return bool(candidates) and candidates[-1] == want and all(int(c[1:]) in history.broken for c in candidates[:-1])


def run_fixed_rule(history: History, rng: random.Random, threshold: float = 0.10) -> Trial:
    oracle = SimulatedOracle(history, rng)
    reference = oracle.measure("good", 0)
    measurements = 1

    def probe(sha: str) -> StepDecision:
        nonlocal measurements
        if oracle.build(sha) is not None:
            return "skip"
        measurements += 1
        return "bad" if oracle.measure(sha, 0) >= reference * (1 + threshold) else "good"

    found = search(history.commits, probe)
    if history.culprit is None:
        # The old scripts always bisect: with no regression they blame the last commit, which is wrong.
        correct = False
    else:
        correct = right_answer(history, found.culprit, found.candidates)
    return Trial(correct, len(found.probes), measurements)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--histories", type=int, default=100, help="histories per table row")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 256])
    args = parser.parse_args(argv)

    table = Table(title=f"perfbisect vs single-sample fixed-10% rule ({args.histories} histories per row, "
                        f"repeats={args.repeats}, {BROKEN_SHARE:.0%} broken builds, {OUTLIER_SHARE:.0%} outliers)")
    for column in ("N", "noise", "regression", "ceil(log2 N)", "perfbisect correct", "steps", "measurements",
                   "fixed-10% correct", "steps "):
        table.add_column(column, justify="right")
    started = time.perf_counter()
    for n in args.sizes:
        for noise in (0.02, 0.05):
            for regression in (0.0, 0.05, 0.20):
                rng = random.Random(f"{args.seed}-{n}-{noise}-{regression}")
                ours, fixed = [], []
                for _ in range(args.histories):
                    history = make_history(rng, n, regression, noise)
                    # The threshold is the smallest regression worth a bisection: half the smaller simulated one.
                    policy = Policy(direction="lower", threshold_pct=2.5, repeats=args.repeats)
                    ours.append(run_perfbisect(history, rng, policy))
                    fixed.append(run_fixed_rule(history, rng))
                bisected = [t for t in ours if t.steps]
                table.add_row(
                    str(n), f"{noise:.0%}", f"{regression:.0%}" if regression else "null", str(math.ceil(math.log2(n))),
                    f"{sum(t.correct for t in ours) / len(ours):.1%}",
                    f"{statistics.mean(t.steps for t in bisected):.2f}" if bisected else "-",
                    f"{statistics.mean(t.measurements for t in ours):.1f}",
                    f"{sum(t.correct for t in fixed) / len(fixed):.1%}",
                    f"{statistics.mean(t.steps for t in fixed):.2f}",
                )
    Console(width=160).print(table)
    print("steps: commits probed after the confirmation (skipped builds included), mean over bisections run; "
          "measurements: all runs of the measure command, confirmation included. "
          f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
