"""Bench: how often does perfbisect name the right culprit, how often a wrong one, and at what cost, on noisy
simulated histories?

Each history has N commits after the good one (N = 16, 64, 256); the culprit (uniform over them) makes the metric
worse by the regression size; 10 % of the other commits do not build. Every measurement is the commit's true value
times a noise factor, from one of three noise models: ``2%`` and ``5%`` (Gaussian, that CV, and with probability 1 %
an outlier 30 % slower: a busy machine), and ``measured``: the between-run deviations this machine showed in
bench/ab_noise.py's A/A runs of the harness (``--noise-file``: bench/data/ab_noise.json, measured on a quiet machine,
or bench/data/ab_noise_busy.json, under load, or one of ``perfdash run --processes 3``; the compiled latency's
consecutive-run log deviations, each model's median removed, pooled over its models, drawn at random;
``--measured-metric speedup``: the speedup's; or bench/duet_noise.py's file, whose ``--duet-part`` draws either a
duet's deviations, two builds measured at once, or its sequential solo runs'). "null" histories have no
regression: the right answer is "not reproduced".

perfbisect runs as the CLI does (perfbisect.procedure.Bisector; every comparison the sequential paired A/B of
perfdash/ab.py: a paired SPRT from 6 pairs (steps 2) to at most 160, alpha 0.01 per A/B; each step against the
nearest commit found good; the culprit verified against its parent, continuing the last step when that step compared
the same two commits). "conf./steps/verif." shows where the runs went.
Beside it, the single-sample fixed-10 % rule of the existing Jenkins bisect scripts (one run of good as reference,
one run per step, bad when 10 % worse; no confirmation).

Scored per row: "correct": the culprit named (``culprit_found``), or, when the commits just before it do not build,
the range of exactly those and the culprit (``culprit_range``; no bisection can do better); for null histories
"not_reproduced". "wrong": a name (or range) that is not the culprit's. Everything else (not confirmed, not
reproduced, inconclusive) names nobody. Measurements: every run of the measure command, median over the row.

``--series-noise history`` (issue 39): each bisection gets its series' own noise as the service's request carries
it, the robust CV of ``HISTORY_RUNS`` nightly results of the good commit drawn from the same noise model (their own
random stream, so the histories and the measurements are those of ``none``); perfbisect pools it into every A/B's
scale and sizes the confirmation's first look by it. "confirmed": the share of histories whose confirmation
reproduced the regression.

    python -m bench.bisect_accuracy [--histories 200] [--seed 5] [--sizes 16 64 256] [--threshold 5]
        [--series-noise none|history] [--noise-file FILE] [--measured-metric abs_latency|speedup]
        [--duet-part duet|sequential]

Figures in bench/README.md ("Bisection").
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from perfbisect.procedure import Bisector
from perfbisect.search import search
from perfbisect.state import BisectState
from perfbisect.stats import Policy
from rich.console import Console
from rich.table import Table

from bench.ab_noise import OUTPUT as AB_NOISE
from bench.duet_noise import DuetPart, measured_residuals
from perfdash.bisection import StepDecision
from perfdash.noise import robust_cv
from perfdash.verdicts import BisectionVerdictName

BROKEN_SHARE = 0.10
OUTLIER_SHARE = 0.01
OUTLIER_SIZE = 0.30
NOISE_MODELS = ("2%", "5%", "measured")
HISTORY_RUNS = 30  # nightly results a series' noise estimate rests on (--series-noise history)


@dataclass(frozen=True, slots=True)
class Noise:
    """A measurement's noise factor: Gaussian CV with outliers, or drawn from measured log deviations."""

    name: str
    cv: float = 0.0
    residuals: tuple[float, ...] = ()

    def factor(self, rng: random.Random) -> float:
        if self.residuals:
            return math.exp(rng.choice(self.residuals))
        value = 1 + self.cv * rng.gauss(0, 1)
        return value * (1 + OUTLIER_SIZE) if rng.random() < OUTLIER_SHARE else value


