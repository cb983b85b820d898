"""The change vocabulary, declared once: what a change between two runs *is*, how bad it is, and where it is shown.

Two kinds of word share one table:

- a model's **verdict** between two runs (Compare, Releases, the model tables' filter tags): judged by
  :func:`perfdash.judgement.judge`;
- a **finding category**: what detection (service.detection.detector) files when a run arrives, and where the
  nightly report and the GitHub publisher put it.

Each entry says its severity (the CSS class of the pages: ``worse``, ``better``, ``note``, ``neutral``), its label
(one item: "new failure"), its heading (a section of the pages and of the report: "New failures"), the report's
section (the list of ``service.detection.report.ReportContext`` it is filed in) and the model table's filter tag.
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

    @property
    def css(self) -> str:
        """The CSS class of a cell showing it ("" for neutral: no colour)."""
        return "" if self.severity is Severity.NEUTRAL else self.severity.value


# A model between two runs. The order is the Releases view's: status changes and regressions first.
NEW_FAILURE = Verdict("new_failure", Severity.WORSE, "new failure", "New failures", "newfail", "new_failures")
REGRESSION = Verdict("regression", Severity.WORSE, "regression", "Regressions", "regressed", "regressions")
FIXED = Verdict("fixed", Severity.BETTER, "fixed", "Fixed", "fixed", "fixed")
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


# What detection files besides (a finding's category is a model verdict or one of these).
ENVIRONMENT = Verdict("environment", Severity.NOTE, "environment change", "Environment changes",
                      report_section="environment")
MODELS_DROPPED = Verdict("models_dropped", Severity.WORSE, "models dropped", "Missing data",
                         report_section="models_dropped")

# A performance change point whose generated code, torch build and machine software are all unchanged (issue 28):
# the machine changed, not the compiler; no A/B, no issue, counted on the "same code, different time" gauge.
MACHINE_CHANGE = Verdict("machine_change", Severity.NOTE, "machine change", "Same code, different time",
                         report_section="machine_changes",
                         hint="the generated code, the torch build and the machine's software are unchanged")

FINDING_CATEGORIES: tuple[Verdict, ...] = (REGRESSION, NEW_FAILURE, IMPROVEMENT, FIXED, ENVIRONMENT, MODELS_DROPPED,
                                           MACHINE_CHANGE)

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
