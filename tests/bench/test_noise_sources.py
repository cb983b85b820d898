"""bench/noise_sources.py tells a run-level shift from process-level scatter, on A/A runs with planted noise."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.ab_noise import CALIBRATION_FILES, SAMPLES_FILE
from bench.noise_sources import contention_reading, machine_beside, read_pairs, sources, who_competed


def _write_runs(raw: Path, *, runs: int, k: int, run_sd: float, process_sd: float, seed: int = 7,
                drift: float = 0.0, shifted: dict[int, float] | None = None,
                stolen: dict[tuple[int, int], tuple[float, float]] | None = None) -> None:
    """A/A runs of one model: true speedup 2.0, each run shifted by N(0, run_sd) in log (plus ``drift`` per run in
    run order, plus ``shifted[run]`` for a few runs), each of its k processes by N(0, process_sd) more, 10 pairs a
    process with 0.5 % pair noise. ``stolen``: with it, every worker's loop has a contention reading, quiet except
    {(run, worker): (log shift of that worker's speedup, steal share)}."""
    rng = np.random.default_rng(seed)
    for index in range(runs):
        run_shift = rng.normal(0, run_sd) + drift * index + (shifted or {}).get(index, 0.0)
        eager, compiled, process, contention = [], [], [], []
        for p in range(k):
            shift, steal = (stolen or {}).get((index, p), (0.0, 0.0))
            level = 2.0 * np.exp(run_shift + rng.normal(0, process_sd) + shift)
            for _ in range(10):
                c = 5.0 * np.exp(rng.normal(0, 0.005))
                compiled.append(c)
                eager.append(c * level * np.exp(rng.normal(0, 0.005)))
                process.append(p)
            contention.append({"process": p, "wall_s": 1.0, "steal_share": steal or float(rng.uniform(0, 0.002)),
                               "pressure_share": float(rng.uniform(0, 0.01)), "involuntary_switches": 3})
        out = raw / f"run_{index:03d}"
        out.mkdir(parents=True)
        row = {"name": "m", "eager_ms": eager, "compiled_ms": compiled, "process": process}
        if stolen is not None:
            row["contention"] = contention
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


def test_runs_without_contention_readings_give_none(tmp_path: Path) -> None:
    _write_runs(tmp_path, runs=6, k=3, run_sd=0.0, process_sd=0.01)
    assert contention_reading("m", read_pairs(tmp_path)["m"], ()) is None


def test_workers_whose_loop_lost_the_cpu_are_found_and_leaving_them_out_restores_the_cv(tmp_path: Path) -> None:
    """Two workers of run 5 and both later workers of run 6 lost 3 % of the machine to the hypervisor and read 10 %
    slow, as resnet18's compiled loop read in runs 5 and 6 of the 2026-11-29 A/A block: the reading names them, ranks
    steal with the distance from the median, and the CV without them is the quiet runs'."""
    stolen = {(5, 0): (-0.10, 0.03), (5, 1): (-0.10, 0.03), (6, 1): (-0.10, 0.03), (6, 2): (-0.10, 0.03)}
    _write_runs(tmp_path, runs=12, k=3, run_sd=0.0, process_sd=0.005, stolen=stolen)
    runs = read_pairs(tmp_path)["m"]
    s = sources("m", runs)
    assert s.outlying_runs == (5, 6)
    reading = contention_reading("m", runs, s.outlying_runs)
    assert reading is not None and reading.workers == 36
    assert reading.contended_workers == 4
    assert reading.steal_max == pytest.approx(0.03)
    assert reading.outlying_runs_worst[5][0] == pytest.approx(0.03)
    # the contended workers lie 10 % off the median, the others within their 0.5 % scatter
    assert reading.contended_distance_pct == pytest.approx(10.0, abs=1.5)
    assert reading.quiet_distance_pct < 1.0
    assert reading.steal_rho > 0.15  # 4 of 36 workers: the rank correlation says which way, not how sure
    assert s.between_run_cv_pct > 2.0
    assert reading.cv_without_contended_pct < 1.0


def test_steal_that_does_not_move_the_speedup_is_not_ranked_with_it(tmp_path: Path) -> None:
    """The same steal planted on workers whose speedup it left alone: no rank correlation, and leaving them out
    changes nothing (the reading cannot make a quiet series look quieter)."""
    stolen = {(r, 0): (0.0, 0.03) for r in range(0, 12, 2)}
    _write_runs(tmp_path, runs=12, k=3, run_sd=0.0, process_sd=0.005, stolen=stolen)
    runs = read_pairs(tmp_path)["m"]
    s = sources("m", runs)
    reading = contention_reading("m", runs, s.outlying_runs)
    assert reading is not None and reading.contended_workers == 6
    assert abs(reading.steal_rho) < 0.4
    assert reading.contended_distance_pct < 1.0
    assert reading.cv_without_contended_pct == pytest.approx(s.between_run_cv_pct, abs=0.5)


def test_who_competed_splits_the_loops_at_the_pressure_limit_and_sums_the_busiest_by_name(tmp_path: Path) -> None:
    def loop(process: int, pressure: float, others: float, threads: int, busiest: list[str]) -> dict:
        return {"process": process, "wall_s": 2.0, "steal_share": 0.0, "pressure_share": pressure,
                "involuntary_switches": 5, "others_cpu_share": others, "busiest_others": busiest,
                "own_busy_threads": threads}

    runs = [
        [loop(0, 0.30, 0.20, 2, ["cc1plus (901) 0.60 s", "python3 (12) 0.10 s"]), loop(1, 0.02, 0.01, 2, [])],
        [loop(0, 0.25, 0.18, 3, ["cc1plus (950) 0.50 s"]), loop(1, 0.01, 0.02, 2, ["kdamond.0 (77) 0.02 s"])],
        # a file from before the readings of who: left out of both groups
        [{"process": 0, "wall_s": 2.0, "steal_share": 0.0, "pressure_share": 0.4, "involuntary_switches": 1}],
    ]
    for index, contention in enumerate(runs):
        out = tmp_path / f"run_{index:03d}"
        out.mkdir()
        row = {"name": "m", "eager_ms": [2.0, 2.0], "compiled_ms": [1.0, 1.0], "process": [0, 1][:len(contention)],
               "contention": contention}
        (out / SAMPLES_FILE).write_text(json.dumps(row) + "\n")
    groups = who_competed(tmp_path, pressure_limit=0.15)
    contended, quiet = groups["contended"], groups["quiet"]
    assert (contended.loops, quiet.loops) == (2, 2)
    assert contended.others_share_median == pytest.approx(0.19)
    assert contended.own_busy_threads_median == 2.5
    # the compiler named in both contended loops, under two pids, comes first with its seconds summed
    assert contended.busiest[0] == ("cc1plus", pytest.approx(1.1), 2)
    assert quiet.busiest == [("kdamond.0", pytest.approx(0.02), 1)]
    assert who_competed(tmp_path / "nothing") == {}


def _calibrate(raw: Path, figures: dict[int, float]) -> None:
    """Calibration files around each run, as bench.ab_noise --calibrate writes them: ``figures[run]`` before and
    after (the conv2d part, the one the account reads)."""
    for run, figure in figures.items():
        for name in CALIBRATION_FILES:
            (raw / f"run_{run:03d}" / name).write_text(json.dumps(
                {"single_thread_ms": 3.0, "side_threads_ms": figure, "threads": 2, "wall_s": 2.0, "at": 0.0}))


def test_a_run_that_moved_with_the_machine_is_set_beside_its_calibration(tmp_path: Path) -> None:
    # the machine slows down run by run (its calibration figure rises) while the speedup drifts down with it
    _write_runs(tmp_path, runs=12, k=1, run_sd=0.0, process_sd=0.002, drift=-0.01, shifted={7: -0.12})
    _calibrate(tmp_path, {run: 2.0 * (1 + 0.01 * run) * (1.12 if run == 7 else 1.0) for run in range(12)})
    (found,) = machine_beside(tmp_path, {"m": (7,)})
    assert found.runs == 12
    assert found.rho_speedup < -0.9 and found.p_speedup < 0.01
    ((run, speedup, machine),) = found.outlying
    assert run == 7 and speedup < 0.9 and machine > 1.1  # the outlying run was an outlying machine


def test_runs_measured_without_calibration_say_nothing_of_the_machine(tmp_path: Path) -> None:
    _write_runs(tmp_path, runs=6, k=1, run_sd=0.01, process_sd=0.01)
    assert machine_beside(tmp_path, {}) == []
    _calibrate(tmp_path, {0: 2.0, 1: 2.1})  # two calibrated runs are too few for a rank correlation
    assert machine_beside(tmp_path, {}) == []
