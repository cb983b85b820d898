"""A series' between-run noise and the smallest change the alert policy can detect in it: pure maths, no torch, no web.

Issue 39 item 2. The inputs are one series' recent values from runs of unchanged code and torch (the caller picks
them, e.g. by issue 28's code digest); this module only turns them into figures.

- ``robust_cv``: the between-run noise as a relative spread, 1.4826 * MAD of the log values (the normal-consistent
  MAD, scipy's ``median_abs_deviation(scale="normal")``). Log space, as change-point detection works in it, so the
  figure is relative and a few outlying runs (resnet18's 1.25 against a median of 1.53) do not inflate it.
- ``minimum_detectable_effect``: derived from the rule that decides an alert (service/detection/changepoint.py,
  ``DetectionConfig``): a two-sided t-test on log values between a settled level of ``min_before`` points and a new
  level of four points, at ``p_value_max`` (times ``noisy_factor`` in a noisy series), and the change must not be
  significantly smaller than the metric's minimum effect. The MDE is the smallest relative step that passes the
  t-test with probability ``power`` (80 %) on its fourth night: ``(t_crit + z_power) * sigma * sqrt(1/nb + 1/na)``
  in log space, and never below the policy's minimum effect, since smaller steps are not alerts by design.
- ``catches``: whether a series can catch a change of a given size (the summary flags series that cannot catch 5 %).

Computed at read time, not stored at ingest: the figures depend on the detection policy and on which runs count as
unchanged, both of which change more often than the data, and a series' history is short (<= 60 points).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

# Fewer unchanged runs than this give no noise estimate: a MAD of three points is mostly luck.
MIN_RUNS = 5
# The new level's length at which the policy spends its false-alert budget (changepoint.py: "the fourth night").
NEW_LEVEL_POINTS = 4
CATCH_TARGET = 0.05  # the change a series must be able to catch, else the summary flags it


@dataclass(frozen=True, slots=True)
class SeriesNoise:
    """One series' between-run noise and minimum detectable effect, both relative (0.03 = 3 %)."""

    runs: int
    robust_cv: float
    minimum_detectable_effect: float

    def __post_init__(self) -> None:
        if self.runs < MIN_RUNS or not self.robust_cv >= 0 or not self.minimum_detectable_effect > 0:
            raise ValueError(f"impossible noise figures: {self}")

    def catches(self, change: float = CATCH_TARGET) -> bool:
        return self.minimum_detectable_effect <= change

    def sigmas_beyond(self, change: float) -> float:
        """How many noise scales a relative change is: what a finding says about itself."""
        return abs(math.log1p(change)) / max(self.robust_cv, 1e-12)


def robust_cv(values: Sequence[float]) -> float:
    return float(robust_cvs([values])[0])


def robust_cvs(rows: Sequence[Sequence[float]]) -> np.ndarray:
    """``robust_cv`` of each row, rows of one length: a page's hundreds of series in one call (scipy's per-call
    overhead, not the arithmetic, is most of the time of one)."""
    logs = np.log(np.asarray(rows, dtype=float))
    return np.asarray(stats.median_abs_deviation(logs, axis=1, scale="normal"), dtype=float)


def minimum_detectable_effect(
    sigma: float,
    *,
    min_effect: float,
    p_value: float,
    before: int,
    after: int = NEW_LEVEL_POINTS,
    noisy_above: float = 0.6,
    noisy_factor: float = 0.1,
    power: float = 0.8,
) -> float:
    """Smallest relative step found with probability ``power`` by a two-sided t-test at ``p_value``."""
    return float(minimum_detectable_effects([sigma], min_effect=min_effect, p_value=p_value, before=before,
                                            after=after, noisy_above=noisy_above, noisy_factor=noisy_factor,
                                            power=power)[0])


def minimum_detectable_effects(
    sigmas: Sequence[float] | np.ndarray,
    *,
    min_effect: float,
    p_value: float,
    before: int,
    after: int = NEW_LEVEL_POINTS,
    noisy_above: float = 0.6,
    noisy_factor: float = 0.1,
    power: float = 0.8,
) -> np.ndarray:
    """``minimum_detectable_effect`` of many noise figures with one settled level's length at once."""
    sigma = np.asarray(sigmas, dtype=float)
    # changepoint.py's noisy series: every threshold tightened
    p = np.where(noisy_above * min_effect < sigma, p_value * noisy_factor, p_value)
    df = before + after - 2
    t_crit = stats.t.ppf(1 - p / 2, df)
    z_power = float(stats.norm.ppf(power))
    log_step = (t_crit + z_power) * sigma * math.sqrt(1 / before + 1 / after)
    return np.maximum(np.expm1(log_step), min_effect)


