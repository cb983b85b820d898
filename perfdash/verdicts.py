"""The change vocabulary, declared once: what a change between two runs *is*, how bad it is, and where it is shown.

Two kinds of word share one table (and what follows a finding has its words at the end: its confirmation state,
:class:`ConfirmationState`, and a bisection's verdict, :class:`BisectionVerdictName`):

- a model's **verdict** between two runs (Compare, Releases, the model tables' filter tags): judged by
  :func:`perfdash.judgement.judge`;
- a **finding category**: what detection (service.detection.detector) files when a run arrives, and where the
  nightly report and the GitHub publisher put it.

Each entry says its severity (the CSS class of the pages: ``worse``, ``better``, ``note``, ``neutral``), its label
(one item: "new failure"), its heading (a section of the pages and of the report: "New failures"), the report's
section (the list of ``service.detection.report.ReportContext`` it is filed in) and that section's heading in the
report (``report_heading``, printed by templates/report.md.j2), and the model table's filter tag.
Order is the order of the tuples: the Releases view sorts and counts by it. A word that is not here is an error
(:class:`UnknownVerdict`), never filed as a regression by default. Templates get this module as the Jinja global
``verdicts``; the charts get each finding's severity in their JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Severity(StrEnum):
    """How a change reads to a person; the string is the pages' CSS class."""

    WORSE = "worse"
    BETTER = "better"
    NOTE = "note"  # neither: something around the measurement changed
    NEUTRAL = "neutral"


@dataclass(frozen=True, slots=True)
class Verdict:
    name: str  # stored and sent as is: API fields, finding categories, data-* attributes
    severity: Severity
    label: str  # one item: "new failure"
    heading: str  # a section of items: "New failures"
    tag: str = ""  # the model tables' filter key ("" for none)
    report_section: str = ""  # the report's list (ReportContext field) a finding of this category goes to
    hint: str = ""  # what it means, where a page explains it
    report_title: str = ""  # the report section's title where it is not `heading` ("Fixed models")
    report_note: str = ""  # what the report says after its section's title, in brackets ("no issue is filed")

    @property
    def css(self) -> str:
        """The CSS class of a cell showing it ("" for neutral: no colour)."""
        return "" if self.severity is Severity.NEUTRAL else self.severity.value

    @property
    def report_heading(self) -> str:
        """The heading of its section in the nightly report (templates/report.md.j2)."""
        return report_heading(self.report_title or self.heading, self.report_note)


def report_heading(title: str, note: str = "") -> str:
    """A section heading of the nightly report: its title, and its note in brackets."""
    return f"{title} ({note})" if note else title


# A model between two runs. The order is the Releases view's: status changes and regressions first.
NEW_FAILURE = Verdict("new_failure", Severity.WORSE, "new failure", "New failures", "newfail", "new_failures")
REGRESSION = Verdict("regression", Severity.WORSE, "regression", "Regressions", "regressed", "regressions")
FIXED = Verdict("fixed", Severity.BETTER, "fixed", "Fixed", "fixed", "fixed", report_title="Fixed models")
IMPROVEMENT = Verdict("improvement", Severity.BETTER, "improvement", "Improvements", "improved", "improvements")
WITHIN_NOISE = Verdict("within_noise", Severity.NEUTRAL, "within noise", "Within noise", "noise",
                       hint="the 95 % confidence intervals overlap")
STILL_FAILING = Verdict("still_failing", Severity.NEUTRAL, "still failing", "Still failing")
ADDED = Verdict("added", Severity.NEUTRAL, "added", "New models", "new")
REMOVED = Verdict("removed", Severity.NEUTRAL, "removed", "Missing")
UNCHANGED = Verdict("unchanged", Severity.NEUTRAL, "unchanged", "Unchanged")

MODEL_VERDICTS: tuple[Verdict, ...] = (NEW_FAILURE, REGRESSION, FIXED, IMPROVEMENT, WITHIN_NOISE, STILL_FAILING, ADDED,
                                       REMOVED, UNCHANGED)
# The verdicts the Releases view and Compare count and show as sections (the others are listed, not counted).
COUNTED: tuple[Verdict, ...] = (NEW_FAILURE, REGRESSION, FIXED, IMPROVEMENT, WITHIN_NOISE)

# The model verdicts as a string enum: the API's field type (its OpenAPI enum), values the names above.
# the ignores: a type checker reads a functional Enum's members from literals only, not from the table above
ModelVerdictName = StrEnum("ModelVerdictName", {v.name: v.name for v in MODEL_VERDICTS})  # type: ignore[misc]


