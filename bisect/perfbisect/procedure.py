"""The bisection procedure: confirm the regression between good and bad, search, then verify what the search names.

Every comparison is one sequential, paired A/B of perfdash.ab (sides interleaved in a random balanced order, repeats
added in rounds until "different", "same" or the cap):

- the confirmation: good (A) against bad (B), boundary the threshold; only "different" goes on;
- each step: the nearest commit known to be good (A: good, then the last commit a step found good) against the
  commit (B), boundary the confirmed change (its lower 95 % bound, the threshold at least): the test weighs "the
  commit is at good's level" against "at bad's"; at the cap the step goes to the side its likelihood ratio favours
  and is flagged ``forced``;
- the verification: the named culprit (B) against its parent (A), boundary the threshold. "different" names
  it (``culprit_found``); anything else is ``not_confirmed``, with both measurements and no name. When the commits
  before the culprit do not build, the search can only name a range: the step across it (the last good commit that
  builds against the range's last commit) is verified instead, and the verdict is the range (``culprit_range``).
  When the search's last step on the culprit was already against its parent (about half the bisections, since steps
  compare with the nearest good commit), the verification continues that step's pairs: at least two new pairs, and
  "different" at alpha / 10 over all of them (bench/README.md, issue 27: "Third pass").

Every A/B after the confirmation pools the noise (residuals) of those before it, so a step at low noise decides on a
few pairs instead of re-learning the machine's noise. Talks to an ``Oracle`` (builds and measures one commit) and
knows nothing of git, so the bench runs it on simulated histories and the CLI on real checkouts.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

from perfbisect.search import search
from perfbisect.state import BisectState
from perfbisect.stats import Policy, Sample, is_status
from perfdash.ab import AbPolicy, AbRecord, AbSide, change_half_width_pct, residuals, run_ab
from perfdash.bisection import BisectionVerdict, StepDecision
from perfdash.verdicts import BisectionVerdictName

CRASH = "crash"  # the sample of a measurement that printed nothing usable (a crash, a timeout)


class MeasureFailed(RuntimeError):
    """A measurement that produced no value; ``status`` is the sample it stands for (``crash``, ``timeout``)."""

    def __init__(self, reason: str, status: str = CRASH) -> None:
        super().__init__(reason)
        self.status = status


class _StepCrashed(Exception):
    """A numeric bisection's step measured a status (a crash): the commit cannot be placed and is skipped."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


class Oracle(Protocol):
    def build(self, sha: str) -> str | None:
        """Build ``sha``; None when it built, else why it did not (the commit is then skipped, never blamed)."""

    def measure(self, sha: str, index: int) -> Sample:
        """One measurement of the built ``sha``; ``index`` counts this commit's measurements from 0."""


@runtime_checkable
class DuetOracle(Oracle, Protocol):
    def measure_duet(self, sides: Sequence[tuple[str, int, frozenset[int]]]) -> list[Sample | MeasureFailed]:
        """Each (commit, its measurement index, its CPUs) measured at the same time as the others; a side that
        failed is its MeasureFailed, in its place."""


@dataclass(frozen=True, slots=True)
class Confirmation:
    reproduced: bool
    change_pct: float  # B against A, % worse (failure-rate points for statuses)
    p_value: float | None  # of "bad is no worse than good"
    reason: str
    record: AbRecord


@dataclass(frozen=True, slots=True)
class StepRecord:
    sha: str
    decision: StepDecision
    samples: tuple[Sample, ...]  # the commit's samples (B of its A/B)
    reason: str
    rounds: int = 0
    ab: AbRecord | None = None  # None: skipped before anything was compared
    forced: bool = False  # the A/B reached its cap undecided; the step went to the nearer side


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
    verification: AbRecord | None = None  # the culprit (or the range's step) against its parent


