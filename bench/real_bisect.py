"""Real regressions, found by ``perfdash bisect`` with ``perfdash run`` as the measurement: a small git repository whose
commits change Inductor settings of a model, one of them making the compiled model slower.

The repository (made in ``--workdir``) holds the scenario's model from bench/data/real_bisect/ as model.py (a
module built by the ``py:`` builder: model.py, an elementwise-heavy toy; resnet.py, torchvision's resnet18 from its
config), measure.sh (one ``perfdash run`` of the model, printing columns of its performance CSV), a models.toml
naming the scenario's batch size, and a settings.py that the model applies to ``torch._inductor.config`` before
compiling. Its commits, oldest first:

  good  settings.py applies nothing
  c1    config.cpp.min_chunk_size = 512          (Inductor's default: no change)
  c2    config.epilogue_fusion = True            (the default again)
  c3    the scenario's setting                   (the culprit)
  c4    a comment                                (no change)

Two scenarios (``--scenario``):

  scalar   config.cpp.simdlen = 1: no vector ISA has 1 bit, so Inductor's C++ kernels are scalar
           (torch/_inductor/cpu_vec_isa.py pick_vec_isa); about 25x slower. Bisected alone (``--threshold``).
  modest   config.cpp.weight_prepack = False on resnet18 at batch 8: Inductor no longer packs the frozen
           convolution weights for oneDNN ahead of time, about 5 % slower compiled (found with ``--try`` on this
           machine; bench/README.md). Run end to end: ``--nights`` good nights and then the bad head's nights until
           the service's change-point rule (service.detection.changepoint, as the nightly runs it) finds the step;
           then ``perfdash bisect`` as the service's confirm request asks for it: the threshold
           service.alerts.bisections.CONFIRM_THRESHOLD_SHARE of the metric's minimum effect, the series' own noise
           from the good nights (perfdash.noise.robust_cv), the metric the nightly detects (speedup).

    python -m bench.real_bisect [--scenario scalar] [--workdir DIR] [--repeats 7] [--max-pairs 7]
    python -m bench.real_bisect --scenario modest --nights 10 [--workdir DIR]
    python -m bench.real_bisect --try [--rounds 3] [--model resnet.py] [--candidate SETTING ...] [--workdir DIR]

The first two print the verdict, the culprit, the number of ``perfdash run`` measurements and the wall time (and the
nights the detection took); ``--try`` prints each candidate setting's median speedup and latency against no setting.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "real_bisect"
CULPRIT = 3  # the index of the culprit among a scenario's commits


@dataclass(frozen=True)
class Scenario:
    """One bisected regression: the culprit's setting (a line of settings.py's ``apply``), the model's batch size and
    the column measure.sh prints."""

    name: str
    subject: str
    setting: str
    batch_size: int
    column: str  # abs_latency (lower is better) or speedup (higher)
    nightly: bool  # run end to end: nights, detection, then the confirm request's bisection; else bisect alone
    repeat: int = 20  # perfdash run --repeat of each measurement
    model: str = "model.py"  # the builder in bench/data/real_bisect/, copied into the repository as model.py

    @property
    def direction(self) -> str:
        from perfdash.metric_registry import better_of

        return better_of(self.column).value

    def commits(self) -> tuple[tuple[str, str], ...]:
        """(subject, settings.py) oldest first; the culprit is CULPRIT."""
        chunk = "    config.cpp.min_chunk_size = 512\n"
        fusion = chunk + "    config.epilogue_fusion = True\n"
        culprit = fusion + f"    {self.setting}\n"
        return (
            ("settings: none", "def apply(config):\n    pass\n"),
            ("settings: cpp.min_chunk_size 512", "def apply(config):\n" + chunk),
            ("settings: epilogue_fusion on", "def apply(config):\n" + fusion),
            (self.subject, "def apply(config):\n" + culprit),
            ("settings: chunk size again", "def apply(config):\n" + culprit + "    # chunk size stays 512\n"),
        )


SCENARIOS = {
    "scalar": Scenario("scalar", "settings: cpp.simdlen 1", "config.cpp.simdlen = 1", 64, "abs_latency",
                       nightly=False),
    # Chosen with --try on this machine (bench/README.md, "real_bisect.py: a 5 % regression").
    "modest": Scenario("modest", "settings: cpp.weight_prepack off", "config.cpp.weight_prepack = False", 8,
                       "speedup", nightly=True, repeat=30, model="resnet.py"),
}

# Settings tried by --try (unless --candidate names others): each one line of settings.py's apply, against none.
# Inductor's defaults in torch/_inductor/config.py of the installed torch: cpp.weight_prepack on (frozen convolution
# and linear weights packed for oneDNN once), layout_optimization on (channels-last convolutions), cpp.simdlen None
# (the widest ISA found; 256 is AVX2 on an AVX-512 machine), epilogue_fusion on, max_fusion_size 64.
CANDIDATES = (
    "config.cpp.weight_prepack = False",
    "config.layout_optimization = False",
    "config.cpp.simdlen = 256",
    "config.epilogue_fusion = False",
    "config.max_fusion_size = 8",
)


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ada Dev", "GIT_AUTHOR_EMAIL": "ada@example.com",
           "GIT_COMMITTER_NAME": "Ada Dev", "GIT_COMMITTER_EMAIL": "ada@example.com"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def models_toml(batch_size: int) -> str:
    return f'[[model]]\nname = "pointwise"\nbatch_size = {batch_size}\nbuilder = "py:model.py:build"\n'


def make_repo(repo: Path, commits: Sequence[tuple[str, str]], batch_size: int, model: str = "model.py"
              ) -> list[str]:
    """A git repository of ``commits`` (subject, settings.py) around ``model``; their shas, oldest first."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    shutil.copy(DATA / model, repo / "model.py")
    shutil.copy(DATA / "measure.sh", repo / "measure.sh")
    (repo / "models.toml").write_text(models_toml(batch_size))
    shas = []
    for subject, settings in commits:
        (repo / "settings.py").write_text(settings)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", subject)
        shas.append(git(repo, "rev-parse", "HEAD"))
    return shas


