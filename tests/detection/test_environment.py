"""The environment-shift rule (service.detection.environment) on simulated nights: pure, no database."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.detection.environment import ShiftConfig, common_shift, manifest_differences, series_move

CONFIG = ShiftConfig()


def _moves(rng: np.random.Generator, series: int, shift: float, regressed: int = 0) -> list[float]:
    """Tonight's move of each series after ten quiet nights under 2 % noise; ``regressed`` series slowed by 10 %."""
    moves = []
    for s in range(series):
        history = np.exp(rng.normal(0.0, 0.02, 11))
        history[-1] *= (1.0 + shift) * (0.9 if s < regressed else 1.0)
        move = series_move(list(history), CONFIG)
        assert move is not None
        moves.append(move)
    return moves


@pytest.mark.parametrize("shift", [0.03, -0.03, 0.10])
def test_a_common_move_of_three_percent_or_more_is_a_shift(shift: float) -> None:
    found = common_shift(_moves(np.random.default_rng(1), 150, shift), CONFIG)
    assert found is not None and math.copysign(1, found.median_pct) == math.copysign(1, shift)
    assert abs(found.median_pct - 100 * shift) < 1.0 and found.share > 0.8 and found.series == 150


def test_noise_and_a_few_real_regressions_are_no_shift() -> None:
    rng = np.random.default_rng(2)
    assert all(common_shift(_moves(rng, 150, 0.0, regressed=20), CONFIG) is None for _ in range(50))


def test_too_few_series_or_history_say_nothing() -> None:
    assert common_shift(_moves(np.random.default_rng(3), 9, 0.10), CONFIG) is None
    assert series_move([1.0, 1.0, 0.5], CONFIG) is None  # two nights before tonight: no recent level yet


def test_manifest_differences_name_what_changed() -> None:
    before = {"kernel": "6.1", "suite timm": "1.0.31", "LD_PRELOAD": "libjemalloc.so"}
    after = {"kernel": "6.8", "suite timm": "1.0.31", "microcode": "0x2b"}
    assert manifest_differences(before, after) == {"LD_PRELOAD": ("libjemalloc.so", None), "kernel": ("6.1", "6.8"),
                                                   "microcode": (None, "0x2b")}
    assert manifest_differences(before, dict(before)) == {}
