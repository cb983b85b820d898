"""The result of a bisection: one dataclass, serialised for ``--json``, for the service, and as a rich summary."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from perfbisect.gitops import Commit
from perfbisect.procedure import BisectConclusion, StepRecord
from perfbisect.stats import Policy, Sample
from perfdash.ab import AbRecord
from perfdash.bisection import BisectionResult, BisectionVerdict, BisectStep, Culprit
from perfdash.verdicts import BisectionVerdictName

REPORT_VERSION = 2  # 2: every A/B as perfdash.ab recorded it; the culprit's verification
# The verdicts with commits and no culprit: the heading above their list
CANDIDATES_HEADING = {
    BisectionVerdictName.INCONCLUSIVE: "[bold yellow]inconclusive[/]: the first bad commit is one of",
    BisectionVerdictName.CULPRIT_RANGE: "[bold red]the regression is in the range[/] (the commits before the last do "
                                        "not build)",
    BisectionVerdictName.NOT_CONFIRMED: "[bold yellow]not confirmed[/]: the search pointed at",
}


@dataclass(frozen=True, slots=True)
class BisectReport:
    verdict: BisectionVerdict
    culprit: Commit | None
    candidates: tuple[Commit, ...]
    good: Commit
    bad: Commit
    steps: tuple[StepRecord, ...]
    good_samples: tuple[Sample, ...]
    bad_samples: tuple[Sample, ...]
    change_pct: float | None
    p_value: float | None
    policy: Policy
    commits_in_range: int
    measurements: int
    summary: str
    jenkins_build_url: str | None = None
    subjects: dict[str, str] = field(default_factory=dict)  # sha -> subject of every commit probed
    confirmation: AbRecord | None = None
    verification: AbRecord | None = None
    processes: int | None = None  # perfdash run --processes of every measurement (PyTorch mode; None: not passed)
    duet: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # --duet: the two halves' CPUs (None: one at a time)

    def to_service(self) -> dict[str, Any]:
        """The body of ``POST /api/v1/bisections/{id}/result`` (the agreed contract, nothing more)."""
        return self.to_result().model_dump(mode="json")

    def to_result(self) -> BisectionResult:
        return BisectionResult(
            verdict=self.verdict,
            culprit=Culprit(**self.culprit.to_json()) if self.culprit else None,
            steps=[BisectStep(sha=s.sha, samples=list(s.samples), decision=s.decision, reason=s.reason,
                              forced=s.forced, ab=s.ab) for s in self.steps],
            good_samples=list(self.good_samples),
            bad_samples=list(self.bad_samples),
            summary=self.summary,
            jenkins_build_url=self.jenkins_build_url,
            change_pct=self.change_pct if self.change_pct is not None and math.isfinite(self.change_pct) else None,
            p_value=self.p_value,
            candidates=[Culprit(**c.to_json()) for c in self.candidates],
            confirmation=self.confirmation,
            verification=self.verification,
        )

    def to_json(self) -> dict[str, Any]:
        """Everything: the service body plus the details a person checking the verdict wants."""
        data = self.to_service()
        data["report_version"] = REPORT_VERSION
        for step in data["steps"]:
            step["subject"] = self.subjects.get(step["sha"], "")
        data.update(
            good=self.good.to_json(), bad=self.bad.to_json(),
            change_pct=self.change_pct, p_value=self.p_value, commits_in_range=self.commits_in_range,
            measurements=self.measurements, processes=self.processes,
            duet=[list(half) for half in self.duet] if self.duet else None,
            policy={"direction": self.policy.direction, "threshold_pct": self.policy.threshold_pct,
                    "alpha": self.policy.alpha, "repeats": self.policy.repeats, "max_pairs": self.policy.max_pairs,
                    "cap": self.policy.cap, "series_noise_pct": None if self.policy.series_cv is None
                    else self.policy.series_cv * 100, "series_noise_runs": self.policy.series_runs},
        )
        return data

    def write_json(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2), encoding="utf-8")
        tmp.replace(path)

    def print(self, console: Console) -> None:
        table = Table(title=f"bisection {self.good.sha[:10]}..{self.bad.sha[:10]} ({self.commits_in_range} commits)")
        for column in ("step", "commit", "subject", "decision", "samples", "why"):
            table.add_column(column, overflow="fold")
        table.add_row("good", self.good.sha[:10], self.good.subject[:50], "reference", _samples(self.good_samples), "")
        table.add_row("bad", self.bad.sha[:10], self.bad.subject[:50], "reference", _samples(self.bad_samples), "")
        subjects = self.subjects
        for number, step in enumerate(self.steps, start=1):
            style = {"good": "green", "bad": "red", "skip": "yellow"}[step.decision]
            table.add_row(str(number), step.sha[:10], subjects.get(step.sha, "")[:50],
                          f"[{style}]{step.decision}[/{style}]", _samples(step.samples), step.reason)
        console.print(table)
        if self.culprit is not None:
            console.print(f"[bold red]first bad commit[/] {self.culprit.sha}\n  {self.culprit.subject}\n"
                          f"  {self.culprit.author}, {self.culprit.date}")
        elif self.verdict in CANDIDATES_HEADING:
            console.print(CANDIDATES_HEADING[self.verdict])
            for commit in self.candidates:
                console.print(f"  {commit.sha[:10]} {commit.subject}")
        console.print(self.summary)


def _samples(samples: tuple[Sample, ...]) -> str:
    return ", ".join(f"{s:.4g}" if isinstance(s, float) else str(s) for s in samples)


def build_report(outcome: BisectConclusion, commit: Callable[[str], Commit], good: str, bad: str, policy: Policy,
                 commits_in_range: int, jenkins_build_url: str | None = None,
                 processes: int | None = None, duet: tuple[frozenset[int], frozenset[int]] | None = None
                 ) -> BisectReport:
    confirmation = outcome.confirmation
    culprit = commit(outcome.culprit) if outcome.culprit else None
    skipped = sum(s.decision == "skip" for s in outcome.steps)
    parts = [outcome.reason]
    if outcome.steps:
        parts.append(f"{len(outcome.steps)} steps ({skipped} skipped), {outcome.measurements} measurements"
                     + (" (measured in duets: two at a time)" if duet else ""))
    forced = sum(s.forced for s in outcome.steps)
    if forced:
        # Steps the A/B could not decide within its cap went to the nearer side: say so, with the remedy.
        parts.append(f"low confidence: {forced} step(s) still unknown at the cap of {policy.cap} pairs, decided by "
                     f"the side its likelihood ratio favoured; rerun with more --max-pairs to confirm")
    if culprit is not None:
        parts.insert(0, f"{culprit.sha[:10]} \"{culprit.subject}\" ({culprit.author}, {culprit.date})")
    return BisectReport(
        verdict=outcome.verdict, culprit=culprit, candidates=tuple(commit(c) for c in outcome.candidates),
        good=commit(good), bad=commit(bad), steps=outcome.steps, good_samples=outcome.good_samples,
        bad_samples=outcome.bad_samples, change_pct=confirmation.change_pct if confirmation else None,
        p_value=confirmation.p_value if confirmation else None, policy=policy, commits_in_range=commits_in_range,
        measurements=outcome.measurements, summary="; ".join(parts), jenkins_build_url=jenkins_build_url,
        subjects={s.sha: commit(s.sha).subject for s in outcome.steps},
        confirmation=confirmation.record if confirmation else None, verification=outcome.verification,
        processes=processes, duet=(tuple(sorted(duet[0])), tuple(sorted(duet[1]))) if duet else None,
    )
