"""The false "different" rate of perfdash.ab's sequential paired A/B on A/A data (two identical builds), by simulation.

    python -m bench.ab_false_rate [--runs 5000]

Cases: Gaussian 5 % noise with a 5 % boundary (the bisect default), Student-t(3) 5 % (heavy tails), Gaussian 2 %
with 1 % and 2.5 % boundaries, Gaussian 10 % with a 5 % boundary (a pair's spread 1.1 to 2.8
boundaries), and a verification's A/B: the scale pooled with 30 residuals of earlier A/Bs (Gaussian 5 %, 5 %
boundary, first look at 2 pairs). Figures in bench/README.md (issue 27).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from collections.abc import Callable

from perfdash.ab import AbPolicy, AbSide, run_ab

Draw = Callable[[random.Random], float]


def gauss(cv: float) -> Draw:
    return lambda rng: rng.gauss(0.0, cv)


def t3(cv: float) -> Draw:
    def draw(rng: random.Random) -> float:
        chi2 = sum(rng.gauss(0.0, 1.0) ** 2 for _ in range(3))
        return cv * rng.gauss(0.0, 1.0) / math.sqrt(chi2 / 3) / math.sqrt(3.0)  # SD cv
    return draw


CASES: tuple[tuple[str, Draw, float, int], ...] = (  # name, noise, boundary %, residuals pooled
    ("gauss 5%, boundary 5%", gauss(0.05), 5.0, 0),
    ("t3 5%, boundary 5%", t3(0.05), 5.0, 0),
    ("gauss 2%, boundary 1%", gauss(0.02), 1.0, 0),
    ("gauss 2%, boundary 2.5%", gauss(0.02), 2.5, 0),
    ("gauss 10%, boundary 5%", gauss(0.10), 5.0, 0),
    ("gauss 5%, boundary 5%, 30 pooled", gauss(0.05), 5.0, 30),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5000)
    args = parser.parse_args(argv)
    for name, draw, boundary, pooled in CASES:
        rng = random.Random(f"rate-{name}")
        policy = AbPolicy(boundary_pct=boundary, alpha=0.01, start=2 if pooled else 6)

        def measure(_side: AbSide, _index: int, draw: Draw = draw, rng: random.Random = rng) -> float:
            return 100.0 * math.exp(draw(rng))

        def noise(pooled: int = pooled, draw: Draw = draw, rng: random.Random = rng) -> list[float]:
            # earlier A/Bs' residuals: differences of pair log ratios over sqrt(2), the spread of one log ratio
            return [(draw(rng) - draw(rng)) for _ in range(pooled)]

        records = [run_ab(measure, policy, rng, purpose="aa", a="x", b="x", noise=noise()) for _ in range(args.runs)]
        answers = [r.answer for r in records]
        pairs = [len(r.samples_a) for r in records]
        different = answers.count("different")
        print(f"{name}: false different {different}/{args.runs} = {100 * different / args.runs:.2f} %, "
              f"unknown {answers.count('unknown')}, same {answers.count('same')}, "
              f"median pairs {statistics.median(pairs)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
