"""The faster change-point search (issue 31) finds exactly what the plain numpy one did: the same change points, with
the same numbers to the last bit, on the bench's series (Gaussian noise of 2 % and 5 %, spikes, steps of 3 to 30 %,
several steps) and on the awkward ones (heavy tails, quantised values with ties, perfectly flat, short), searched
nightly as the post-ingest hook does and over a whole imported history at once."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.detection import STEP_SIZES, make_series
from service.detection import changepoint as fast
from service.detection.changepoint import DetectionConfig, detect_change_points
from tests.detection import changepoint_reference as reference


def _corpus(seed: int, per_kind: int, nights: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for noise in (0.02, 0.05):
        for steps in [(), *[(s,) for s in STEP_SIZES], (0.05, 0.10, 0.30)]:
            out += [make_series(rng, nights, noise, steps).values for _ in range(per_kind)]
    heavy = np.exp(0.02 * rng.standard_t(3, size=(per_kind, nights)))
    heavy[:, nights // 2 :] *= 1.06
    quantised = np.round(1.0 + 0.02 * rng.standard_normal((per_kind, nights)), 2)  # ties everywhere
    quantised[:, -3:] += 0.08
    flat = np.full((2, nights), 1.5)
    flat[1, -4:] = 1.8
    return out + list(heavy) + list(quantised) + list(flat)


def _same(values: np.ndarray, baseline: int, config: DetectionConfig) -> list[fast.ChangePoint]:
    new = detect_change_points(values, baseline_start=baseline, config=config)
    old = reference.detect_change_points(values, baseline_start=baseline, config=config)
    assert new == old, f"baseline {baseline}, values {values.tolist()}"
    return new


@pytest.mark.parametrize("metric", ["speedup", "compilation_latency"])
def test_nightly_search_finds_exactly_what_the_plain_search_found(metric: str) -> None:
    config = DetectionConfig.for_metric(metric)
    found = 0
    for values in _corpus(31, 2, 90):
        baseline = 0
        for night in range(10, len(values) + 1):
            history = values[:night]
            # what the incremental detector hands over: the last window since the last change found
            points = _same(history, max(baseline, night - config.window), config)
            if points:
                baseline, found = points[-1].index, found + len(points)
    assert found > 10  # the corpus has changes to find: the comparison is not only of empty answers


def test_whole_history_search_finds_exactly_what_the_plain_search_found() -> None:
    config = DetectionConfig()
    found = sum(len(_same(values, 0, config)) for values in _corpus(7, 3, 200))
    assert found > 30


def test_the_statistics_are_the_same_to_the_last_bit() -> None:
    rng = np.random.default_rng(3)
    floor = math.log1p(DetectionConfig().noise_floor)
    for n in (1, 2, 3, 4, 5, 17, 60, 61, 120):
        z = np.log(1.0 + 0.03 * rng.standard_normal(n) ** 3 + 0.5)
        assert np.array_equal(fast.energy_statistic(z), reference.energy_statistic(z))
        assert fast.series_noise(z, floor) == reference.series_noise(z, floor)
        if n:
            assert fast._median(z) == float(np.median(z)) and fast._mean(z) == float(z.mean())



def test_a_segment_ruled_out_has_no_split_that_is_more_than_no_change() -> None:
    """The pre-check that spares the E-divisive statistic (_any_split_possible) is a proof, not a heuristic: where it
    says no, every split of the segment is "no change" in the full test (not even a boundary)."""
    config = DetectionConfig()
    floor = math.log1p(config.noise_floor)
    z_cap = fast._least_z(config)
    ruled_out = 0
    for values in _corpus(11, 2, 120):
        logs = np.log(values)
        noise = fast.series_noise(logs, floor)
        for start, end in ((60, 120), (0, 60), (90, 120), (100, 113)):
            segment, raw = logs[start:end], values[start:end]
            if not fast._any_split_possible(segment, config, noise, z_cap):
                ruled_out += 1
                assert all(fast._test_split(segment, raw, tau, config, noise, z_cap) is None
                           for tau in range(1, len(segment) - 1)), (start, end, values.tolist())
    assert ruled_out > 50


@pytest.mark.parametrize("metric", ["speedup", "compilation_latency"])
def test_a_runs_searches_at_once_find_what_each_search_finds(metric: str) -> None:
    """detect_change_points_many (a run's series checked together, issue 31) answers each search as
    detect_change_points does, night by night as the hook hands them over: most nights' windows are ruled out by the
    batched check, the rest searched one by one; also the searches it leaves to the general path (a long history,
    a short one, a baseline near the end)."""
    config = DetectionConfig.for_metric(metric)
    corpus = _corpus(41, 2, 90)
    baselines = [0] * len(corpus)
    found = ruled_out = 0
    for night in range(10, 91):
        searches = [fast.Search(values[:night], max(baselines[i], night - config.window), config)
                    for i, values in enumerate(corpus)]
        many = fast.detect_change_points_many(searches)
        for i, (search, points) in enumerate(zip(searches, many, strict=True)):
            assert points == detect_change_points(search.values, baseline_start=search.baseline_start,
                                                  config=config), (night, i)
            if points:
                baselines[i], found = points[-1].index, found + len(points)
    assert found > 10
    others = [fast.Search(corpus[0], 0, config), fast.Search(corpus[1][:4], 0, config),
              fast.Search(corpus[2], 88, config), fast.Search(corpus[3], 60, DetectionConfig())]
    assert fast.detect_change_points_many(others) == [detect_change_points(s.values, baseline_start=s.baseline_start,
                                                                           config=s.config) for s in others]
    for values in corpus:  # the batched check is the single one, row by row
        logs = np.log(values)
        noise = fast.series_noise(logs[-120:], math.log1p(config.noise_floor))
        z_cap = fast._least_z(config)
        for segment in (logs[-60:], logs[-30:], logs[-7:]):
            batched = fast._splits_possible(segment[None, :], config, np.array([noise.robust]), np.array([noise.sd]),
                                            np.array([float(noise.df)]), z_cap)
            assert bool(batched[0]) == fast._any_split_possible(segment, config, noise, z_cap)
            ruled_out += not batched[0]
    assert ruled_out > 30
