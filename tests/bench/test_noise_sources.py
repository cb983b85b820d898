"""bench/noise_sources.py tells a run-level shift from process-level scatter, on A/A runs with planted noise."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.ab_noise import SAMPLES_FILE
from bench.noise_sources import read_pairs, sources


def _write_runs(raw: Path, *, runs: int, k: int, run_sd: float, process_sd: float, seed: int = 7,
                drift: float = 0.0, shifted: dict[int, float] | None = None) -> None:
    """A/A runs of one model: true speedup 2.0, each run shifted by N(0, run_sd) in log (plus ``drift`` per run in
    run order, plus ``shifted[run]`` for a few runs), each of its k processes by N(0, process_sd) more, 10 pairs a
    process with 0.5 % pair noise."""
    rng = np.random.default_rng(seed)
    for index in range(runs):
        run_shift = rng.normal(0, run_sd) + drift * index + (shifted or {}).get(index, 0.0)
        eager, compiled, process = [], [], []
        for p in range(k):
            level = 2.0 * np.exp(run_shift + rng.normal(0, process_sd))
            for _ in range(10):
                c = 5.0 * np.exp(rng.normal(0, 0.005))
                compiled.append(c)
                eager.append(c * level * np.exp(rng.normal(0, 0.005)))
                process.append(p)
        out = raw / f"run_{index:03d}"
        out.mkdir(parents=True)
        row = {"name": "m", "eager_ms": eager, "compiled_ms": compiled, "process": process}
        (out / SAMPLES_FILE).write_text(json.dumps(row) + "\n")


def test_process_scatter_alone_leaves_no_run_level_part(tmp_path: Path) -> None:
    _write_runs(tmp_path, runs=40, k=3, run_sd=0.0, process_sd=0.05)
    s = sources("m", read_pairs(tmp_path)["m"])
    assert s.processes == 3 and s.runs == 40
    assert s.between_process_cv_pct == pytest.approx(5.0, rel=0.2)
    assert s.process_only_prediction_pct == pytest.approx(5.0 / np.sqrt(3), rel=0.2)
    assert s.run_level_cv_pct < 1.5


def test_a_shift_shared_by_a_runs_processes_is_the_run_level_part(tmp_path: Path) -> None:
    _write_runs(tmp_path, runs=40, k=3, run_sd=0.04, process_sd=0.01)
    s = sources("m", read_pairs(tmp_path)["m"])
    assert s.run_level_cv_pct == pytest.approx(4.0, rel=0.3)
    assert s.between_process_cv_pct < 1.5
    # every estimator sees the shared shift: none removes it
    assert min(s.estimator_cv_pct.values()) > 3.0


def test_a_drift_is_taken_out_by_the_line_and_an_outlying_run_is_named(tmp_path: Path) -> None:
    _write_runs(tmp_path / "drift", runs=24, k=3, run_sd=0.0, process_sd=0.01, drift=0.01)
    drift = sources("m", read_pairs(tmp_path / "drift")["m"])
    assert drift.between_run_cv_pct > 5.0  # 24 runs, 1 % a run: about 7 % SD
    assert drift.detrended_cv_pct < 1.0
    _write_runs(tmp_path / "outlier", runs=24, k=3, run_sd=0.0, process_sd=0.01, shifted={9: -0.15})
    outlier = sources("m", read_pairs(tmp_path / "outlier")["m"])
    assert outlier.outlying_runs == (9,)
    assert outlier.between_run_cv_pct > 2.5
    assert outlier.cv_without_outlying_pct < 1.0