def measure_env(column: str, repeat: int = 20) -> dict[str, str]:
    return {**os.environ, "PERFDASH_PYTHON": sys.executable, "PERFDASH_MEASURE_COLUMN": column,
            "PERFDASH_MEASURE_REPEAT": str(repeat)}


def measure_at(repo: Path, sha: str, *columns: str, repeat: int = 20) -> list[float]:
    """One measurement of ``sha``: the ``columns`` measure.sh printed, one a line (perfdash bisect reads the last)."""
    git(repo, "checkout", "-q", sha)
    proc = subprocess.run(["sh", "measure.sh"], cwd=repo, env=measure_env(",".join(columns), repeat),
                          capture_output=True, text=True, check=False)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or len(lines) < len(columns):
        raise RuntimeError(f"measure.sh at {sha[:10]} failed (exit {proc.returncode}): {proc.stdout[-2000:]}"
                           f"{proc.stderr[-2000:]}")
    return [float(line) for line in lines[-len(columns):]]


@dataclass(frozen=True)
class NightlyDetection:
    """The nights measured (the good commit's, then the bad head's) and what the change-point rule made of them."""

    values: list[float]
    good_nights: int
    detected_after: int | None  # bad nights measured when the step was found; None: not within the nights allowed
    change_index: int | None  # the night the rule put the step at (the first bad night is ``good_nights``)
    change_pct: float | None
    false_alarms: list[int]  # nights (0-based) at which a change point was found among the good nights alone


