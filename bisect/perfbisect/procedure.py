"""The bisection procedure: confirm the regression between good and bad, then search, deciding each step with
several measurements and a statistical test. Talks to an ``Oracle`` (builds and measures one commit) and knows
nothing of git, so the bench runs it on simulated histories and the CLI on real checkouts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from perfbisect.search import search
from perfbisect.state import BisectState
from perfbisect.stats import Confirmation, Policy, Sample, confirm, decide, is_status
from perfdash.bisection import BisectionVerdict, StepDecision

CRASH = "crash"  # the sample of a measurement that printed nothing usable (a crash, a timeout)


class MeasureFailed(RuntimeError):
    """A measurement that produced no value; ``status`` is the sample it stands for (``crash``, ``timeout``)."""

    def __init__(self, reason: str, status: str = CRASH) -> None:
        super().__init__(reason)
        self.status = status


class Oracle(Protocol):
    def build(self, sha: str) -> str | None:
        """Build ``sha``; None when it built, else why it did not (the commit is then skipped, never blamed)."""

    def measure(self, sha: str, index: int) -> Sample:
        """One measurement of the built ``sha``; ``index`` counts this commit's measurements from 0."""


@dataclass(frozen=True, slots=True)
class StepRecord:
    sha: str
    decision: StepDecision
    samples: tuple[Sample, ...]
    reason: str
    rounds: int = 0
    p_good: float | None = None
    p_bad: float | None = None
    position: float | None = None
    forced: bool = False  # decided on the median alone (see stats.decide): the least certain kind of step


@dataclass(frozen=True, slots=True)
class BisectConclusion:
    verdict: BisectionVerdict
    culprit: str | None
    candidates: tuple[str, ...]
    steps: tuple[StepRecord, ...]
    good_samples: tuple[Sample, ...]
    bad_samples: tuple[Sample, ...]
    confirmation: Confirmation | None
    reason: str
    measurements: int = 0  # measurements taken by this run (not those replayed from a resumed state)