class Bisector:
    """One bisection of ``commits`` (oldest first, after ``good``; the last one is ``bad``)."""

    def __init__(self, oracle: Oracle, policy: Policy, state: BisectState,
                 log: Callable[[str], None] = lambda _msg: None,
                 duet: tuple[frozenset[int], frozenset[int]] | None = None) -> None:
        """``duet``: two halves of the machine's CPUs (perfdash.ab.duet_halves); every numeric A/B then measures
        its two sides at the same time, one on each half (the oracle needs ``measure_duet``)."""
        if duet is not None and not isinstance(oracle, DuetOracle):
            raise ValueError("a duet needs an oracle that measures two commits at once (measure_duet)")
        self.duet = duet
        self.oracle = oracle
        self.policy = policy
        self.state = state
        self.log = log
        self.measurements = 0
        self.spent: dict[str, int] = {}  # measurements taken per A/B purpose (confirm, step, verify): where runs go
        # residuals of the numeric A/Bs so far, by their sides (A, B), pooled into the next one's scale
        self.noise_by_sides: dict[tuple[str, str], list[float]] = {}

    # -- measuring ---------------------------------------------------------------------------------------------

    def _status(self, sha: str, index: int, value: Sample | MeasureFailed) -> Sample:
        if isinstance(value, MeasureFailed):
            self.log(f"{sha[:10]}: measurement {index + 1} failed: {value}")
            return value.status
        return value

    def _measure_duet(self, a: str, b: str, a_on_first: bool) -> tuple[Sample, Sample]:
        """One measurement of ``a`` and one of ``b`` at the same time, on the duet's halves."""
        assert self.duet is not None and isinstance(self.oracle, DuetOracle)
        first, second = self.duet
        cpus_a, cpus_b = (first, second) if a_on_first else (second, first)
        index_a, index_b = self.state.counts.get(a, 0), self.state.counts.get(b, 0)
        value_a, value_b = self.oracle.measure_duet([(a, index_a, cpus_a), (b, index_b, cpus_b)])
        self.state.counts[a], self.state.counts[b] = index_a + 1, index_b + 1
        self.measurements += 2
        return self._status(a, index_a, value_a), self._status(b, index_b, value_b)

    def _built(self, sha: str) -> str | None:
        """None when built; the reason it is skipped otherwise (remembered in the state)."""
        if sha in self.state.skipped:
            return self.state.skipped[sha]
        failure = self.oracle.build(sha)
        if failure is not None:
            self.state.skipped[sha] = failure
            self.state.save()
        return failure

    def _measure(self, sha: str) -> Sample:
        index = self.state.counts.get(sha, 0)
        try:
            value: Sample = self.oracle.measure(sha, index)
        except MeasureFailed as exc:
            self.log(f"{sha[:10]}: measurement {index + 1} failed: {exc}")
            value = exc.status
        self.state.counts[sha] = index + 1
        self.measurements += 1
        return value

    def ab(self, purpose: str, a: str, b: str, boundary_pct: float | None = None,
           crash_on_b: bool = False, exact: bool = False, carried: AbRecord | None = None) -> AbRecord:
        """One A/B of ``a`` against ``b`` (perfdash.ab.run_ab), its samples kept in the state under the A/B's key so a
        resumed bisection replays it (the order comes from a generator seeded with the key). ``carried``: an earlier
        A/B of the same sides this one continues (its pairs come first and are not measured again)."""
        key = f"{purpose}:{a}:{b}"
        stored: dict[AbSide, list[Sample]] = {side: self.state.samples.setdefault(f"{key}:{side}", [])
                                              for side in ("A", "B")}
        if carried is not None and not stored["A"]:
            stored["A"].extend(carried.samples_a)
            stored["B"].extend(carried.samples_b)

        def measure(side: AbSide, index: int) -> Sample:
            samples = stored[side]
            if index >= len(samples):
                samples.append(self._measure(a if side == "A" else b))
                self.spent[purpose] = self.spent.get(purpose, 0) + 1
                self.state.save()
            value = samples[index]
            if crash_on_b and side == "B" and is_status(value):
                raise _StepCrashed(str(value))
            return value

        def measure_pair(index: int, a_on_first: bool) -> tuple[Sample, Sample]:
            if index >= len(stored["A"]) or index >= len(stored["B"]):  # a duet stores its pairs whole
                del stored["A"][index:], stored["B"][index:]
                sample_a, sample_b = self._measure_duet(a, b, a_on_first)
                stored["A"].append(sample_a)
                stored["B"].append(sample_b)
                self.spent[purpose] = self.spent.get(purpose, 0) + 2
                self.state.save()
            if crash_on_b and is_status(stored["B"][index]):
                raise _StepCrashed(str(stored["B"][index]))
            return stored["A"][index], stored["B"][index]

        # The noise of the other A/Bs before this one (a continued A/B's own pairs are its own, not pooled twice).
        pooled = [r for sides, res in self.noise_by_sides.items() if sides != (a, b) for r in res]
        policy: AbPolicy = self.policy.ab(boundary_pct, pooled=bool(pooled), exact=exact)
        if carried is not None:
            # A continuation must show more than the A/B it continues: at least two new pairs, and the likelihood
            # ratio over all its pairs must reach 1 / (alpha / 10) (a false "different" at most alpha / 10, with or
            # without the earlier A/B's error), so a step that went wrong by chance is not named on its own pairs.
            policy = replace(policy, alpha=policy.alpha / 10, start=len(carried.samples_a) + 2,
                             cap=max(policy.cap, len(carried.samples_a) + 2))
        record = run_ab(measure, policy, random.Random(key), purpose=purpose, a=a, b=b, noise=tuple(pooled),
                        carried=carried, measure_pair=measure_pair if self.duet else None,
                        on_round=lambda r: self.log(f"{purpose} {b[:10]} vs {a[:10]}, {r.pairs} pairs: {r.reason}"))
        self.noise_by_sides[(a, b)] = residuals(record.samples_a, record.samples_b, policy.direction)
        return record

    # -- the procedure -----------------------------------------------------------------------------------------

    def confirm(self, good: str, bad: str) -> Confirmation:
        """good against bad until "different" (reproduced), "same" or the cap (not reproduced)."""
        record = self.ab("confirm", good, bad)
        last = record.last
        change = last.change_pct if last.change_pct is not None else 0.0
        if record.answer == "different":
            return Confirmation(True, change, last.p_different, last.reason, record)
        reason = f"{last.reason} (unknown after the cap of {record.cap} pairs)" if record.capped else last.reason
        return Confirmation(False, change, last.p_different, reason, record)

    def step(self, sha: str, good: str, boundary_pct: float, numeric: bool) -> StepRecord:
        failure = self._built(sha)
        if failure is not None:
            return StepRecord(sha, "skip", (), f"skipped: {failure}")
        try:
            record = self.ab("step", good, sha, boundary_pct, crash_on_b=numeric, exact=True)
        except _StepCrashed as exc:
            # A numeric bisection cannot place a commit whose measurement crashes: skip it, like a broken build.
            reason = f"skipped: measurement failed ({exc.status})"
            self.state.skipped[sha] = reason
            self.state.save()
            return StepRecord(sha, "skip", tuple(self.state.samples.get(f"step:{good}:{sha}:B", ())), reason)
        last = record.last
        forced = record.answer == "unknown"
        if record.answer == "different":
            decision: StepDecision = "bad"
        elif record.answer == "same":
            decision = "good"
        else:
            decision = "bad" if (last.llr if last.llr is not None else 0.0) > 0 else "good"
        reason = last.reason + (f"; undecided at the cap, {decision} by its median" if forced else "")
        return StepRecord(sha, decision, tuple(record.samples_b), reason, len(record.rounds), record, forced)

    def _confirm_ends(self, good: str, bad: str) -> BisectConclusion | Confirmation:
        """Build both ends and confirm; an outcome when that already ends the run (error, not reproduced)."""
        for end, sha in (("good", good), ("bad", bad)):
            failure = self._built(sha)
            if failure is not None:
                return self._finish(BisectionVerdictName.ERROR, None, (), [], None,
                                    f"the {end} commit {sha[:10]} does not build: {failure}")
        confirmation = self.confirm(good, bad)
        good_samples = confirmation.record.samples_a
        if all(s in (CRASH, "timeout") for s in good_samples):
            # Nothing can be compared with a good commit that cannot be measured: a broken --measure, not a regression.
            return self._finish(BisectionVerdictName.ERROR, None, (), [], confirmation,
                                f"every measurement of the good commit {good[:10]} failed ({good_samples[-1]})")
        if not confirmation.reproduced:
            return self._finish(BisectionVerdictName.NOT_REPRODUCED, None, (), [], confirmation,
                                f"regression not reproduced: {confirmation.reason}")
        return confirmation

    def confirm_only(self, good: str, bad: str) -> BisectConclusion:
        """Only the confirm step: good and bad measured side by side, interleaved, with repeats (the service's A/B
        re-measurement of a candidate regression). Verdict ``confirmed``, ``not_reproduced`` or ``error``."""
        ended = self._confirm_ends(good, bad)
        if isinstance(ended, BisectConclusion):
            return ended
        return self._finish(BisectionVerdictName.CONFIRMED, None, (), [], ended,
                            f"regression reproduced: {ended.reason}")

    def run(self, good: str, commits: Sequence[str], preferred: frozenset[str] = frozenset()) -> BisectConclusion:
        """Confirm, search (``preferred`` commits, cheap to build, probed first while they narrow the range), verify."""
        if not commits:
            raise ValueError("nothing to bisect: bad is not after good")
        bad = commits[-1]
        ended = self._confirm_ends(good, bad)
        if isinstance(ended, BisectConclusion):
            return ended
        confirmation = ended
        numeric = not any(map(is_status, confirmation.record.samples_a + confirmation.record.samples_b))
        # The step's boundary is the size of the confirmed regression (bad's level): its lower 95 % bound, so that a
        # change over-estimated on few pairs does not put bad's level above where bad is; the threshold at least.
        record = confirmation.record
        low = confirmation.change_pct - change_half_width_pct(record.samples_a, record.samples_b, self.policy.direction)
        boundary = max(low, self.policy.threshold_pct) if numeric else self.policy.threshold_pct
        steps: list[StepRecord] = []
        # Each step is measured against the nearest commit known to be good (the search's lower end: good, then the
        # last commit a step found good), so the step that ends the search on the culprit is the culprit against its
        # parent, and the verification continues its pairs instead of starting afresh.
        nearest_good = good

        def probe(sha: str) -> StepDecision:
            nonlocal nearest_good
            record = self.step(sha, nearest_good, boundary, numeric)
            if record.decision == "good":
                nearest_good = sha
            steps.append(record)
            self.log(f"step {len(steps)}: {sha[:10]} {record.decision} ({record.reason}) "
                     f"samples={_fmt(record.samples)}")
            return record.decision

        found = search(commits, probe, preferred)
        # The step to verify: the last commit before the candidates (good when there is none) against the last one.
        first = commits.index(found.candidates[0])
        parent = commits[first - 1] if first > 0 else good
        last = found.candidates[-1]
        if self._built(parent) is not None:  # cannot happen (a broken parent is a candidate); never blame unverified
            return self._finish(BisectionVerdictName.INCONCLUSIVE, None, found.candidates, steps, confirmation,
                                f"the parent {parent[:10]} of the candidates does not build")
        # Verified like the confirmation (boundary the threshold): does this step reproduce a regression? When a step
        # already measured exactly these two sides, the verification continues its pairs.
        same_sides = next((s.ab for s in steps if s.ab is not None and (s.ab.a, s.ab.b) == (parent, last)), None)
        verification = self.ab("verify", parent, last, carried=same_sides)
        shown = f"{last[:10]} against {parent[:10]}: {verification.last.reason}"
        if verification.answer != "different":
            return self._finish(BisectionVerdictName.NOT_CONFIRMED, None, found.candidates, steps, confirmation,
                                f"the search pointed at {_span(found.candidates)}, but re-measured against its parent "
                                f"it is {verification.answer} ({shown}): not confirmed, nobody named",
                                verification)
        if found.culprit is not None:
            return self._finish(BisectionVerdictName.CULPRIT_FOUND, found.culprit, found.candidates, steps,
                                confirmation,
                                f"first bad commit {found.culprit[:10]}, verified against its parent ({shown}; "
                                f"confirmation: {confirmation.reason})", verification)
        return self._finish(BisectionVerdictName.CULPRIT_RANGE, None, found.candidates, steps, confirmation,
                            f"the regression is in the range {_span(found.candidates)} ({len(found.candidates)} "
                            f"commits; those before its last do not build), verified across it ({shown})",
                            verification)

    def _finish(self, verdict: BisectionVerdict, culprit: str | None, candidates: tuple[str, ...],
                steps: list[StepRecord], confirmation: Confirmation | None, reason: str,
                verification: AbRecord | None = None) -> BisectConclusion:
        record = confirmation.record if confirmation else None
        return BisectConclusion(verdict=verdict, culprit=culprit, candidates=candidates, steps=tuple(steps),
                                good_samples=tuple(record.samples_a) if record else (),
                                bad_samples=tuple(record.samples_b) if record else (), confirmation=confirmation,
                                reason=reason, measurements=self.measurements, verification=verification)


def _span(candidates: Sequence[str]) -> str:
    return candidates[0][:10] if len(candidates) == 1 else f"{candidates[0][:10]}..{candidates[-1][:10]}"


def _fmt(samples: Sequence[Sample]) -> str:
    return "[" + ", ".join(f"{s:.4g}" if isinstance(s, float) else str(s) for s in samples) + "]"
