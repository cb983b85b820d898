"""``perfbisect --duet``: each A/B's two commits measured at the same time, one on each half of the CPUs, so that a
move of the whole machine cancels in their ratio (bench/duet_noise.py measured it; bench/README.md, "Duet")."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from perfbisect.commands import PlacedCommand, run_at_once
from perfbisect.procedure import Bisector, MeasureFailed
from perfbisect.state import BisectState
from perfbisect.stats import Policy

from perfdash.ab import duet_halves
from perfdash.cli import main

HALVES = (frozenset({0}), frozenset({1}))
COMMITS = [f"c{i}" for i in range(40)]


class SharedMoves:
    """40 commits, the culprit at 23 makes it 5 % slower; commit 10 does not build, measuring 30 crashes. Every
    measurement is moved by the machine's state at that moment (SD 8 %, shared by whatever runs at that moment)
    and by 0.5 % of its own, as bench/duet_noise.py found the compiled latency's moves on this VM."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.duets: list[list[tuple[str, int, frozenset[int]]]] = []
        self.alone: list[str] = []

    def build(self, sha: str) -> str | None:
        return "broken" if sha == "c10" else None

    def _value(self, sha: str, machine: float) -> float:
        slow = sha != "good" and int(sha[1:]) >= 23
        return 100 * (1.05 if slow else 1.0) * machine * (1 + 0.005 * self.rng.gauss(0, 1))

    def measure(self, sha: str, index: int) -> float:
        self.alone.append(sha)
        if sha == "c30":
            raise MeasureFailed("segfault")
        return self._value(sha, 1 + 0.08 * self.rng.gauss(0, 1))

    def measure_duet(self, sides):
        self.duets.append(list(sides))
        machine = 1 + 0.08 * self.rng.gauss(0, 1)  # the same moment for both sides
        return [MeasureFailed("segfault") if sha == "c30" else self._value(sha, machine) for sha, _, _ in sides]


@pytest.mark.parametrize("seed", range(3))
def test_a_duet_cancels_the_machines_moves_and_finds_the_culprit(seed: int) -> None:
    oracle = SharedMoves(seed)
    outcome = Bisector(oracle, Policy(threshold_pct=2.5), BisectState(identity={}), duet=HALVES).run("good", COMMITS)
    assert outcome.verdict == "culprit_found" and outcome.culprit == "c23", outcome
    assert not oracle.alone  # every measurement was one side of a duet
    assert outcome.measurements == 2 * len(oracle.duets)
    for duet in oracle.duets:  # each side on its own half, the two halves both used
        assert {cpus for _, _, cpus in duet} == set(HALVES)
    # the halves alternate as a sequential A/B's order does: A on the first half in half of the confirmation's pairs
    confirmation = outcome.confirmation.record
    first = sum(1 for d in oracle.duets[: len(confirmation.samples_a)] if d[0][2] == HALVES[0])
    assert abs(2 * first - len(confirmation.samples_a)) <= 1
    assert confirmation.order == "".join("AB" if d[0][2] == HALVES[0] else "BA"
                                         for d in oracle.duets[: len(confirmation.samples_a)])
    assert all(s.decision == "skip" for s in outcome.steps if s.sha in ("c10", "c30"))


def test_one_at_a_time_the_same_moves_hide_the_regression() -> None:
    """The same machine, measured one side after the other: the 8 % moves no longer cancel (the reason for a duet),
    and the sequential A/B cannot confirm 5 % within its cap."""
    duet = Bisector(SharedMoves(1), Policy(threshold_pct=2.5), BisectState(identity={}), duet=HALVES).run(
        "good", COMMITS)
    alone = Bisector(SharedMoves(1), Policy(threshold_pct=2.5), BisectState(identity={})).run("good", COMMITS)
    assert duet.culprit == "c23"
    assert alone.culprit is None and alone.verdict in ("not_confirmed", "not_reproduced")
    assert alone.measurements > 3 * duet.measurements


