"""perfdash.confidence: the paired bootstrap interval of median(eager) / median(compiled)."""

from __future__ import annotations

import numpy as np
import pytest

from perfdash.confidence import Interval, speedup_interval


def _samples(noise: float, n: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return 10 * (1 + noise * rng.uniform(-1, 1, n)), 5 * (1 + noise * rng.uniform(-1, 1, n))


def test_interval_holds_the_speedup_and_narrows_with_less_noise() -> None:
    eager, compiled = _samples(0.2)
    wide = speedup_interval(eager, compiled)
    point = float(np.median(eager) / np.median(compiled))
    assert wide is not None and wide.low < point < wide.high
    narrow = speedup_interval(*_samples(0.01))
    assert narrow is not None and narrow.low < 2.0 < narrow.high
    assert (narrow.high - narrow.low) < (wide.high - wide.low) / 5


def test_same_samples_same_interval() -> None:
    eager, compiled = _samples(0.2)
    assert speedup_interval(eager, compiled) == speedup_interval(list(eager), list(compiled))


def test_pairs_are_resampled_together() -> None:
    # Drift moves both timings of a pair (frequency, load): each pair's ratio is exactly 2, the timings spread 3x.
    drift = np.random.default_rng(1).uniform(1.0, 3.0, 40)
    interval = speedup_interval(10 * drift, 5 * drift)
    assert interval is not None and interval.high - interval.low < 0.25
    # Pairing broken (compiled timings shuffled): the same marginals give a much wider interval.
    shuffled = speedup_interval(10 * drift, 5 * np.random.default_rng(2).permutation(drift))
    assert shuffled is not None and shuffled.high - shuffled.low > 2 * (interval.high - interval.low)


@pytest.mark.parametrize(("eager", "compiled"), [([1.0] * 4, [0.5] * 4), ([1.0] * 10, [0.5] * 9), ([], [])])
def test_no_interval_from_too_few_or_unpaired_samples(eager, compiled) -> None:
    assert speedup_interval(eager, compiled) is None


def test_constant_samples_give_a_point() -> None:
    assert speedup_interval([2.0] * 10, [1.0] * 10) == Interval(2.0, 2.0)

