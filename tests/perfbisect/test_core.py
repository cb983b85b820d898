"""The statistics, the search and the procedure without git: seeded simulated histories."""

from __future__ import annotations

import math
import random

import pytest
from perfbisect.procedure import Bisector, MeasureFailed
from perfbisect.search import next_probe, search
from perfbisect.state import BisectState, StateMismatch
from perfbisect.stats import NoValue, Policy, parse_output


@pytest.mark.parametrize(("stdout", "expected"), [
    ("12.5\n", 12.5),
    ("warming up 3 times\nwork() took 1.5e3 ms\n", 1500.0),
    ("loss 0.3\npass\n", "pass"),
    ("compiled output differs: fail_accuracy", "fail_accuracy"),
    ("speedup: 1.23x", 1.23),
    ("-4", -4.0),
])
def test_parse_output(stdout, expected):
    assert parse_output(stdout) == expected


@pytest.mark.parametrize("stdout", ["", "nothing here", "value: nan"])
def test_parse_output_without_a_value(stdout):
    with pytest.raises(NoValue):
        parse_output(stdout)


# The decision rules themselves (paired A/B rounds, statuses, the cap) are tested in tests/contract/test_ab.py.


@pytest.mark.parametrize("n", [1, 2, 3, 16, 37])
def test_search_finds_every_position_in_log2_steps(n):
    commits = [f"c{i}" for i in range(n)]
    for culprit in range(n):
        result = search(commits, lambda sha, c=culprit: "bad" if int(sha[1:]) >= c else "good")
        assert result.culprit == f"c{culprit}"
        assert len(result.probes) <= math.ceil(math.log2(n)) if n > 1 else not result.probes


def test_search_skips_and_reports_candidates_when_only_skips_are_left():
    commits = [f"c{i}" for i in range(10)]
    broken = {"c5", "c6"}

    def probe(sha):
        return "skip" if sha in broken else ("bad" if int(sha[1:]) >= 7 else "good")

    result = search(commits, probe)
    assert result.culprit is None and result.candidates == ("c5", "c6", "c7")
    assert ("c5", "skip") in result.probes
    # A broken commit elsewhere changes nothing.
    found = search(commits, lambda sha: "skip" if sha == "c4" else ("bad" if int(sha[1:]) >= 7 else "good"))
    assert found.culprit == "c7"


def test_next_probe_walks_out_from_the_middle():
    assert next_probe(-1, 9, set()) == 4
    assert next_probe(-1, 9, {4}) == 3
    assert next_probe(-1, 9, {4, 3}) == 5
    assert next_probe(2, 3, set()) is None


class Simulated:
    """40 commits, the culprit at 23 makes it 5 % slower; commits 10 and 21 do not build; measuring 30 crashes."""

    def __init__(self, seed: int, fail_after: int | None = None) -> None:
        self.rng = random.Random(seed)
        self.calls: list[str] = []
        self.fail_after = fail_after

    def build(self, sha):
        return "broken" if sha in ("c10", "c21") else None

    def measure(self, sha, index):
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise KeyboardInterrupt
        self.calls.append(sha)
        if sha == "c30":
            raise MeasureFailed("segfault")
        slow = sha != "good" and int(sha[1:]) >= 23
        return 100 * (1.05 if slow else 1.0) * (1 + 0.02 * self.rng.gauss(0, 1))


COMMITS = [f"c{i}" for i in range(40)]


@pytest.mark.parametrize("seed", range(5))
def test_bisector_finds_a_5_percent_regression_in_2_percent_noise(seed):
    oracle = Simulated(seed)
    outcome = Bisector(oracle, Policy(threshold_pct=2.5), BisectState(identity={})).run("good", COMMITS)
    assert outcome.verdict == "culprit_found" and outcome.culprit == "c23", outcome
    assert all(s.decision == "skip" for s in outcome.steps if s.sha in ("c10", "c21", "c30"))
    assert outcome.measurements == len(oracle.calls)
    # Every measured step is a paired A/B against the nearest commit found good before it (good at first), pooling
    # the noise of the A/Bs before it (so it may decide after 2 pairs); the culprit was re-measured against its parent.
    pooled, nearest_good = 0, "good"
    for step in outcome.steps:
        if step.decision != "skip":
            assert step.ab is not None and step.ab.a == nearest_good and step.ab.b == step.sha
            assert len(step.ab.samples_a) == len(step.ab.samples_b) >= 2
            assert step.ab.pooled_residuals > pooled  # the confirmation's, then every step's before it
            pooled = step.ab.pooled_residuals
            nearest_good = step.sha if step.decision == "good" else nearest_good
    verification = outcome.verification
    assert verification is not None and verification.answer == "different"
    assert (verification.a, verification.b) == ("c22", "c23")
    # When a step already compared c23 with c22, the verification continued its pairs: at least two more, decided at
    # alpha / 10 over all of them; otherwise it is a fresh A/B at alpha.
    same_sides = [s.ab for s in outcome.steps if s.ab is not None and (s.ab.a, s.ab.b) == ("c22", "c23")]
    if same_sides:
        carried = same_sides[0]
        assert verification.carried_pairs == len(carried.samples_a)
        assert verification.samples_a[: verification.carried_pairs] == carried.samples_a
        assert len(verification.samples_a) >= verification.carried_pairs + 2
        assert verification.alpha == pytest.approx(0.001)
        assert verification.pooled_residuals >= carried.pooled_residuals  # its own pairs are not pooled again
    else:
        assert verification.carried_pairs == 0 and verification.alpha == pytest.approx(0.01)


