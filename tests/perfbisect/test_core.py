"""The statistics, the search and the procedure without git: seeded simulated histories."""

from __future__ import annotations

import math
import random

import pytest
from perfbisect.procedure import Bisector, MeasureFailed
from perfbisect.search import next_probe, search
from perfbisect.state import BisectState, StateMismatch
from perfbisect.stats import NoValue, Policy, confirm, decide, parse_output


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


def _noisy(rng: random.Random, centre: float, n: int, noise: float = 0.02) -> list[float]:
    return [centre * (1 + noise * rng.gauss(0, 1)) for _ in range(n)]


def test_confirm_sees_a_regression_in_either_direction():
    rng = random.Random(1)
    good, bad = _noisy(rng, 100, 5), _noisy(rng, 110, 5)
    assert confirm(good, bad, Policy(direction="lower")).reproduced is True
    # For a speedup (higher is better) the same numbers are an improvement, not a regression.
    higher = confirm(good, bad, Policy(direction="higher"), final=True)
    assert higher.reproduced is False and higher.change_pct < 0


def test_confirm_rejects_a_change_below_the_threshold_and_noise():
    rng = random.Random(2)
    small = confirm(_noisy(rng, 100, 10, 0.001), _noisy(rng, 102, 10, 0.001), Policy(threshold_pct=5))
    assert small.reproduced is False and 1.5 < small.change_pct < 2.5  # significant, but too small to bisect
    same = confirm(_noisy(rng, 100, 5), _noisy(rng, 100, 5), Policy(threshold_pct=5), final=True)
    assert same.reproduced is False


def test_confirm_asks_for_more_when_the_effect_is_large_but_not_yet_significant():
    result = confirm([100.0, 112.0], [111.0, 101.0, 113.0], Policy(threshold_pct=2))
    assert result.reproduced is None and "measuring more" in result.reason


def test_decide_places_commits_and_waits_when_unsure():
    good, bad = [99.0, 100.0, 101.0, 100.5, 99.5], [109.0, 110.0, 111.0, 110.5, 109.5]
    policy = Policy()
    assert decide([100.2, 99.8, 100.7, 99.1, 100.4], good, bad, policy).verdict == "good"
    assert decide([110.2, 109.8, 110.7, 109.1, 110.4], good, bad, policy).verdict == "bad"
    # One sample among the good ones does not pull a bad commit over (rank test, median position).
    assert decide([110.2, 109.8, 100.7, 110.1, 110.4], good, bad, policy).verdict == "bad"
    middle = decide([103.0, 105.0, 104.0], good, bad, policy)
    assert middle.verdict is None
    forced = decide([103.0, 105.0, 104.0], good, bad, policy, final=True)
    assert forced.verdict == "good" and forced.forced  # median below half way, flagged as decided on it alone
    assert not decide([100.2, 99.8, 100.7, 99.1, 100.4], good, bad, policy, final=True).forced


def test_status_samples_decide_by_failure_rate():
    policy = Policy(repeats=2)
    assert confirm(["pass", "pass"], ["fail_accuracy", "fail_accuracy"], policy).reproduced is True
    assert confirm(["pass", "pass"], ["pass", "pass"], policy).reproduced is False
    assert decide(["fail_accuracy", "crash"], ["pass"], ["fail_accuracy"], policy).verdict == "bad"
    assert decide(["pass"], ["pass"], ["fail_accuracy"], policy).verdict == "good"
    assert decide(["pass", "fail_accuracy"], ["pass"], ["fail_accuracy"], policy).verdict is None


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


def test_bisector_resumes_without_measuring_again(tmp_path):
    path = tmp_path / "state.json"
    identity = {"good": "good", "bad": "c39"}
    first = Simulated(7, fail_after=23)
    with pytest.raises(KeyboardInterrupt):
        Bisector(first, Policy(threshold_pct=2.5), BisectState.open(path, identity, resume=False)).run("good", COMMITS)
    saved = BisectState.load(path, identity)
    assert sum(map(len, saved.samples.values())) == 23  # saved after every measurement

    second = Simulated(8)
    outcome = Bisector(second, Policy(threshold_pct=2.5), BisectState.open(path, identity, resume=True)).run(
        "good", COMMITS)
    assert outcome.culprit == "c23"
    assert outcome.measurements == len(second.calls)
    # Nothing measured before the interruption was measured again.
    assert list(outcome.good_samples[: len(saved.samples["good"])]) == saved.samples["good"]
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
