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
    logs = np.log(np.asarray(values, dtype=float))
    return float(stats.median_abs_deviation(logs, scale="normal"))


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
    if noisy_above * min_effect < sigma:
        p_value *= noisy_factor  # changepoint.py's noisy series: every threshold tightened
    df = before + after - 2
    t_crit = float(stats.t.ppf(1 - p_value / 2, df))
    z_power = float(stats.norm.ppf(power))
    log_step = (t_crit + z_power) * sigma * math.sqrt(1 / before + 1 / after)
    return max(math.expm1(log_step), min_effect)


def series_noise(values: Sequence[float], *, min_effect: float, p_value: float, before: int) -> SeriesNoise | None:
    """Noise figures of one series from its unchanged runs' values (positive), or None with too few runs."""
    positive = [v for v in values if v > 0]
    if len(positive) < MIN_RUNS:
        return None
    cv = robust_cv(positive)
    mde = minimum_detectable_effect(cv, min_effect=min_effect, p_value=p_value, before=before)
    return SeriesNoise(runs=len(positive), robust_cv=cv, minimum_detectable_effect=mde)