def noise_model(name: str, noise_file: Path = AB_NOISE, metric: str = "abs_latency", part: DuetPart = "duet"
                ) -> Noise:
    """``metric``: whose between-run deviations the ``measured`` model draws (the simulated history is a latency
    either way: lower is better; the deviations are symmetric in log space, so a speedup's serve as well).
    ``part``: of a bench/duet_noise.py file, the duet's draws or its sequential solo runs'."""
    if name == "measured":
        return Noise(name, residuals=tuple(float(r) for r in measured_residuals(noise_file, metric, part)))
    return Noise(name, cv=float(name.rstrip("%")) / 100)


@dataclass(frozen=True, slots=True)
class History:
    n: int
    culprit: int | None  # index in commits (0 = first after good); None: no regression
    broken: frozenset[int]
    regression: float
    noise: Noise

    @property
    def commits(self) -> list[str]:
        return [f"c{i}" for i in range(self.n)]


def make_history(rng: random.Random, n: int, regression: float, noise: Noise) -> History:
    culprit = rng.randrange(n) if regression > 0 else None
    broken = frozenset(i for i in range(n - 1) if i != culprit and rng.random() < BROKEN_SHARE)
    return History(n, culprit, broken, regression, noise)


class SimulatedOracle:
    """Builds fail for the broken commits; measurements are latencies (lower is better) with noise."""

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
        return self.true_value(sha) * self.history.noise.factor(self.rng)


@dataclass(frozen=True, slots=True)
class Trial:
    correct: bool
    wrong: bool  # named a culprit (or range) that is not the culprit's
    steps: int
    measurements: int
    spent: tuple[int, int, int] = (0, 0, 0)  # measurements of the confirmation, the steps, the verification
    confirmed: bool = False  # the confirmation reproduced a regression


def run_perfbisect(history: History, rng: random.Random, policy: Policy) -> Trial:
    oracle = SimulatedOracle(history, rng)
    bisector = Bisector(oracle, policy, BisectState(identity={}))
    outcome = bisector.run("good", history.commits)
    named = BisectionVerdictName(outcome.verdict).names_commits
    if history.culprit is None:
        correct, wrong = outcome.verdict == BisectionVerdictName.NOT_REPRODUCED, named
    else:
        right = named and right_answer(history, outcome.culprit, outcome.candidates)
        correct, wrong = right, named and not right
    spent = tuple(bisector.spent.get(purpose, 0) for purpose in ("confirm", "step", "verify"))
    confirmed = outcome.confirmation is not None and outcome.confirmation.reproduced
    return Trial(correct, wrong, len(outcome.steps), bisector.measurements, spent,  # type: ignore[arg-type]
                 confirmed)


