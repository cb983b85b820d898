"""bench.machine_calibration (the calibration workload, the account of how far the machine moved between the two
sides of a parity cell) and bench.pt_parity's account table over recorded runs."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict

import pytest

from bench import pt_parity
from bench.machine_calibration import (
    Calibration,
    CalibrationError,
    SideRun,
    account,
    calibrate,
    drift,
    machine_figure,
    machine_moved,
)
from bench.pt_parity import Model, RunResult


def cal(figure_ms: float) -> Calibration:
    return Calibration(single_thread_ms=10.0, side_threads_ms=figure_ms, threads=2, wall_s=4.0, at=0.0)


def test_machine_moved_is_outside_five_percent() -> None:
    assert machine_moved(1.05) is False and machine_moved(0.95) is False
    assert machine_moved(1.051) is True and machine_moved(0.949) is True
    assert machine_moved(None) is None


def test_figure_and_drift_of_one_side_run() -> None:
    assert machine_figure(cal(100), cal(140)) == pytest.approx(120)
    assert machine_figure(None, cal(90)) == pytest.approx(90)
    assert machine_figure(None, None) is None
    assert drift(cal(100), cal(130)) == pytest.approx(0.3)
    assert drift(cal(100), None) is None


def test_account_divides_out_the_machine() -> None:
    # Round 1: the machine 20 % slower while perfdash ran, and perfdash 20 % slower: the same speed in machine units.
    # Round 2: the machine steady, perfdash 4 % faster. Medians over the two rounds.
    pytorch = [SideRun(10.0, cal(100), cal(100)), SideRun(10.0, cal(100), cal(100))]
    perfdash = [SideRun(12.0, cal(110), cal(130)), SideRun(9.6, cal(100), cal(100))]
    acc = account(pytorch, perfdash)
    assert acc.latency_ratio == pytest.approx(10.8 / 10.0)
    assert acc.machine_ratio == pytest.approx(110 / 100)  # perfdash's figures 120 and 100
    assert acc.moved is True
    assert acc.corrected_ratio == pytest.approx((0.1 + 0.096) / 2 / 0.1)  # latency / figure: 0.1, 0.096 vs 0.1
    assert acc.largest_drift == pytest.approx(130 / 110 - 1)


def test_account_without_calibrations_keeps_the_latency_ratio() -> None:
    acc = account([SideRun(10.0, None, None)], [SideRun(10.4, None, None)])
    assert acc.latency_ratio == pytest.approx(1.04)
    assert acc.machine_ratio is None and acc.corrected_ratio is None and acc.moved is None
    assert acc.largest_drift is None
    assert account([], [SideRun(10.0, cal(1), cal(1))]).latency_ratio is None


def test_a_real_calibration_gives_positive_finite_figures() -> None:
    c = calibrate(["nice", "-n", "10"], dict(os.environ))
    for value in (c.single_thread_ms, c.side_threads_ms, c.figure_ms, c.wall_s):
        assert value > 0 and math.isfinite(value)
    assert c.threads >= 1


def test_a_failed_calibration_says_so() -> None:
    with pytest.raises(CalibrationError, match="exit 1"):
        calibrate(["false"], dict(os.environ))


def perf(side: str, model: Model, rnd: int, latency: float, before: float, after: float) -> RunResult:
    return RunResult(side, model.label, rnd, "performance", row={"abs_latency": str(latency), "speedup": "1.5"},
                     calibration_before=cal(before), calibration_after=cal(after))


def test_pt_parity_account_table_and_record() -> None:
    steady, moved = Model("timm_models", "steady", 8), Model("timm_models", "moved", 8)
    results = [perf("pytorch", steady, 1, 10.0, 100, 101), perf("perfdash", steady, 1, 10.2, 101, 102),
               perf("pytorch", moved, 1, 10.0, 100, 100), perf("perfdash", moved, 1, 13.0, 100, 160)]
    acc = pt_parity.cell_account(moved, results)
    assert acc.machine_ratio == pytest.approx(1.3) and acc.corrected_ratio == pytest.approx(1.0)
    table = pt_parity.account_table([steady, moved], results)
    assert table[2].startswith("| timm_models:steady | 1.020 ✓ | 1.010 | steady ✓ | 1.010 ✓ |")
    assert table[3] == "| timm_models:moved | 1.300 ✗ | 1.300 | moved ✗ | 1.000 ✓ | 60.0% |"
    assert table[-1] == ("abs_latency within ±5%: 1 / 2 cells; the machine moved more than ±5% between the two sides "
                         "in 1 of the 2 cells calibrated; abs_latency ÷ machine within ±5%: 2 / 2 cells.")
    record = json.loads(json.dumps(asdict(results[3])))  # what results.jsonl holds beside each side
    assert record["calibration_before"]["side_threads_ms"] == 100 and record["calibration_after"]["threads"] == 2
    rounds = "\n".join(pt_parity.rounds_table(results))
    assert "| 100.0 → 160.0 |" in rounds
