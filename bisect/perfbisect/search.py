"""The search strategy alone: binary search over a linear list of commits, with skips. No git, no measuring.

Why our own driver instead of ``git bisect run``: ``git bisect`` asks its script for one answer per commit, but a
noisy measurement sometimes needs another round on the same commit before it can answer, and the confirmed
references must be measured (interleaved) before the first step; ``git bisect`` also keeps its state in the
repository (refs/bisect, BISECT_LOG), which a crash would leave behind. This driver walks ``git rev-list
--first-parent good..bad`` (the order PyTorch's linear main branch lands in), keeps its state in a file outside the
repository, and does what ``git bisect run`` does with exit 125: a skipped commit is never blamed, the next probe is
the untested commit closest to the middle, and when only skipped commits remain the answer is the list of candidates.
Being pure, the same code runs the bench's simulated histories.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from perfdash.bisection import StepDecision


@dataclass(frozen=True, slots=True)
class SearchResult:
    culprit: str | None  # the first bad commit, when the skips allow naming one
    candidates: tuple[str, ...]  # the commits the first bad one is among (one: the culprit)
    probes: tuple[tuple[str, StepDecision], ...]  # every probe in order


def next_probe(lo: int, hi: int, skipped: set[int], preferred: frozenset[int] = frozenset()) -> int | None:
    """The untested index strictly between lo and hi closest to the middle (lower first), or None.

    Indices in ``preferred`` (commits that are cheap to test, e.g. those with a nightly wheel) go first while any is
    left in the range: the range narrows to two neighbouring cheap commits before anything is built from source.
    Any probe order finds the same first bad commit; only the cost changes.
    """
    middle = (lo + hi) // 2
    for pool in (preferred, None):
        for distance in range(hi - lo):
            for index in (middle - distance, middle + distance) if distance else (middle,):
                if lo < index < hi and index not in skipped and (pool is None or index in pool):
                    return index
    return None


def search(commits: Sequence[str], probe: Callable[[str], StepDecision],
           preferred: frozenset[str] = frozenset()) -> SearchResult:
    """Find the first bad commit in ``commits`` (oldest first, all after the good one; the last one is known bad)."""
    if not commits:
        raise ValueError("no commits between good and bad")
    lo, hi = -1, len(commits) - 1
    skipped: set[int] = set()
    cheap = frozenset(i for i, sha in enumerate(commits) if sha in preferred)
    probes: list[tuple[str, StepDecision]] = []
    while True:
        index = next_probe(lo, hi, skipped, cheap)
        if index is None:
            break
        outcome = probe(commits[index])
        probes.append((commits[index], outcome))
        if outcome == "good":
            lo = index
        elif outcome == "bad":
            hi = index
        elif outcome == "skip":
            skipped.add(index)
        else:
            raise ValueError(f"probe returned {outcome!r}; expected good, bad or skip")
    candidates = tuple(commits[lo + 1 : hi + 1])
    return SearchResult(culprit=candidates[0] if len(candidates) == 1 else None, candidates=candidates,
                        probes=tuple(probes))
