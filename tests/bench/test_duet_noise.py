"""bench/duet_noise.py: a move the two sides of a duet share cancels in their ratio; one of each side's own does
not; the halves' difference is its own figure."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench import ab_noise, duet_noise
from perfdash.contract import ModelSamples


def test_the_halves_are_mirrored_and_a_single_cpu_is_refused() -> None:
    assert duet_noise.halves([3, 0, 2, 1]) == ((0, 1), (2, 3))
    assert duet_noise.halves([0, 1, 2]) == ((0,), (1,))
    with pytest.raises(ValueError, match="two CPUs"):
        duet_noise.halves([0])


def _cycles(n: int, shared_sd: float, own_sd: float, halves: float, seed: int = 1
            ) -> tuple[list[float], list[float], list[float], list[bool]]:
    """Planted cycles: each cycle's run-level move (shared by the duet's two sides, the solo run its own), each
    run's own noise, and the first half ``halves`` times faster in value than the second."""
    rng = np.random.default_rng(seed)
    on_first = [i % 2 == 0 for i in range(n)]
    shared = np.exp(shared_sd * rng.standard_normal(n))
    a = 2.0 * shared * np.exp(own_sd * rng.standard_normal(n)) * np.where(on_first, halves, 1.0)
    b = 2.0 * shared * np.exp(own_sd * rng.standard_normal(n)) * np.where(on_first, 1.0, halves)
    solo = 2.0 * np.exp(shared_sd * rng.standard_normal(n)) * np.exp(own_sd * rng.standard_normal(n))
    return list(a), list(b), list(solo), on_first


def test_a_shared_move_cancels_in_the_duet_and_the_halves_are_taken_out() -> None:
    a, b, solo, on_first = _cycles(200, shared_sd=0.05, own_sd=0.005, halves=1.03)
    row = duet_noise.duet_row("m", "speedup", a, b, solo, on_first)
    # sequential: consecutive solo runs differ by both moves; per measurement about sqrt(0.05² + 0.005²)
    assert row.sequential_sd_pct == pytest.approx(5.0, rel=0.15)
    # duet: only each side's own noise is left, with the 3 % halves' difference taken out (not counted as noise)
    assert row.duet_sd_pct == pytest.approx(0.5, rel=0.2)
    assert row.halves_difference_pct == pytest.approx(3.0, abs=0.3)


def test_a_move_of_each_sides_own_does_not_cancel() -> None:
    a, b, solo, on_first = _cycles(200, shared_sd=0.0, own_sd=0.04, halves=1.0)
    row = duet_noise.duet_row("m", "speedup", a, b, solo, on_first)
    assert row.duet_sd_pct == pytest.approx(row.sequential_sd_pct, rel=0.25)
    assert row.duet_sd_pct == pytest.approx(4.0, rel=0.2)


def _write_run(run: Path, eager: float, compiled: float) -> None:
    run.mkdir(parents=True)
    samples = ModelSamples(name="m", batch_size=4, eager_ms=(eager,) * 5, compiled_ms=(compiled,) * 5)
    (run / ab_noise.SAMPLES_FILE).write_text(samples.to_json() + "\n")


def test_analyse_reads_the_three_sides_by_cycle_and_skips_a_cycle_where_one_failed(tmp_path: Path) -> None:
    # side A's speedup is 2 % above side B's in every cycle on the first half, 2 % below on the second: the halves
    # differ, the builds do not
    cores = []
    for i in range(5):
        a_first = i % 2 == 0
        cores.append([0] if a_first else [1])
        _write_run(tmp_path / "duet_a" / f"run_{i:03d}", 10.2 if a_first else 10.0, 5.0)
        _write_run(tmp_path / "duet_b" / f"run_{i:03d}", 10.0 if a_first else 10.2, 5.0)
        if i != 3:  # the solo run of cycle 3 lost the model
            _write_run(tmp_path / "solo" / f"run_{i:03d}", 10.0 + 0.1 * i, 5.0)
    (tmp_path / duet_noise.CORES_FILE).write_text(json.dumps(cores))
    noise = duet_noise.analyse(tmp_path, "test")
    speedup = next(r for r in noise.rows if r.metric == "speedup")
    assert speedup.cycles == 4
    assert speedup.halves_difference_pct == pytest.approx(2.0, abs=1e-9)
    assert speedup.duet_sd_pct == pytest.approx(0.0, abs=1e-9)
    # the solo runs of cycles 0, 1, 2 and 4: speedups 2.00, 2.02, 2.04, 2.08
    steps = np.log([2.02 / 2.00, 2.04 / 2.02, 2.08 / 2.04])
    assert speedup.sequential_sd_pct == pytest.approx(np.std(steps, ddof=1) / np.sqrt(2) * 100)
    assert {r.metric for r in noise.rows} == {"speedup", "abs_latency"}


def test_the_simulations_draw_a_duet_files_duet_or_sequential_part_and_still_read_ab_noise_files(
        tmp_path: Path) -> None:
    from bench.bisect_accuracy import noise_model

    a, b, solo, on_first = _cycles(40, shared_sd=0.05, own_sd=0.005, halves=1.03)
    rows = (duet_noise.duet_row("m", "abs_latency", a, b, solo, on_first),
            duet_noise.duet_row("m", "speedup", solo, solo, solo, on_first))
    path = tmp_path / "duet.json"
    path.write_text(duet_noise.DuetNoise(machine="x", configuration="y", command="z", rows=rows).model_dump_json())
    duet = noise_model("measured", path, "abs_latency", "duet").residuals
    sequential = noise_model("measured", path, "abs_latency", "sequential").residuals
    assert len(duet) == 40 and len(sequential) == 39
    # the duet's draws hold each side's own noise only (0.5 %), the sequential ones the shared move too (5 %)
    assert float(np.std(duet)) < 0.01 < 0.03 < float(np.std(sequential))
    assert abs(float(np.median(duet))) < 1e-12  # the halves' 3 % is not a deviation
    ab_file = tmp_path / "ab.json"
    ab_file.write_text(ab_noise.AbNoise(machine="x", configuration="y", command="z", rows=(
        ab_noise.noise_row("m", "abs_latency", [1.0, 1.1, 1.0, 1.05], [(0.9, 1.2)] * 4),)).model_dump_json())
    assert len(noise_model("measured", ab_file, "abs_latency").residuals) == 3
