"""Spread changes: a series whose between-run spread jumped, or turned bimodal, while its median held (issue 39 item 4).
Pure maths over one series' comparable runs, no database; the rule that picks the runs and files the findings is
service.detection.detector.noise_changes (a NOISE_CHANGE finding of kind ``noise``).

The test is perfdash.noise.spread_change (Brown-Forsythe on the log values, the robust CV grown ``ratio``-fold, the
median holding, both halves of the newest runs wide) of the newest ``NEWEST_RUNS`` runs against the earlier ones. The
caller hands in only runs that are comparable: since the configuration's last environment change and the last
manifest or torch-release difference, of the newest run's generated code where the runs carry a fingerprint, from
the newest runs of the series' last noise finding on, and since its last stored change point whose level held
(``level_start``: a change point that the spread itself made is no level shift). Around that test, what a spread
change is not:

- a spread too small to matter: the newest runs must be noisy in the change-point policy's own terms
  (``DetectionConfig.noisy_above`` times the metric's minimum effect: 3 % for speedup), where the spread starts to
  change what the series can catch;
- a level moving inside the newest runs: a drift or a step spreads them out as a whole, but their values then follow
  their order (Spearman's rank correlation with the night at ``MAX_TREND`` or beyond); a spread does not;
- a new level starting on the newest nights, before the change-point rule can tell it from noise: when the newest one
  to ``PENDING_RUNS`` runs all lie on one side of the earlier median, beyond ``OUT_K`` earlier spreads, and without
  them the spread has not grown ``RATIO``-fold, the finding waits (those nights are the change-point rule's first).

bench/noise_change.py measures it on the bench's noise models (false findings per 1,000 series-nights, planted spread
jumps and bimodal series found, steps and environment shifts through the same replay); figures in bench/README.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from perfdash.noise import SpreadChange, robust_cv, spread_change
from service.detection.changepoint import DetectionConfig

NEWEST_RUNS = 8  # the newest runs whose spread is judged ...
MIN_EARLIER = 8  # ... against at least this many earlier comparable runs (fewer: no finding)
HISTORY = 40  # runs of the configuration read for it: at most HISTORY - NEWEST_RUNS earlier runs
RATIO = 3.0  # the robust CV must grow this many times (3 % -> 9 %)
P_VALUE_MAX = 1e-3  # Brown-Forsythe's p-value, spread_change's own (bench/noise_change.py: 1e-4 misses clear jumps)
MAX_TREND = 0.8  # |Spearman's rho| of the newest runs against their order from which they are a moving level
PENDING_RUNS = 3  # the newest runs that may be a new level still waiting for the change-point rule
_POLICY = DetectionConfig()  # the change-point policy's defaults (its thresholds do not depend on the metric)
OUT_K = _POLICY.outlier_k  # ... when beyond this many earlier spreads, as a spike is
LEVEL_SHARE = 0.5  # of the minimum effect: a change point whose level moved this much bounds the comparison


def spread_floor(min_effect: float) -> float:
    """The least robust CV of the newest runs for a spread change to matter (0.03 for a 5 % minimum effect)."""
    return _POLICY.noisy_above * min_effect


def _pending_level(earlier: Sequence[float], newest: Sequence[float]) -> bool:
    """Whether the newest one to PENDING_RUNS runs, all beyond OUT_K earlier spreads on one side of the earlier
    median, are what makes the spread: without them it has not grown RATIO-fold."""
    cv_before = max(robust_cv(earlier), _POLICY.noise_floor)
    moves = np.log(np.asarray(newest, dtype=float)) - float(np.median(np.log(earlier)))
    for j in range(1, PENDING_RUNS + 1):
        tail = moves[-j:]
        if not (np.all(tail > OUT_K * cv_before) or np.all(tail < -OUT_K * cv_before)):
            break  # a longer tail holds this one
        if robust_cv(newest[:-j]) < RATIO * cv_before:
            return True
    return False


def level_start(values: Sequence[float], change_points: Sequence[int], start: int, min_effect: float) -> int:
    """Where a series' comparable runs begin after its stored change points (indices into ``values``, the first run
    of each new level), from ``start`` on. A change point bounds them when its level held: the median of the runs
    since it is away from the median of the runs between the last bound and it by LEVEL_SHARE of the metric's minimum
    effect and by two standard errors of that median (1.2533 x the robust CV of the runs since it, or of the newest
    NEWEST_RUNS where fewer, / sqrt(n)). A change point the spread made (a jump throws two runs far enough, on its
    first nights, for the change-point rule to read a level; a bimodal series' runs of one mode) has the runs since it
    scattered around the old median and does not: the spread change is judged against the quiet runs before it."""
    logs = np.log(np.asarray(values, dtype=float))
    for p in sorted(change_points):
        if not start < p < len(logs):
            continue
        since = logs[min(p, len(logs) - NEWEST_RUNS):]
        scale = float(stats.median_abs_deviation(since, scale="normal"))
        within = max(math.log1p(LEVEL_SHARE * min_effect), 2 * 1.2533 * scale / math.sqrt(len(logs) - p))
        if abs(float(np.median(logs[p:]) - np.median(logs[start:p]))) > within:
            start = p
    return start


def newest_spread_change(values: Sequence[float], min_effect: float) -> SpreadChange | None:
    """The spread change of a series' newest NEWEST_RUNS runs against its earlier comparable runs, or None.

    ``values``: the series' comparable runs (positive), oldest first, tonight's last; the newest HISTORY are used.
    """
    values = [float(v) for v in values[-HISTORY:]]
    if len(values) < NEWEST_RUNS + MIN_EARLIER:
        return None
    earlier, newest = values[:-NEWEST_RUNS], values[-NEWEST_RUNS:]
    if robust_cv(newest) < spread_floor(min_effect):
        return None  # most series stop here: tonight's spread is small
    change = spread_change(earlier, newest, ratio=RATIO, p_value_max=P_VALUE_MAX)
    if change is None:
        return None
    rho = float(stats.spearmanr(np.arange(len(newest)), newest).statistic)
    if not math.isnan(rho) and abs(rho) >= MAX_TREND:
        return None
    if _pending_level(earlier, newest):
        return None
    return change