class FindingKind(StrEnum):
    """What a finding is about (stored in ``findings.kind``): its category says how it changed."""

    STATUS = "status"  # a model's pass/fail against the previous run
    PERFORMANCE = "performance"  # a change point of one model's metric
    SUMMARY = "summary"  # the suite: passrate, the geomean's change point
    ENVIRONMENT = "environment"  # what surrounds the compiler (machine software, the torch release)
    MISSING = "missing"  # models missing against the previous run
    NOISE = "noise"  # one model's between-run spread over its newest runs (no change point, no commit range)


# What detection files besides (a finding's category is a model verdict or one of these).
ENVIRONMENT = Verdict("environment", Severity.NOTE, "environment change", "Environment changes",
                      report_section="environment")
MODELS_DROPPED = Verdict("models_dropped", Severity.WORSE, "models dropped", "Missing data",
                         report_section="models_dropped")

# A performance change point whose generated code, torch build and machine software are all unchanged (issue 28):
# the machine changed, not the compiler; no A/B, no issue, counted on the "same code, different time" gauge.
MACHINE_CHANGE = Verdict("machine_change", Severity.NOTE, "machine change", "Same code, different time",
                         report_section="machine_changes",
                         hint="the generated code, the torch build and the machine's software are unchanged",
                         report_note="machine changes: no issue is filed")

# A series' between-run spread that jumped or turned bimodal while its median held (issue 39 item 4;
# service.detection.spread): what the series can catch changed, not its level. Reported only: no A/B, no bisection, no
# issue (a spread has no commit range to search).
NOISE_CHANGE = Verdict("noise_change", Severity.NOTE, "noise change", "Noise changes", report_section="noise_changes",
                       hint="the median held; the spread between runs grew",
                       report_note="the median held, the spread between runs grew: no issue is filed")

FINDING_CATEGORIES: tuple[Verdict, ...] = (REGRESSION, NEW_FAILURE, IMPROVEMENT, FIXED, ENVIRONMENT, MODELS_DROPPED,
                                           MACHINE_CHANGE, NOISE_CHANGE)

# the ignore: as ModelVerdictName's, members from a table
FindingCategoryName = StrEnum("FindingCategoryName",  # type: ignore[misc]
                               {v.name: v.name for v in FINDING_CATEGORIES})

_BY_NAME: dict[str, Verdict] = {v.name: v for v in (*MODEL_VERDICTS, *FINDING_CATEGORIES)}


def severity_of_direction(direction: int) -> Severity:
    """A metric's move as perfdash.judgement.direction gives it (+1 better, -1 worse, 0 within its minimum effect)."""
    return Severity.BETTER if direction > 0 else Severity.WORSE if direction < 0 else Severity.NEUTRAL


class UnknownVerdict(KeyError):
    """A verdict or category word no entry declares: a new one is added here first."""


def verdict(name: str) -> Verdict:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise UnknownVerdict(f"unknown verdict or finding category {name!r}: declare it in perfdash/verdicts.py") \
            from None


def category(name: str) -> Verdict:
    """A finding category (a model verdict such as ``still_failing`` is not one)."""
    found = verdict(name)
    if found not in FINDING_CATEGORIES:
        raise UnknownVerdict(f"{name!r} is a model verdict, not a finding category")
    return found


def model_verdict_index() -> dict[str, int]:
    """verdict name -> its position in MODEL_VERDICTS (the Releases view's vectorised verdicts are these indices)."""
    return {v.name: i for i, v in enumerate(MODEL_VERDICTS)}


# ---------------------------------------------------------------------------------------------------------------------
# After a finding (service/alerts/): its A/B confirmation, and what a confirm request or a bisection concluded.


class ConfirmationState(StrEnum):
    """A finding's ``confirmation`` (``findings.confirmation``; the lifecycle is service.alerts.confirmation's)."""

    NONE = "none"  # needs none: status changes, improvements, suite, environment and missing-data findings
    PENDING = "pending"  # a candidate: awaiting its A/B re-measurement (suspected, no issue)
    CONFIRMED = "confirmed"  # reproduced: its issue is filed and a bisection requested
    NOT_REPRODUCED = "not_reproduced"  # closed with the A/B figures, quietly
    ERROR = "error"  # the re-measurement could not be made: still suspected, never filed

    @property
    def label(self) -> str:
        """What the pages say after the finding's summary ("" for none)."""
        return _CONFIRMATION_LABELS[self]

    @property
    def suspected(self) -> bool:
        """Still a suspect: the report lists it apart from the regressions, and no issue is filed."""
        return self in (ConfirmationState.PENDING, ConfirmationState.ERROR)

    @property
    def files_issue(self) -> bool:
        """A regression in this state may have its GitHub issue (a candidate only once its A/B reproduced it)."""
        return self in (ConfirmationState.NONE, ConfirmationState.CONFIRMED)


