"""bench/pt_parity.py --resume: a parity run of hours, stopped part-way (a session's end, a reboot), goes on from what
it finished instead of starting again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import pt_parity
from bench.machine_calibration import Calibration
from bench.pt_parity import Model, RunResult

SLOW, QUICK = Model("huggingface", "Slow", 2), Model("huggingface", "Quick", 2)


class Stop(Exception):
    """The run's process killed part-way."""


def _args(tmp_path: Path) -> object:
    return pt_parity.build_parser().parse_args(["--pytorch-dir", str(tmp_path), "--rounds", "2", "--timeout", "600"])


def _calibration(figure: float) -> Calibration:
    return Calibration(single_thread_ms=figure, side_threads_ms=figure / 4, threads=2, wall_s=1.0, at=0.0)


class Harness:
    """Fake sides: records what ran, times out on ``slow_times_out`` models, stops the process after ``stop_after``
    runs; calibrations count up so each can be told apart."""

    def __init__(self, stop_after: int | None = None, slow_times_out: bool = False) -> None:
        self.ran: list[tuple[int, str, str, str]] = []
        self.calibrations = 0
        self.first_uses: list[int] = []
        self.stop_after = stop_after
        self.slow_times_out = slow_times_out

    def run(self, args: object, side: str, model: Model, kind: str, rnd: int, work: Path) -> RunResult:
        if self.stop_after is not None and len(self.ran) == self.stop_after:
            raise Stop
        self.ran.append((rnd, side, model.name, kind))
        if self.slow_times_out and model == SLOW:
            return RunResult(side, model.label, rnd, kind, error="timed out after 600 s")
        return RunResult(side, model.label, rnd, kind, row={"speedup": f"1.{len(self.ran)}", "accuracy": "pass"},
                         wall_s=10.0 + len(self.ran))

    def calibrate(self, args: object, work: Path) -> Calibration:
        self.calibrations += 1
        return _calibration(float(self.calibrations))

    def first_use(self, args: object, work: Path) -> tuple[float, float]:
        self.first_uses.append(len(self.ran))
        return 0.5, 6.0 + len(self.ran)

    def rounds(self, args: object, work: Path, finished: pt_parity.Finished | None = None
               ) -> tuple[list[RunResult], list[tuple[float, float]], list[float]]:
        return pt_parity.run_rounds(args, [SLOW, QUICK], work, run=self.run,  # type: ignore[arg-type]
                                    calibrate=self.calibrate, first_use_of=self.first_use, finished=finished)


def _key(result: RunResult) -> tuple[str, str, int, str]:
    return result.side, result.model, result.round, result.kind


def test_a_stopped_run_goes_on_from_what_it_finished(tmp_path: Path) -> None:
    (tmp_path / "whole").mkdir()
    complete, _, _ = Harness().rounds(_args(tmp_path), tmp_path / "whole")
    assert len(complete) == 12  # 2 models x 2 sides x (2 performance rounds + 1 accuracy)

    work = tmp_path / "stopped"
    work.mkdir()
    first = Harness(stop_after=7)
    with pytest.raises(Stop):
        first.rounds(_args(tmp_path), work)
    finished = pt_parity.read_finished(work)
    assert len(finished.results) == 7 and finished.first_use == {1: (0.5, 6.0)}
    kept = dict(finished.results)

    second = Harness()
    results, first_use, _ = second.rounds(_args(tmp_path), work, finished=finished)
    # only the five runs not finished ran, and round 1's first-use cost was not paid again
    assert len(second.ran) == 5 and second.first_uses == [1]  # round 2's, after one run
    assert [_key(r) for r in results] == [_key(r) for r in complete]  # the same cells in the same order
    assert all(results[i] == kept[_key(results[i])] for i in range(7))  # the earlier ones as they were
    assert first_use == [(0.5, 6.0), (0.5, 7.0)]
    # the file now holds every run once, and a further resume has nothing left to run
    assert len(pt_parity.read_finished(work).results) == 12
    third = Harness()
    third.rounds(_args(tmp_path), work, finished=pt_parity.read_finished(work))
    assert third.ran == [] and third.calibrations == 0


def test_a_side_run_after_a_resumed_one_is_calibrated_anew(tmp_path: Path) -> None:
    first = Harness(stop_after=1)  # round 1: Slow's first side finished, its second did not
    with pytest.raises(Stop):
        first.rounds(_args(tmp_path), tmp_path)
    second = Harness()
    results, _, _ = second.rounds(_args(tmp_path), tmp_path, finished=pt_parity.read_finished(tmp_path))
    resumed, fresh = results[0], results[1]
    assert resumed.calibration_before == _calibration(1.0) and resumed.calibration_after == _calibration(2.0)
    # not the earlier run's "after", taken who knows how long ago: a calibration of the machine as it is now
    assert fresh.calibration_before == _calibration(1.0) and fresh.calibration_after == _calibration(2.0)
    assert second.calibrations >= 2


def test_a_timeout_before_the_stop_still_gives_the_model_up(tmp_path: Path) -> None:
    first = Harness(stop_after=3, slow_times_out=True)
    with pytest.raises(Stop):
        first.rounds(_args(tmp_path), tmp_path)
    assert first.ran[0][2] == "Slow"
    second = Harness(slow_times_out=True)
    results, _, _ = second.rounds(_args(tmp_path), tmp_path, finished=pt_parity.read_finished(tmp_path))
    assert not [r for r in second.ran if r[2] == "Slow"]  # the timeout is not paid again
    slow = [r for r in results if r.model == SLOW.label]
    assert slow[0].error == "timed out after 600 s"
    assert all(r.error.startswith("not run: its ") for r in slow[1:])


def test_a_line_cut_off_mid_write_runs_again_and_a_bad_line_stops_the_resume(tmp_path: Path) -> None:
    good = json.dumps({"side": "pytorch", "model": SLOW.label, "round": 1, "kind": "performance",
                       "row": {"speedup": "1.2"}})
    (tmp_path / "results.jsonl").write_text(good + "\n" + good[:40])
    finished = pt_parity.read_finished(tmp_path)
    assert list(finished.results) == [("pytorch", SLOW.label, 1, "performance")]
    (tmp_path / "results.jsonl").write_text("{not json\n" + good + "\n")
    with pytest.raises(SystemExit, match=r"results\.jsonl:1: not a result of bench\.pt_parity"):
        pt_parity.read_finished(tmp_path)