def test_bisector_resumes_without_measuring_again(tmp_path):
    path = tmp_path / "state.json"
    identity = {"good": "good", "bad": "c39"}
    first = Simulated(7, fail_after=23)
    with pytest.raises(KeyboardInterrupt):
        Bisector(first, Policy(threshold_pct=2.5), BisectState.open(path, identity, resume=False)).run("good", COMMITS)
    saved = BisectState.load(path, identity)
    assert sum(map(len, saved.samples.values())) == 23 == sum(saved.counts.values())  # saved after every measurement

    second = Simulated(8)
    outcome = Bisector(second, Policy(threshold_pct=2.5), BisectState.open(path, identity, resume=True)).run(
        "good", COMMITS)
    assert outcome.culprit == "c23"
    assert outcome.measurements == len(second.calls)
    # Nothing measured before the interruption was measured again: the confirmation replays its samples and order.
    before = saved.samples["confirm:good:c39:A"]
    assert before and list(outcome.good_samples[: len(before)]) == before
    with pytest.raises(StateMismatch):
        BisectState.load(path, {"good": "other"})


def test_bisector_stops_when_not_reproduced_and_errs_when_an_end_does_not_build():
    class Flat(Simulated):
        def measure(self, sha, index):
            return 100 * (1 + 0.02 * self.rng.gauss(0, 1))

    outcome = Bisector(Flat(1), Policy(), BisectState(identity={})).run("good", COMMITS)
    assert outcome.verdict == "not_reproduced" and outcome.steps == () and outcome.culprit is None
    broken_bad = Bisector(Flat(1), Policy(), BisectState(identity={})).run("good", COMMITS[:11])
    assert broken_bad.verdict == "error" and "does not build" in broken_bad.reason


def test_search_probes_cheap_commits_first_and_still_finds_the_culprit():
    commits = [f"c{i}" for i in range(64)]
    nightlies = frozenset(f"c{i}" for i in range(0, 64, 8))  # one commit in eight has a wheel
    for culprit in (0, 13, 40, 63):
        result = search(commits, lambda sha, c=culprit: "bad" if int(sha[1:]) >= c else "good", nightlies)
        assert result.culprit == f"c{culprit}"
        probed = [sha for sha, _ in result.probes]
        cheap = [sha in nightlies for sha in probed]
        assert cheap == sorted(cheap, reverse=True)  # every cheap probe before the first expensive one
        assert sum(not c for c in cheap) <= 3  # then at most log2(8) builds inside the remaining gap


class Gradual(Simulated):
    """No culprit: every commit from c10 on is 0.4 % slower than its parent (14 % over the range)."""

    def measure(self, sha, index):
        self.calls.append(sha)
        steps = 0 if sha == "good" else max(0, int(sha[1:]) - 9)
        return 100 * 1.004**steps * (1 + 0.01 * self.rng.gauss(0, 1))

    def build(self, sha):
        return None


def test_a_culprit_that_does_not_reproduce_against_its_parent_is_not_named():
    outcome = Bisector(Gradual(3), Policy(threshold_pct=5), BisectState(identity={})).run("good", COMMITS)
    assert outcome.confirmation is not None and outcome.confirmation.reproduced  # good..bad: 14 % slower
    assert outcome.verdict == "not_confirmed" and outcome.culprit is None, outcome.reason
    verification = outcome.verification
    assert verification is not None and verification.answer != "different"
    # both measurements are reported (a verification pools the bisection's noise: its first look is at 2 pairs)
    assert len(verification.samples_a) == len(verification.samples_b) >= 2 and verification.pooled_residuals > 0
    assert "nobody named" in outcome.reason


class BrokenBeforeCulprit(Simulated):
    def build(self, sha):
        return "broken" if sha in ("c10", "c21", "c22") else None


def test_a_culprit_whose_parents_do_not_build_is_reported_as_a_range():
    outcome = Bisector(BrokenBeforeCulprit(4), Policy(threshold_pct=2.5), BisectState(identity={})).run(
        "good", COMMITS)
    assert outcome.verdict == "culprit_range" and outcome.culprit is None, outcome.reason
    assert outcome.candidates == ("c21", "c22", "c23")
    # the step across the range was verified: the last good commit that builds against the range's last commit
    assert outcome.verification is not None and outcome.verification.answer == "different"
    assert (outcome.verification.a, outcome.verification.b) == ("c20", "c23")
    assert "c21..c23" in outcome.reason