# The report's section of the regressions still suspected (ConfirmationState.suspected), listed apart from the
# confirmed ones (service.detection.report: ReportContext.suspected).
SUSPECTED_REPORT_HEADING = report_heading(
    "Suspected", "not yet confirmed: no issue is filed before an A/B re-measurement reproduces them")

_CONFIRMATION_LABELS = {
    ConfirmationState.NONE: "",
    ConfirmationState.PENDING: "suspected: awaiting A/B re-measurement",
    ConfirmationState.CONFIRMED: "confirmed by A/B re-measurement",
    ConfirmationState.NOT_REPRODUCED: "not reproduced by A/B re-measurement",
    ConfirmationState.ERROR: "A/B re-measurement failed",
}


class BisectionVerdictName(StrEnum):
    """What a bisection, or a confirm request (good and bad measured side by side), concluded: the verdict of the
    bisection contract (perfdash.bisection.BisectionVerdict is its wire type)."""

    CULPRIT_FOUND = "culprit_found"  # the first bad commit, verified against its parent
    CULPRIT_RANGE = "culprit_range"  # the commits before the culprit do not build: the range (its step verified)
    CONFIRMED = "confirmed"  # a confirm request's answer: the regression reproduced
    NOT_REPRODUCED = "not_reproduced"
    NOT_CONFIRMED = "not_confirmed"  # what the search pointed at did not reproduce against its parent: nobody named
    INCONCLUSIVE = "inconclusive"  # only skipped commits are left
    COMMIT_NOT_FOUND = "commit_not_found"  # the good or bad commit is in neither the job's clone nor its remote
    ERROR = "error"

    @property
    def meaning(self) -> str:
        """What it means to a reader, in one line (the bisection page; "" where the page says nothing)."""
        return _BISECTION_MEANINGS[self]

    @property
    def settles(self) -> ConfirmationState:
        """What it makes of the candidate it answers: reproduced (a bisection confirms first, so a culprit found
        or a search left inconclusive says so too), not reproduced, or nothing decided (error: every other verdict)."""
        return _BISECTION_SETTLES.get(self, ConfirmationState.ERROR)

    @property
    def measured_nothing(self) -> bool:
        """The job could not measure (`perfdash bisect` exits 1)."""
        return self in (BisectionVerdictName.ERROR, BisectionVerdictName.COMMIT_NOT_FOUND)

    @property
    def names_commits(self) -> bool:
        """It names the regression's commit or its range (someone is blamed)."""
        return self in (BisectionVerdictName.CULPRIT_FOUND, BisectionVerdictName.CULPRIT_RANGE)


_BISECTION_MEANINGS = {
    BisectionVerdictName.CULPRIT_FOUND: "first bad commit found and re-measured against its parent",
    BisectionVerdictName.CULPRIT_RANGE: "the regression is in a range: the commits before its last do not build; the "
                                        "step across it was re-measured",
    BisectionVerdictName.CONFIRMED: "the regression reproduced side by side",
    BisectionVerdictName.NOT_REPRODUCED: "the regression did not reproduce side by side",
    BisectionVerdictName.NOT_CONFIRMED: "the search pointed at a commit that did not reproduce against its parent: "
                                        "nobody is named",
    BisectionVerdictName.INCONCLUSIVE: "only skipped commits are left",
    BisectionVerdictName.COMMIT_NOT_FOUND: "",
    BisectionVerdictName.ERROR: "the bisection could not run",
}
_BISECTION_SETTLES = {
    BisectionVerdictName.CONFIRMED: ConfirmationState.CONFIRMED,
    BisectionVerdictName.CULPRIT_FOUND: ConfirmationState.CONFIRMED,
    BisectionVerdictName.INCONCLUSIVE: ConfirmationState.CONFIRMED,
    BisectionVerdictName.NOT_REPRODUCED: ConfirmationState.NOT_REPRODUCED,
}
