from __future__ import annotations

import math

import pytest

from perfdash.metrics import GatedResult, summarize


def test_summary_on_hand_made_rows():
    outcomes = [
        GatedResult("a", 2.0, 10.0, 1.5),
        GatedResult("b", 0.5, 30.0, 0.9),  # slower than eager: clipped to 1.0 in the geomean
        GatedResult("c", 0.0, 99.0, 2.0),  # failed: excluded from every mean
        GatedResult("d", 1.25, 20.0, 1.2),
    ]
    s = summarize(outcomes)
    assert (s.passed, s.total) == (3, 4)
    assert s.passrate_text == "75%, 3/4"
    assert s.geomean_speedup == pytest.approx((2.0 * 1.0 * 1.25) ** (1 / 3))
    assert s.geomean_speedup_unclipped == pytest.approx((2.0 * 0.5 * 1.25) ** (1 / 3))
    assert s.mean_compile_time_s == pytest.approx(20.0)
    assert s.mean_compression_ratio == pytest.approx((1.5 + 0.9 + 1.2) / 3)
    assert s.geomean_text == f"{(2.5) ** (1 / 3):.2f}x"
    assert s.compile_time_text == "20.00"


def test_summary_of_nothing_passing():
    s = summarize([GatedResult("a", 0.0, None, None)])
    assert s.passrate_text == "0%, 0/1"
    assert s.geomean_speedup is None and s.geomean_text == "-"
    assert not math.isnan(s.passrate)
