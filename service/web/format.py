"""How numbers look on the pages and which colour a cell gets. Pure functions: the templates call them as filters.

Colours follow PyTorch's HUD compilers dashboard: green/red when a metric is better/worse than its base by more
than its minimum effect (5 %; perfdash.judgement.direction, the rule every comparison uses), yellow when it is below
its absolute target (passrate 90 %, geomean 0.95x, memory 0.9x). Directions, minimum effects and targets live in
perfdash.metric_registry; this module only applies them.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from perfdash.judgement import direction
from perfdash.metric_registry import Better, SummaryMetric, relative_change
from perfdash.metrics import SuiteSummary
from perfdash.verdicts import Severity, severity_of_direction
from service.queries.noise import NoiseBasis, NoiseOut


def change_class(base: float | None, new: float | None, better: Better, threshold: float) -> str:
    """``better`` / ``worse`` when the change exceeds the threshold (perfdash.judgement.direction), else ``""``."""
    change = relative_change(base, new)
    if change is None:
        return ""
    severity = severity_of_direction(int(direction(change, better, threshold)))
    return "" if severity is Severity.NEUTRAL else severity.value


@dataclass(frozen=True, slots=True)
class SummaryCell:
    """One ``base → new`` cell of an executive-summary table."""

    new_text: str
    base_text: str | None  # None: no previous night
    css: str  # better | worse | below-target | ""
    title: str  # hover text: the change in percent and why the colour

    @classmethod
    def build(cls, metric: SummaryMetric, new: SuiteSummary, base: SuiteSummary | None) -> SummaryCell:
        new_value = new.value_of(metric)
        base_value = base.value_of(metric) if base is not None else None
        css = change_class(base_value, new_value, metric.better, metric.min_effect)
        notes = []
        change = relative_change(base_value, new_value)
        if change is not None:
            notes.append(f"{change:+.1%} vs previous night")
        if metric.target is not None and new_value is not None and new_value < metric.target:
            notes.append(f"below target {metric.target:g}")
            if css != Severity.WORSE:  # a regression is the more urgent news; the title still names the target
                css = "below-target"
        return cls(new_text=new.text_of(metric), base_text=base.text_of(metric) if base is not None else None, css=css,
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


# A series' noise (service.queries.noise.NoiseOut) and a finding against it: the model, suite and summary pages.
def noise_cv(noise: NoiseOut) -> str:
    """The between-run noise, ``1.2 %``, or why there is none."""
    if noise.robust_cv is None:
        return f"not enough runs ({noise.runs} of {noise.min_runs})"
    return f"{100 * noise.robust_cv:.1f} %"


def detectable(noise: NoiseOut) -> str:
    """The minimum detectable effect, ``≥ 5.0 %``; ``-`` without an estimate."""
    return "-" if noise.minimum_detectable_effect is None else f"≥ {100 * noise.minimum_detectable_effect:.1f} %"


def noise_basis(noise: NoiseOut) -> str:
    """Which runs the estimate comes from."""
    if noise.basis is NoiseBasis.UNCHANGED_CODE:
        return f"{noise.runs} runs of unchanged generated code"
    return f"the latest {noise.runs} runs (no generated-code fingerprint)"


def catch_text(noise: NoiseOut) -> str:
    """``cannot catch 5 %`` for a series too noisy for its target, else ``""``."""
    return f"cannot catch {100 * noise.catch_target:g} %" if noise.catches_target is False else ""


def sigmas_text(sigmas: float | None) -> str:
    """What a finding says about itself against its series' noise."""
    return "" if sigmas is None else f"{sigmas:.1f}σ beyond this series' noise"