class Bisector:
    """One bisection of ``commits`` (oldest first, after ``good``; the last one is ``bad``)."""

    def __init__(self, oracle: Oracle, policy: Policy, state: BisectState,
                 log: Callable[[str], None] = lambda _msg: None) -> None:
        self.oracle = oracle
        self.policy = policy
        self.state = state
        self.log = log
        self.measurements = 0
        self._ends: tuple[str, str] | None = None

    # -- measuring ---------------------------------------------------------------------------------------------

    def _built(self, sha: str) -> str | None:
        """None when built; the reason it is skipped otherwise (remembered in the state)."""
        if sha in self.state.skipped:
            return self.state.skipped[sha]
        failure = self.oracle.build(sha)
        if failure is not None:
            self.state.skipped[sha] = failure
            self.state.save()
        return failure

    def _measure_to(self, sha: str, count: int) -> list[Sample]:
        samples = self.state.samples.setdefault(sha, [])
        while len(samples) < count:
            try:
                value: Sample = self.oracle.measure(sha, len(samples))
            except MeasureFailed as exc:
                self.log(f"{sha[:10]}: measurement {len(samples) + 1} failed: {exc}")
                value = exc.status
            samples.append(value)
            self.measurements += 1
            self.state.save()
        return samples[:count] if len(samples) > count else samples

    # -- the procedure -----------------------------------------------------------------------------------------

    def confirm(self, good: str, bad: str) -> Confirmation:
        """Measure good and bad, interleaved (against drift), in rounds until the regression is confirmed or not."""
        result: Confirmation | None = None
        for round_ in range(1, self.policy.max_rounds + 1):
            self._measure_to(good, 1)
            self._measure_to(bad, 1)
            numeric = not is_status(self.state.samples[good][0]) and not is_status(self.state.samples[bad][0])
            # Statuses are mostly deterministic: the extra reference runs only pay off for noisy numbers.
            target = round_ * self.policy.repeats * (self.policy.reference_factor if numeric else 1)
            for n in range(1, target + 1):
                self._measure_to(good, n)
                self._measure_to(bad, n)
            result = confirm(self.state.samples[good][:target], self.state.samples[bad][:target], self.policy,
                             final=round_ == self.policy.max_rounds)
            self.log(f"confirm round {round_}: {result.reason}")
            if result.reproduced is not None:
                return result
        assert result is not None
        return result

    def step(self, sha: str, good: Sequence[Sample], bad: Sequence[Sample]) -> StepRecord:
        failure = self._built(sha)
        if failure is not None:
            return StepRecord(sha, "skip", (), f"skipped: {failure}")
        numeric = not any(map(is_status, good)) and not any(map(is_status, bad))
        samples: list[Sample] = []
        for round_ in range(1, self.policy.max_rounds + 1):
            samples = self._measure_to(sha, round_ * self.policy.repeats)
            if numeric and any(map(is_status, samples)):
                # A numeric bisection cannot place a commit whose measurement crashes: skip it, like a broken build.
                reason = f"skipped: measurement failed ({', '.join(sorted({s for s in samples if is_status(s)}))})"
                self.state.skipped[sha] = reason
                self.state.save()
                return StepRecord(sha, "skip", tuple(samples), reason, round_)
            decision = decide(samples, good, bad, self.policy, final=round_ == self.policy.max_rounds)
            if decision.verdict is not None:
                return StepRecord(sha, decision.verdict, tuple(samples), decision.reason, round_, decision.p_good,
                                  decision.p_bad, decision.position, decision.forced)
        raise AssertionError("the final round always decides")

    def _confirm_ends(self, good: str, bad: str) -> BisectConclusion | Confirmation:
        """Build both ends and confirm; an outcome when that already ends the run (error, not reproduced)."""
        self._ends = (good, bad)
        for end, sha in (("good", good), ("bad", bad)):
            failure = self._built(sha)
            if failure is not None:
                return self._finish("error", None, (), [], None,
                                    f"the {end} commit {sha[:10]} does not build: {failure}")
        confirmation = self.confirm(good, bad)
        good_samples = self.state.samples[good]
        if all(s in (CRASH, "timeout") for s in good_samples):
            # Nothing can be compared with a good commit that cannot be measured: a broken --measure, not a regression.
            return self._finish("error", None, (), [], confirmation,
                                f"every measurement of the good commit {good[:10]} failed ({good_samples[-1]})")
        if not confirmation.reproduced:
            return self._finish("not_reproduced", None, (), [], confirmation,
                                f"regression not reproduced: {confirmation.reason}")
        return confirmation

    def confirm_only(self, good: str, bad: str) -> BisectConclusion:
        """Only the confirm step: good and bad measured side by side, interleaved, with repeats (the service's A/B
        re-measurement of a candidate regression). Verdict ``confirmed``, ``not_reproduced`` or ``error``."""
        ended = self._confirm_ends(good, bad)
        if isinstance(ended, BisectConclusion):
            return ended
        return self._finish("confirmed", None, (), [], ended, f"regression reproduced: {ended.reason}")

    def run(self, good: str, commits: Sequence[str], preferred: frozenset[str] = frozenset()) -> BisectConclusion:
        """Confirm, then search; ``preferred`` commits (cheap to build) are probed first while they narrow the range."""
        if not commits:
            raise ValueError("nothing to bisect: bad is not after good")
        bad = commits[-1]
        ended = self._confirm_ends(good, bad)
        if isinstance(ended, BisectConclusion):
            return ended
        confirmation = ended
        target = len(self.state.samples[good])
        good_ref, bad_ref = self.state.samples[good][:target], self.state.samples[bad][:target]
        steps: list[StepRecord] = []

        def probe(sha: str) -> StepDecision:
            record = self.step(sha, good_ref, bad_ref)
            steps.append(record)
            self.log(f"step {len(steps)}: {sha[:10]} {record.decision} ({record.reason}) "
                     f"samples={_fmt(record.samples)}")
            return record.decision

        found = search(commits, probe, preferred)
        if found.culprit is not None:
            return self._finish("culprit_found", found.culprit, found.candidates, steps, confirmation,
                                f"first bad commit {found.culprit[:10]} ({confirmation.reason})")
        return self._finish("inconclusive", None, found.candidates, steps, confirmation,
                            f"only skipped commits are left: the first bad commit is one of {len(found.candidates)}")

    def _finish(self, verdict: BisectionVerdict, culprit: str | None, candidates: tuple[str, ...],
                steps: list[StepRecord], confirmation: Confirmation | None, reason: str) -> BisectConclusion:
        good = self.state.samples.get(self._ends[0], []) if self._ends else []
        bad = self.state.samples.get(self._ends[1], []) if self._ends else []
        return BisectConclusion(verdict=verdict, culprit=culprit, candidates=candidates, steps=tuple(steps),
                             good_samples=tuple(good), bad_samples=tuple(bad), confirmation=confirmation,
                             reason=reason, measurements=self.measurements)


def _fmt(samples: Sequence[Sample]) -> str:
    return "[" + ", ".join(f"{s:.4g}" if isinstance(s, float) else str(s) for s in samples) + "]"
