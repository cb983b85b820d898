"""perfdash.confidence: the paired bootstrap interval of median(eager) / median(compiled)."""

from __future__ import annotations

import numpy as np
import pytest

from perfdash.confidence import Interval, latency_interval, speedup_interval


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



def _processes(shifts: list[float], n: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Pairs of ``len(shifts)`` worker processes: each process's state slows its eager steps by its shift (as memory
    layout or thread placement would), within it 1 % noise."""
    rng = np.random.default_rng(seed)
    eager = np.concatenate([10 * s * (1 + 0.01 * rng.standard_normal(n)) for s in shifts])
    compiled = 5 * (1 + 0.01 * rng.standard_normal(n * len(shifts)))
    return eager, compiled, [k for k in range(len(shifts)) for _ in range(n)]


def test_a_spread_between_processes_widens_the_interval() -> None:
    eager, compiled, process = _processes([1.0, 1.08, 0.94])
    paired = speedup_interval(eager, compiled)
    clustered = speedup_interval(eager, compiled, process=process)
    point = float(np.median(eager) / np.median(compiled))
    assert paired is not None and clustered is not None and clustered.low <= point <= clustered.high
    assert clustered.high - clustered.low > 1.5 * (paired.high - paired.low)
    assert clustered == speedup_interval(list(eager), list(compiled), process=tuple(process))  # a function of them


def test_processes_that_agree_keep_the_interval_narrow_and_one_process_is_the_paired_interval() -> None:
    eager, compiled, process = _processes([1.0, 1.0, 1.0])
    paired = speedup_interval(eager, compiled)
    clustered = speedup_interval(eager, compiled, process=process)
    assert paired is not None and clustered is not None
    assert clustered.high - clustered.low < 2 * (paired.high - paired.low)
    assert speedup_interval(eager, compiled, process=[0] * len(eager)) == paired


def test_the_next_run_falls_in_the_interval_more_often_when_processes_are_resampled() -> None:
    # Each run: 3 processes, each with its own state (a 5 % log-normal shift); the next run draws new states.
    rng = np.random.default_rng(7)
    runs = [_processes(list(np.exp(0.05 * rng.standard_normal(3))), seed=s) for s in range(40)]
    values = [float(np.median(e) / np.median(c)) for e, c, _ in runs]
    held = {"paired": 0, "clustered": 0}
    for (eager, compiled, process), following in zip(runs[:-1], values[1:], strict=True):
        for name, interval in (("paired", speedup_interval(eager, compiled, resamples=400)),
                               ("clustered", speedup_interval(eager, compiled, process=process, resamples=400))):
            assert interval is not None
            held[name] += interval.low <= following <= interval.high
    assert held["clustered"] >= held["paired"] + 5  # 30 of 39 against 20 with these seeds


def test_latency_interval_resamples_processes_too() -> None:
    _, compiled, process = _processes([1.0, 1.0, 1.0])
    shifted = compiled * np.repeat([1.0, 1.1, 0.9], 10)
    alone, clustered = latency_interval(shifted), latency_interval(shifted, process=process)
    assert alone is not None and clustered is not None
    assert clustered.low <= float(np.median(shifted)) <= clustered.high
    assert clustered.high - clustered.low > 2 * (alone.high - alone.low)
    assert latency_interval(compiled[:4]) is None