def series_noise(
    values: Sequence[float], *, min_effect: float, p_value: float, before: int | None = None
) -> SeriesNoise | None:
    """Noise figures of one series from its unchanged runs' values (positive), or None with too few runs.

    ``before``: the settled level's length in the t-test; by default the unchanged runs themselves are that level.
    """
    positive = [v for v in values if v > 0]
    if len(positive) < MIN_RUNS:
        return None
    cv = robust_cv(positive)
    level = len(positive) if before is None else before
    mde = minimum_detectable_effect(cv, min_effect=min_effect, p_value=p_value, before=level)
    return SeriesNoise(runs=len(positive), robust_cv=cv, minimum_detectable_effect=mde)


def many_series_noise(
    series: Sequence[Sequence[float] | np.ndarray], *, min_effect: float, p_value: float
) -> list[SeriesNoise | None]:
    """``series_noise`` of each of many series (each its own settled level): a page's hundreds at once, one scipy
    call per window length instead of several per series."""
    positive = [[v for v in values if v > 0] for values in series]
    out: list[SeriesNoise | None] = [None] * len(positive)
    by_length: dict[int, list[int]] = {}
    for index, values in enumerate(positive):
        if len(values) >= MIN_RUNS:
            by_length.setdefault(len(values), []).append(index)
    for length, indices in by_length.items():
        cvs = robust_cvs([positive[i] for i in indices])
        mdes = minimum_detectable_effects(cvs, min_effect=min_effect, p_value=p_value, before=length)
        for index, cv, mde in zip(indices, cvs, mdes, strict=True):
            out[index] = SeriesNoise(runs=length, robust_cv=float(cv), minimum_detectable_effect=float(mde))
    return out



@dataclass(frozen=True, slots=True)
class SpreadChange:
    """The spread of a series' newest runs against its earlier runs, the median holding (issue 39 item 4)."""

    cv_before: float
    cv_after: float
    p_value: float


def spread_change(
    earlier: Sequence[float],
    newest: Sequence[float],
    *,
    ratio: float = 3.0,
    p_value_max: float = 1e-3,
    median_within: float = 0.05,
) -> SpreadChange | None:
    """A jump of the between-run spread (e.g. 3 % to 20 %) while the median holds, or None.

    Brown-Forsythe's test (scipy's ``levene(center="median")``, robust to the few outlying runs that every series
    has) on the log values decides; the robust CV must also grow ``ratio``-fold, and the medians stay within
    ``median_within`` or two standard errors of the new median (a moved median is a change point's finding, not
    this one's). A bimodal series (runs alternating between two levels) has a large MAD against a tight earlier one,
    so the same test catches it.
    """
    if len(earlier) < MIN_RUNS or len(newest) < MIN_RUNS:
        return None
    before, after = np.log(np.asarray(earlier, dtype=float)), np.log(np.asarray(newest, dtype=float))
    cv_before, cv_after = robust_cv(earlier), robust_cv(newest)
    # The median holds within the larger of median_within and two standard errors of the newest runs' median
    # (1.2533 sigma / sqrt(n) for a normal sample): a wide new spread moves its own median by chance.
    holds_within = max(math.log1p(median_within), 2 * 1.2533 * cv_after / math.sqrt(len(after)))
    if abs(float(np.median(after) - np.median(before))) > holds_within:
        return None
    # ... and wide in both halves of the newest runs: a step inside them (a change point's first nights) widens
    # their spread as a whole while each side of it stays tight; a bimodal series alternates, so both halves are wide.
    half = len(newest) // 2
    if min(robust_cv(newest[:half]), robust_cv(newest[half:])) < ratio / 2 * max(cv_before, 1e-3):
        return None
    if cv_after < ratio * max(cv_before, 1e-3):
        return None
    p_value = float(stats.levene(before, after, center="median").pvalue)
    if p_value > p_value_max:
        return None
    return SpreadChange(cv_before=cv_before, cv_after=cv_after, p_value=p_value)