def nightly_detection(measure: Callable[[bool], float], good_nights: int, max_bad_nights: int,
                      metric: str = "speedup") -> NightlyDetection:
    """``good_nights`` of the good commit, then the bad head night by night until the change-point rule, run after
    every night as the nightly's post-ingest hook runs it (incremental: the series up to tonight), finds a regression
    within the confirm request's margin of the first bad night (service.alerts.confirmation.CONFIRM_MARGIN: the
    nights a confirm request widens its range by), at most ``max_bad_nights``. ``measure(bad)`` is one night's value.
    """
    from perfdash.metric_registry import better_of
    from service.alerts.confirmation import CONFIRM_MARGIN
    from service.detection.changepoint import DetectionConfig, detect_change_points

    config = DetectionConfig.for_metric(metric)
    better = better_of(metric)
    values: list[float] = []
    false_alarms: list[int] = []
    for night in range(good_nights + max_bad_nights):
        bad = night >= good_nights
        values.append(measure(bad))
        found = detect_change_points(values, config=config)
        if not bad:
            if found:
                false_alarms.append(night)
            continue
        step = [cp for cp in found if abs(cp.index - good_nights) <= CONFIRM_MARGIN
                and better.is_regression(cp.change_pct)]
        if step:
            return NightlyDetection(values, good_nights, night + 1 - good_nights, step[0].index, step[0].change_pct,
                                    false_alarms)
    return NightlyDetection(values, good_nights, None, None, None, false_alarms)


def confirm_request_flags(scenario: Scenario, good_values: Sequence[float]) -> list[str]:
    """The statistics a confirm request of the scenario's metric hands ``perfdash bisect``: the threshold
    (CONFIRM_THRESHOLD_SHARE of the minimum effect) and the series' noise from the nights before the change (the
    newest NOISE_WINDOW, none below perfdash.noise.MIN_RUNS), as service.alerts.bisections sets them."""
    from perfdash.metric_registry import min_effect_of
    from perfdash.noise import MIN_RUNS, robust_cv
    from service.alerts.bisections import CONFIRM_THRESHOLD_SHARE
    from service.queries.noise import NOISE_WINDOW

    flags = ["--threshold", f"{100.0 * min_effect_of(scenario.column) * CONFIRM_THRESHOLD_SHARE:g}"]
    window = list(good_values)[-NOISE_WINDOW:]
    if len(window) >= MIN_RUNS:
        flags += ["--series-noise", f"{100.0 * robust_cv(window):.4f}", "--series-noise-runs", str(len(window))]
    return flags


def bisect(work: Path, scenario: Scenario, shas: list[str], stat_flags: list[str]) -> tuple[dict | None, str]:
    """``stat_flags``: perfdash bisect's statistics (and ``--duet``) for this bisection."""
    out = work / "result.json"
    proc = subprocess.run(
        [sys.executable, "-m", "perfdash.cli", "bisect", "--repo", str(work / "repo"), "--good", shas[0], "--bad",
         shas[-1], "--measure", "sh measure.sh", "--metric-direction", scenario.direction, *stat_flags,
         "--cache-dir", str(work / "cache"), "--json", str(out)],
        env=measure_env(scenario.column, scenario.repeat), capture_output=True, text=True, check=False)
    return (json.loads(out.read_text()) if out.exists() else None), proc.stderr[-6000:] + f"\n(exit {proc.returncode})"