def with_series_noise(policy: Policy, noise: Noise, rng: random.Random) -> Policy:
    """``policy`` with the series' noise the service would send: the robust CV of HISTORY_RUNS nightly results."""
    nightly = [100.0 * noise.factor(rng) for _ in range(HISTORY_RUNS)]
    return replace(policy, series_cv=robust_cv(nightly), series_runs=HISTORY_RUNS)


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
        return Trial(False, True, len(found.probes), measurements)
    right = right_answer(history, found.culprit, found.candidates)
    return Trial(right, not right, len(found.probes), measurements)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--histories", type=int, default=100, help="histories per table row")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--noise", nargs="+", choices=NOISE_MODELS, default=list(NOISE_MODELS))
    parser.add_argument("--threshold", type=float, default=5.0,
                        help="perfbisect --threshold, %% (the A/B line is half of it)")
    parser.add_argument("--repeats", type=int, default=6, help="pairs at the confirmation's first look")
    parser.add_argument("--max-pairs", type=int, default=160)
    parser.add_argument("--noise-file", type=Path, default=AB_NOISE,
                        help="the \"measured\" noise model's file (bench/ab_noise.py's output; default the quiet "
                             "machine's bench/data/ab_noise.json, bench/data/ab_noise_busy.json the loaded one's; "
                             "or bench/duet_noise.py's, see --duet-part)")
    parser.add_argument("--duet-part", choices=("duet", "sequential"), default="duet",
                        help="of a bench/duet_noise.py noise file: draw the duet's deviations (two builds at once "
                             "on mirrored CPU halves) or its sequential solo runs' (one after the other)")
    parser.add_argument("--measured-metric", choices=("abs_latency", "speedup"), default="abs_latency",
                        help="whose between-run deviations the \"measured\" model draws: the compiled latency's "
                             "(default) or the speedup's (what the nightly's speedup findings are bisected on)")
    parser.add_argument("--series-noise", choices=("none", "history"), default="none",
                        help="history: each bisection knows its series' own noise (from HISTORY_RUNS nightly "
                             "results), as the service's requests carry it; none: as a request without it")
    args = parser.parse_args(argv)

    policy = Policy(direction="lower", threshold_pct=args.threshold, repeats=args.repeats,
                    max_pairs=args.max_pairs)
    table = Table(title=f"perfbisect vs single-sample fixed-10% rule ({args.histories} histories per row, threshold "
                        f"{args.threshold}%, sequential paired A/B from {policy.repeats} pairs to {policy.cap}, "
                        f"{BROKEN_SHARE:.0%} broken builds; measured noise: {args.noise_file.name}, "
                        f"{args.measured_metric}"
                        + (f" ({args.duet_part})" if json.loads(args.noise_file.read_text()).get("kind") == "duet"
                           else "")
                        + f"; series noise: {args.series_noise})")
    for column in ("N", "noise", "regression", "correct", "wrong", "no name", "steps", "median meas.",
                   "conf./steps/verif.", "confirmed", "fixed-10% correct", "wrong ", "meas."):
        table.add_column(column, justify="right")
    started = time.perf_counter()
    for n in args.sizes:
        for name in args.noise:
            noise = noise_model(name, args.noise_file, args.measured_metric, args.duet_part)
            for regression in (0.0, 0.05, 0.20):
                rng = random.Random(f"{args.seed}-{n}-{name}-{regression}")
                prior_rng = random.Random(f"{args.seed}-{n}-{name}-{regression}-series")
                ours, fixed = [], []
                for _ in range(args.histories):
                    history = make_history(rng, n, regression, noise)
                    own = with_series_noise(policy, noise, prior_rng) if args.series_noise == "history" else policy
                    ours.append(run_perfbisect(history, rng, own))
                    fixed.append(run_fixed_rule(history, rng))
                bisected = [t for t in ours if t.steps]
                share = len(ours)
                table.add_row(
                    str(n), name, f"{regression:.0%}" if regression else "null",
                    f"{sum(t.correct for t in ours) / share:.1%}", f"{sum(t.wrong for t in ours) / share:.1%}",
                    f"{sum(not t.correct and not t.wrong for t in ours) / share:.1%}",
                    f"{statistics.mean(t.steps for t in bisected):.2f}" if bisected else "-",
                    f"{statistics.median(t.measurements for t in ours):.0f}",
                    "/".join(f"{statistics.mean(t.spent[i] for t in ours):.0f}" for i in range(3)),
                    f"{sum(t.confirmed for t in ours) / share:.1%}",
                    f"{sum(t.correct for t in fixed) / share:.1%}", f"{sum(t.wrong for t in fixed) / share:.1%}",
                    f"{statistics.median(t.measurements for t in fixed):.0f}",
                )
    Console(width=170).print(table)
    print(f"steps: commits probed after the confirmation (skipped builds included), mean over bisections run; "
          f"median meas.: all runs of the measure command (confirmation and verification included), median over the "
          f"row; conf./steps/verif.: mean measurements of the confirmation, all steps and the verification. "
          f"{math.ceil(time.perf_counter() - started)} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
