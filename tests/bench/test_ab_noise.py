"""bench/ab_noise.py: a candidate's flags (--run-arg) and runs measured in several worker processes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench import ab_noise
from perfdash.confidence import speedup_interval
from perfdash.contract import ModelSamples


def test_a_candidates_flags_follow_the_default_run_and_get_their_own_files() -> None:
    argv = ab_noise.run_argv(Path("/out"), ["--processes", "3"])
    assert argv[:len(ab_noise.run_argv(Path("/out")))] == ab_noise.run_argv(Path("/out"))
    assert argv[-2:] == ["--processes", "3"]
    raw, output = ab_noise.default_paths(["--processes", "3"])
    default_raw, default_output = ab_noise.default_paths([])
    assert output.name == "ab_noise_processes_3.json" and default_output == ab_noise.OUTPUT
    assert raw.name == "ab_noise_runs_processes_3" and default_raw.name == "ab_noise_runs"


def test_runs_of_other_flags_are_never_resumed(tmp_path: Path) -> None:
    ab_noise.measure(tmp_path, runs=0, minutes=1, run_args=["--processes", "3"])
    assert json.loads((tmp_path / ab_noise.RUN_ARGS_FILE).read_text()) == ["--processes", "3"]
    with pytest.raises(SystemExit, match="another --raw-dir"):
        ab_noise.measure(tmp_path, runs=0, minutes=1)


def _write_runs(raw: Path, runs: int) -> list[ModelSamples]:
    rng = np.random.default_rng(3)
    written = []
    for index in range(runs):
        shifts = np.repeat(np.exp(0.05 * rng.standard_normal(3)), 10)
        samples = ModelSamples(name="m", batch_size=4, eager_ms=tuple(10 * shifts * (1 + 0.01 * rng.random(30))),
                               compiled_ms=tuple(5 * (1 + 0.01 * rng.random(30))),
                               process=tuple(k for k in range(3) for _ in range(10)))
        run = raw / f"run_{index:03d}"
        run.mkdir(parents=True)
        (run / ab_noise.SAMPLES_FILE).write_text(samples.to_json() + "\n")
        written.append(samples)
    return written


def test_intervals_of_several_processes_resample_them_and_the_output_names_the_flags(tmp_path: Path) -> None:
    written = _write_runs(tmp_path / "raw", 4)
    (tmp_path / "raw" / ab_noise.RUN_ARGS_FILE).write_text(json.dumps(["--processes", "3"]))
    runs = ab_noise.read_runs(tmp_path / "raw")["m"]
    expected = speedup_interval(written[0].eager_ms, written[0].compiled_ms, process=written[0].process)
    assert expected is not None and runs[0].speedup_ci == (expected.low, expected.high)
    plain = speedup_interval(written[0].eager_ms, written[0].compiled_ms)
    assert plain is not None and runs[0].speedup_ci != (plain.low, plain.high)
    output = tmp_path / "noise.json"
    assert ab_noise.main(["--analyse-only", "--raw-dir", str(tmp_path / "raw"), "--output", str(output)]) == 0
    noise = ab_noise.load_noise(output)
    assert noise.run_args == ("--processes", "3") and noise.configuration.endswith("--processes 3")
    assert [r.runs for r in noise.rows] == [4, 4]


def test_the_series_range_is_a_prediction_interval_of_the_next_run() -> None:
    low, high = ab_noise.next_run_range(2.0, 0.01)
    # z 1.96 x sqrt 2 x 1 %: the next run and this one each carry one run's noise
    assert high / 2.0 == pytest.approx(np.exp(1.959964 * np.sqrt(2) * 0.01), rel=1e-6)
    assert low * high == pytest.approx(4.0)
    rng = np.random.default_rng(7)
    # runs whose whole-run moves are normal in log space: the range holds the next one about 95 % of the time
    steady = list(np.exp(np.log(1.6) + rng.normal(0, 0.02, 400)))
    assert 0.92 <= (ab_noise.next_in_series_range(steady) or 0) <= 0.98
    # one run in six outlying by 8 %: the robust CV does not see them, and the range misses the next run far more
    shifted = [v * (0.92 if i % 6 == 0 else 1.0) for i, v in enumerate(steady)]
    assert (ab_noise.next_in_series_range(shifted) or 1) < 0.85
    assert ab_noise.next_in_series_range(steady[:6]) is None  # too few other runs for an estimate


def test_a_calibration_around_a_run_is_a_real_timing_the_analysis_reads(tmp_path: Path) -> None:
    from bench.machine_calibration import Calibration

    path = tmp_path / ab_noise.CALIBRATION_FILES[0]
    ab_noise.write_calibration(path)  # the fixed workload, timed in a fresh interpreter
    calibration = Calibration(**json.loads(path.read_text()))
    assert calibration.side_threads_ms > 0 and calibration.single_thread_ms > 0 and calibration.threads >= 1