def try_settings(work: Path, rounds: int, batch_size: int, repeat: int, model: str,
                 candidates: Sequence[str] = CANDIDATES) -> int:
    """Each candidate against no setting, ``rounds`` pairs each (ABBA order), at ``batch_size``."""
    print(f"candidate settings against none: {model} at batch {batch_size}, {rounds} pairs each, speedup and "
          f"compiled latency (perfdash run --repeat {repeat}), medians of the pairs' ratios")
    for i, setting in enumerate(candidates):
        repo = work / f"try{i}"
        shas = make_repo(repo, (("none", "def apply(config):\n    pass\n"),
                                (setting, f"def apply(config):\n    {setting}\n")), batch_size, model)
        speed, latency = [], []
        for r in range(rounds):
            order = (0, 1) if r % 2 == 0 else (1, 0)
            got = {side: measure_at(repo, shas[side], "speedup", "abs_latency", repeat=repeat) for side in order}
            speed.append(got[1][0] / got[0][0])
            latency.append(got[1][1] / got[0][1])
        print(f"{setting:48} speedup x{statistics.median(speed):.3f} ({', '.join(f'{s:.3f}' for s in speed)}); "
              f"latency x{statistics.median(latency):.3f} ({', '.join(f'{v:.3f}' for v in latency)})", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="scalar")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--repeats", type=int, help="perfdash bisect --repeats (scalar: 7)")
    parser.add_argument("--max-pairs", type=int, help="perfdash bisect --max-pairs (scalar: 7; modest: its default)")
    parser.add_argument("--threshold", type=float, default=10.0, help="scalar's --threshold, %% (default 10)")
    parser.add_argument("--nights", type=int, default=10, help="modest: good nights before the culprit lands (10)")
    parser.add_argument("--bad-nights", type=int, default=5, help="modest: most bad nights to detect it in (5)")
    parser.add_argument("--try", dest="try_", action="store_true", help="measure CANDIDATES instead of bisecting")
    parser.add_argument("--rounds", type=int, default=3, help="--try: pairs per candidate (3)")
    parser.add_argument("--batch-size", type=int, help="the model's batch size (default: the scenario's)")
    parser.add_argument("--model", choices=("model.py", "resnet.py"), help="--try: the model (default: modest's)")
    parser.add_argument("--candidate", action="append", help="--try: a setting to try instead of CANDIDATES")
    parser.add_argument("--duet", action="store_true",
                        help="perfdash bisect --duet: each A/B's two commits measured at once, one on each half of "
                             "the CPUs (the nights are measured as before, on the whole machine)")
    args = parser.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="real_bisect_"))
    scenario = SCENARIOS[args.scenario]
    if args.try_:
        modest = SCENARIOS["modest"]
        return try_settings(work, args.rounds, args.batch_size or modest.batch_size, modest.repeat,
                            args.model or modest.model, args.candidate or CANDIDATES)
    started = time.monotonic()
    shas = make_repo(work / "repo", scenario.commits(), args.batch_size or scenario.batch_size, scenario.model)
    detection = None
    if not scenario.nightly:
        stat_flags = ["--threshold", f"{args.threshold:g}", "--repeats", str(args.repeats or 7),
                      "--max-pairs", str(args.max_pairs or 7)]
    else:
        detection = nightly_detection(lambda bad: measure_at(work / "repo", shas[-1 if bad else 0], scenario.column,
                                                                 repeat=scenario.repeat)[0],
                                      args.nights, args.bad_nights, scenario.column)
        git(work / "repo", "checkout", "-q", "main")
        print(f"nights: {', '.join(f'{v:.4f}' for v in detection.values)}; "
              + (f"detected after {detection.detected_after} bad nights, at night {detection.change_index} "
                 f"({detection.change_pct:+.1f} %)"
                 if detection.detected_after else f"NOT detected within {args.bad_nights} bad nights")
              + f"; change points among the good nights alone: {detection.false_alarms or 'none'}", flush=True)
        if detection.detected_after is None:
            return 1
        stat_flags = confirm_request_flags(scenario, detection.values[:detection.good_nights])
        stat_flags += [f for flag, value in (("--repeats", args.repeats), ("--max-pairs", args.max_pairs))
                       if value for f in (flag, str(value))]
    if args.duet:
        stat_flags.append("--duet")
    result, log = bisect(work, scenario, shas, stat_flags)
    wall = time.monotonic() - started
    print(log)
    if result is None:
        print("no result")
        return 1
    culprit = (result.get("culprit") or {}).get("sha")
    verdict = "right" if culprit == shas[CULPRIT] else "WRONG"
    nights = f", {len(detection.values)} for the nights" if detection else ""
    print(f"scenario {scenario.name} ({' '.join(stat_flags)}): verdict {result['verdict']}; culprit {culprit} "
          f"({verdict}: expected {shas[CULPRIT][:10]} \"{scenario.subject}\"); {result['measurements']} perfdash run "
          f"measurements for the bisection{nights}; wall time {wall:.0f} s; result {work / 'result.json'}")
    return 0 if culprit == shas[CULPRIT] else 1


if __name__ == "__main__":
    raise SystemExit(main())
