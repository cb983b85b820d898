"""perfdash/noise.py: a series' between-run noise and its minimum detectable effect."""

import numpy as np
import pytest

from perfdash.noise import many_series_noise, minimum_detectable_effect, robust_cv, series_noise, spread_change

POLICY = {"min_effect": 0.05, "p_value": 1.5e-3, "before": 8}


def test_robust_cv_ignores_a_few_outlying_runs() -> None:
    rng = np.random.default_rng(0)
    values = list(1.5 * np.exp(rng.normal(0, 0.02, 40)))
    outliers = [*values, 1.25, 1.26]  # resnet18's outlying runs against a median of 1.53
    assert robust_cv(values) == pytest.approx(0.02, rel=0.3)
    assert robust_cv(outliers) < 1.3 * robust_cv(values)
    assert np.std(np.log(outliers)) > 2 * robust_cv(outliers)


def test_quiet_series_detects_the_minimum_effect_and_noisy_one_does_not() -> None:
    assert minimum_detectable_effect(0.005, **POLICY) == 0.05
    noisy = minimum_detectable_effect(0.04, **POLICY)
    assert noisy > 0.10
    assert minimum_detectable_effect(0.02, **POLICY) > 0.05


def test_series_noise_flags_a_series_that_cannot_catch_five_percent() -> None:
    rng = np.random.default_rng(1)
    quiet = series_noise(list(np.exp(rng.normal(0, 0.004, 20))), **POLICY)
    loud = series_noise(list(np.exp(rng.normal(0, 0.05, 20))), **POLICY)
    assert quiet is not None and quiet.catches(0.05)
    assert loud is not None and not loud.catches(0.05)
    assert loud.sigmas_beyond(0.20) < quiet.sigmas_beyond(0.20)
    assert series_noise([1.0, 1.1, 1.2], **POLICY) is None


def test_a_spread_jump_with_the_median_holding_is_a_spread_change() -> None:
    rng = np.random.default_rng(2)
    earlier = list(1.5 * np.exp(rng.normal(0, 0.03, 20)))
    jumped = list(1.5 * np.exp(rng.normal(0, 0.20, 12)))
    steady = list(1.5 * np.exp(rng.normal(0, 0.03, 12)))
    bimodal = [1.5 * 1.25 ** (1 if i % 2 else -1) for i in range(12)]
    moved = list(1.9 * np.exp(rng.normal(0, 0.20, 12)))
    change = spread_change(earlier, jumped)
    assert change is not None and change.cv_after > 3 * change.cv_before
    assert spread_change(earlier, bimodal) is not None
    assert spread_change(earlier, steady) is None
    assert spread_change(earlier, moved) is None


def test_many_series_at_once_are_each_series_alone() -> None:
    rng = np.random.default_rng(3)
    series = [list(1.5 * np.exp(rng.normal(0, sigma, n))) for sigma, n in
              ((0.004, 20), (0.05, 20), (0.02, 7), (0.03, 60), (0.01, 3), (0.2, 12))]
    series.append([1.2, 0.0, 1.3, 1.25, 1.22, 1.21])  # a zero is no run: five left
    many = many_series_noise(series, min_effect=0.05, p_value=1.5e-3)
    alone = [series_noise(values, min_effect=0.05, p_value=1.5e-3) for values in series]
    assert [m is None for m in many] == [a is None for a in alone] == [False] * 4 + [True, False, False]
    for m, a in zip(many, alone, strict=True):
        if a is not None:
            assert m is not None and m.runs == a.runs
            assert m.robust_cv == pytest.approx(a.robust_cv, rel=1e-12)
            assert m.minimum_detectable_effect == pytest.approx(a.minimum_detectable_effect, rel=1e-12)


def test_a_step_inside_the_newest_runs_is_no_spread_change() -> None:
    rng = np.random.default_rng(4)
    earlier = list(1.5 * np.exp(rng.normal(0, 0.02, 20)))
    stepped = [1.5 * f for f in (1.0, 1.01, 0.99, 1.0, 0.8, 0.81, 0.79, 0.8)]
    assert spread_change(earlier, stepped) is None
