"""How numbers look on the pages and which colour a cell gets. Pure functions: the templates call them as filters.

Colours follow PyTorch's HUD compilers dashboard: green/red when a metric is better/worse than its base by more
than 5 %, yellow when it is below the absolute target of perfdash.metrics (passrate 90 %, geomean 0.95x,
memory 0.9x). The thresholds themselves live in perfdash.metrics; this module only applies them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from urllib.parse import urlsplit

from perfdash.metrics import GEOMEAN_TARGET, MEMORY_TARGET, PASSRATE_TARGET, SuiteSummary

# A change smaller than this (relative to the base) is noise on the summary tables.
CHANGE_THRESHOLD = 0.05


class Metric(Enum):
    """The four executive-summary metrics: label, whether higher is better, the absolute target if any."""

    PASSRATE = ("Passrate", True, PASSRATE_TARGET)
    GEOMEAN = ("Geometric mean speedup", True, GEOMEAN_TARGET)
    COMPILE_TIME = ("Mean compilation time (s)", False, None)
    MEMORY = ("Peak memory footprint compression ratio", True, MEMORY_TARGET)

    def __init__(self, label: str, higher_is_better: bool, target: float | None) -> None:
        self.label = label
        self.higher_is_better = higher_is_better
        self.target = target

    def value(self, summary: SuiteSummary) -> float | None:
        if self.is_passrate:
            return summary.passrate if summary.total else None
        if self is Metric.GEOMEAN:
            return summary.geomean_speedup
        if self is Metric.COMPILE_TIME:
            return summary.mean_compile_time_s
        return summary.mean_compression_ratio

    def text(self, summary: SuiteSummary) -> str:
        if self.is_passrate:
            return summary.passrate_text
        if self is Metric.GEOMEAN:
            return summary.geomean_text
        if self is Metric.COMPILE_TIME:
            return summary.compile_time_text
        return summary.compression_text

    @property
    def is_passrate(self) -> bool:
        return self is Metric.PASSRATE


def relative_change(base: float | None, new: float | None) -> float | None:
    if base is None or new is None or base == 0:
        return None
    return new / base - 1.0


def change_class(base: float | None, new: float | None, higher_is_better: bool = True,
                 threshold: float = CHANGE_THRESHOLD) -> str:
    """``better`` / ``worse`` when the change exceeds the threshold, else ``""``."""
    change = relative_change(base, new)
    # The epsilon keeps an exact 5 % (1.05 / 1.0 - 1 = 0.05000000000000004 in floating point) uncoloured.
    if change is None or abs(change) <= threshold + 1e-9:
        return ""
    return "better" if (change > 0) == higher_is_better else "worse"


@dataclass(frozen=True, slots=True)
class SummaryCell:
    """One ``base → new`` cell of an executive-summary table."""

    new_text: str
    base_text: str | None  # None: no previous night
    css: str  # better | worse | below-target | ""
    title: str  # hover text: the change in percent and why the colour

    @classmethod
    def build(cls, metric: Metric, new: SuiteSummary, base: SuiteSummary | None) -> SummaryCell:
        new_value = metric.value(new)
        base_value = metric.value(base) if base is not None else None
        css = change_class(base_value, new_value, metric.higher_is_better)
        notes = []
        change = relative_change(base_value, new_value)
        if change is not None:
            notes.append(f"{change:+.1%} vs previous night")
        if metric.target is not None and new_value is not None and new_value < metric.target:
            notes.append(f"below target {metric.target:g}")
            if css != "worse":  # a regression is the more urgent news; the title still names the target
                css = "below-target"
        return cls(new_text=metric.text(new), base_text=metric.text(base) if base is not None else None, css=css,
                   title="; ".join(notes))


def times(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}x"


def number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def percent(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:+.{digits}%}"


def web_url(value: str | None) -> str | None:
    """A stored URL fit for an href: http(s) only, so a ``javascript:`` build link stays inert text."""
    if value and urlsplit(value.strip()).scheme.lower() in ("http", "https"):
        return value.strip()
    return None


def short_commit(commit: str | None) -> str:
    return (commit or "")[:10] or "-"
