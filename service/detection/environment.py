"""Environment shifts: many series of one configuration moving together on one night. Pure maths, no database.

A new driver, kernel, microcode, suite version or allocator setting moves most of a configuration's series at once,
by the same few per cent. Reported per series, that is hundreds of change points and hundreds of A/B confirmations
of a torch range that did not cause it. Measured per configuration it is one number: the median, over the series,
of tonight's move against each series' recent level. Under 2 % night-to-night noise that median over 150 series has
a standard error of about 0.2 % (1.25 * 2 % / sqrt(150)), so a common move of 3 % stands out by more than ten of
them, while a few real per-model regressions on the same night do not move it at all.

``common_shift`` decides; detection reports one "environment change" finding when the manifests of the two nights
differ (``manifest_differences`` names what changed) and resets the baselines of the configuration's series at that
night, so no per-model finding follows. bench/detection.py runs the same functions on its common-mode nights.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ShiftConfig:
    min_shift: float = 0.015  # relative: the median move must be at least this (a 3 % shift is twice it)
    min_share: float = 0.7  # ... and this share of the series must have moved in its direction
    min_series: int = 10  # fewer series than this say nothing about "most of the configuration"
    history: int = 10  # a series' recent level: the median of up to this many nights before tonight
    min_history: int = 3  # ... and at least this many

    def __post_init__(self) -> None:
        if not 0 < self.min_shift < 1 or not 0.5 < self.min_share <= 1:
            raise ValueError("min_shift must be in (0, 1) and min_share in (0.5, 1]")
        if self.min_series < 1 or not 1 <= self.min_history <= self.history:
            raise ValueError("min_series >= 1 and 1 <= min_history <= history")


@dataclass(frozen=True, slots=True)
class Shift:
    median_pct: float  # 100 * (exp(median log move) - 1)
    share: float  # share of the series that moved in the median's direction
    series: int  # series that had a recent level to compare with


def series_move(values: Sequence[float], config: ShiftConfig) -> float | None:
    """log(tonight / recent level) for one series (``values`` oldest first, tonight last, all > 0), or None when
    there is too little history before tonight."""
    before = values[-config.history - 1 : -1]
    if len(before) < config.min_history or values[-1] <= 0 or min(before) <= 0:
        return None
    return math.log(values[-1] / statistics.median(before))


def common_shift(moves: Sequence[float], config: ShiftConfig) -> Shift | None:
    """The configuration's common move tonight (``moves``: one log move per series), or None when it has none."""
    if len(moves) < config.min_series:
        return None
    median = statistics.median(moves)
    if abs(median) < math.log1p(config.min_shift):
        return None
    share = sum(1 for m in moves if m * median > 0) / len(moves)
    if share < config.min_share:
        return None
    return Shift(median_pct=100.0 * math.expm1(median), share=share, series=len(moves))


def manifest_differences(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """{field: (before, after)} for every field of two flat manifest summaries that differs (missing = None)."""
    return {k: (before.get(k), after.get(k)) for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)}