def test_an_interrupted_duet_resumes_without_measuring_again(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    identity = {"good": "good", "bad": "c39", "duet": [[0], [1]]}

    class Interrupted(SharedMoves):
        def measure_duet(self, sides):
            if len(self.duets) == 9:
                raise KeyboardInterrupt
            return super().measure_duet(sides)

    with pytest.raises(KeyboardInterrupt):
        Bisector(Interrupted(4), Policy(threshold_pct=2.5), BisectState.open(path, identity, resume=False),
                 duet=HALVES).run("good", COMMITS)
    saved = BisectState.load(path, identity)
    assert sum(map(len, saved.samples.values())) == 18 == sum(saved.counts.values())  # whole pairs, saved each
    second = SharedMoves(5)
    outcome = Bisector(second, Policy(threshold_pct=2.5), BisectState.open(path, identity, resume=True),
                       duet=HALVES).run("good", COMMITS)
    assert outcome.culprit == "c23"
    assert outcome.measurements == 2 * len(second.duets)
    before = saved.samples["confirm:good:c39:A"]
    assert before and list(outcome.good_samples[: len(before)]) == before


def test_a_duet_needs_an_oracle_that_measures_two_at_once() -> None:
    class OneAtATime:
        def build(self, sha: str) -> str | None:
            return None

        def measure(self, sha: str, index: int) -> float:
            return 1.0

    with pytest.raises(ValueError, match="measure_duet"):
        Bisector(OneAtATime(), Policy(), BisectState(identity={}), duet=HALVES)


def test_the_halves_split_the_cpus_and_refuse_one() -> None:
    assert duet_halves([5, 4, 6, 7]) == (frozenset({4, 5}), frozenset({6, 7}))
    with pytest.raises(ValueError):
        duet_halves([0])


def test_commands_run_at_once_each_on_its_cpus_and_a_timeout_kills_only_its_own(tmp_path: Path) -> None:
    # Each side says it started, then waits for the other's start (bounded): both meet only if they ran at once.
    def side(name: str, other: str) -> str:
        return (f'touch {name}; i=0; while [ ! -e {other} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; '
                f'[ -e {other} ] && echo met; grep Cpus_allowed_list /proc/self/status')

    env = dict(os.environ)
    results = run_at_once([PlacedCommand(side("a", "b"), tmp_path, env, frozenset({0})),
                           PlacedCommand(side("b", "a"), tmp_path, env, frozenset({1}))], timeout=60)
    assert [r.returncode for r in results] == [0, 0]
    assert all(r.stdout.startswith("met") for r in results), results
    assert results[0].stdout.split()[-1] == "0" and results[1].stdout.split()[-1] == "1"

    hung, quick = run_at_once([PlacedCommand("sleep 30", tmp_path, env, frozenset({0})),
                               PlacedCommand("echo 7", tmp_path, env, frozenset({1}))], timeout=1)
    assert hung.returncode is None and quick.returncode == 0 and quick.stdout.strip() == "7"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a duet needs two CPUs")
def test_perfdash_bisect_duet_end_to_end(perf_history, cache_dir, tmp_path, capsys) -> None:
    # the measure command logs the CPUs it may use; the synthetic history's seeded noise is per commit and index
    log = tmp_path / "cpus.log"
    measure = tmp_path / "measure.sh"
    measure.write_text(f'echo "$PERFBISECT_CPUS $(grep Cpus_allowed_list /proc/self/status | cut -f2)" >> {log}\n'
                       "exec sh measure.sh\n")
    out = tmp_path / "result.json"
    code = main(["bisect", "--repo", str(perf_history.repo), "--good", perf_history.shas[0], "--bad",
                 perf_history.shas[-1], "--build", "sh build.sh", "--measure", f"sh {measure}", "--cache-dir",
                 str(cache_dir), "--json", str(out), "--duet"])
    stderr = capsys.readouterr().err
    assert code == 0, stderr
    result = json.loads(out.read_text())
    assert result["verdict"] == "culprit_found" and result["culprit"]["sha"] == perf_history.shas[17]
    first, second = (sorted(h) for h in duet_halves(sorted(os.sched_getaffinity(0))))
    assert result["duet"] == [first, second]
    assert "duets" in result["summary"]
    lines = log.read_text().splitlines()
    assert len(lines) == result["measurements"]
    halves = {",".join(map(str, first)), ",".join(map(str, second))}
    # every measurement was told its half and was held to it (the kernel's list: "0" or "1" on two CPUs)
    for line in lines:
        told, allowed = line.split()
        assert told in halves and _cpu_list(allowed) == {int(c) for c in told.split(",")}, line
    assert {line.split()[0] for line in lines} == halves


def _cpu_list(text: str) -> set[int]:
    """The kernel's CPU list ("0-2,5") as a set."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def test_a_pytorch_mode_side_runs_as_many_threads_as_its_half_unless_the_series_names_them(tmp_path: Path) -> None:
    import shlex

    from perfbisect.pytorch import TorchOracle, TorchTarget

    def command(target: TorchTarget, cpus: frozenset[int] | None) -> list[str]:
        oracle = TorchOracle(repo=tmp_path, measure_cmd="", cache_dir=tmp_path / "cache", target=target)
        placed, _ = oracle.placed("a" * 40, 0, cpus)
        assert placed.cpus == (cpus or frozenset())
        return shlex.split(placed.cmd)

    def threads(argv: list[str]) -> list[str]:
        return [argv[i + 1] for i, arg in enumerate(argv) if arg == "--threads"]

    plain = TorchTarget(suite="timm_models", model="m")
    assert threads(command(plain, None)) == []  # alone: the series' configuration, all cores
    assert threads(command(plain, frozenset({2, 3}))) == ["2"]  # a duet's half of two CPUs
    pinned = TorchTarget(suite="timm_models", model="m", threads=1)
    assert threads(command(pinned, frozenset({2, 3}))) == ["1"]  # the series' own threads, once


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a duet needs two CPUs")
def test_a_duet_refuses_series_threads_that_do_not_fit_its_half(perf_history, cache_dir, tmp_path, capsys) -> None:
    half = len(duet_halves(sorted(os.sched_getaffinity(0)))[0])
    code = main(["bisect", "--repo", str(perf_history.repo), "--good", perf_history.shas[0], "--bad",
                 perf_history.shas[-1], "--suite", "timm_models", "--model", "m", "--threads", str(half + 1),
                 "--cache-dir", str(cache_dir), "--duet"])
    assert code != 0
    assert f"--threads {half + 1} does not fit" in capsys.readouterr().err
