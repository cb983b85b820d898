"""runner/contention.py: what competed with a timed loop for the CPU, read from Linux around it, and its place in the
samples file (perfdash.contract.LoopContention)."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

import runner.contention as contention
from perfdash.contract import LoopContention, ModelSamples
from runner.contention import ContentionMeter, CpuTicks, parse_cpu_ticks, parse_pressure_some_us, steal_share
from runner.outcome import pool_processes
from runner.protocol import Performance, WorkerResult

# /proc/stat of a 2-vCPU guest (aggregate line first; fields: user nice system idle iowait irq softirq steal guest
# guest_nice)
STAT = """cpu  1219760 4019 169700 794105 5322 0 2231 1160 0 0
cpu0 691933 1672 104093 298092 1904 0 522 561 0 0
cpu1 527827 2347 65606 496012 3418 0 1709 599 0 0
intr 1 2 3
"""
PRESSURE = """some avg10=29.42 avg60=13.03 avg300=14.40 total=1908443612
full avg10=0.00 avg60=0.00 avg300=0.00 total=0
"""


def test_the_aggregate_cpu_line_gives_all_ticks_and_the_stolen_ones() -> None:
    ticks = parse_cpu_ticks(STAT)
    # guest time is already in user and nice: the total is the first eight fields
    # busy: user, nice, system, irq, softirq (not idle, iowait or steal)
    assert ticks == CpuTicks(total=1219760 + 4019 + 169700 + 794105 + 5322 + 0 + 2231 + 1160, steal=1160,
                             busy=1219760 + 4019 + 169700 + 0 + 2231)
    assert parse_cpu_ticks("cpu  1 2 3 4\n") is None  # no steal field
    assert parse_cpu_ticks("intr 1 2\n") is None


def test_pressure_reads_the_some_lines_total() -> None:
    assert parse_pressure_some_us(PRESSURE) == 1908443612
    assert parse_pressure_some_us("") is None


def test_steal_share_is_the_stolen_part_of_the_ticks_between_two_readings() -> None:
    assert steal_share(CpuTicks(1000, 10), CpuTicks(1400, 30)) == pytest.approx(20 / 400)
    assert steal_share(CpuTicks(1000, 10), CpuTicks(1000, 10)) is None  # no tick between them says nothing
    assert steal_share(None, CpuTicks(1000, 10)) is None


def test_the_meter_reads_steal_and_pressure_around_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stat, pressure = tmp_path / "stat", tmp_path / "pressure"
    stat.write_text("cpu  1000 0 0 0 0 0 0 10 0 0\n")
    pressure.write_text("some avg10=0 avg60=0 avg300=0 total=5000000\n")
    monkeypatch.setattr(contention, "PROC_STAT", stat)
    monkeypatch.setattr(contention, "PROC_PRESSURE_CPU", pressure)
    with ContentionMeter(process=2) as meter:
        time.sleep(0.2)
        # 400 ticks pass, 40 of them stolen; 0.1 s of pressure
        stat.write_text("cpu  1360 0 0 0 0 0 0 50 0 0\n")
        pressure.write_text("some avg10=0 avg60=0 avg300=0 total=5100000\n")
    result = meter.result
    assert result is not None and result.process == 2
    assert result.wall_s == pytest.approx(0.2, abs=0.1)
    assert result.steal_share == pytest.approx(0.1)
    assert result.pressure_share == pytest.approx(0.1 / result.wall_s)


def test_without_the_kernels_files_the_loop_is_measured_as_before(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contention, "PROC_STAT", tmp_path / "missing")
    monkeypatch.setattr(contention, "PROC_PRESSURE_CPU", tmp_path / "missing")
    with ContentionMeter() as meter:
        pass
    assert meter.result is not None
    assert (meter.result.steal_share, meter.result.pressure_share) == (None, None)


def _burn(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.skipif(not Path("/proc/pressure/cpu").exists(), reason="this kernel keeps no CPU pressure (PSI)")
def test_other_work_beside_the_loop_shows_as_pressure() -> None:
    """On this machine's real /proc: a loop with more CPU-bound processes than cores beside it waits for a CPU."""
    busy = 2 * (os.cpu_count() or 1) + 1
    context = multiprocessing.get_context("fork")
    burners = [context.Process(target=_burn, args=(1.5,)) for _ in range(busy)]
    for burner in burners:
        burner.start()
    try:
        with ContentionMeter() as meter:
            _burn(1.0)
    finally:
        for burner in burners:
            burner.join()
    assert meter.result is not None
    assert meter.result.pressure_share is not None and meter.result.pressure_share > 0.2
    assert meter.result.involuntary_switches is not None and meter.result.involuntary_switches > 0
    assert meter.result.steal_share is not None  # a figure, whatever the host did


def test_samples_carry_one_contention_reading_per_worker() -> None:
    readings = (LoopContention(process=0, wall_s=1.5, steal_share=0.0, pressure_share=0.01, involuntary_switches=4),
                LoopContention(process=1, wall_s=1.4, steal_share=0.03, pressure_share=None,
                               involuntary_switches=None))
    samples = ModelSamples(name="m", batch_size=1, eager_ms=(1.0, 2.0), compiled_ms=(0.5, 1.0), process=(0, 1),
                           contention=readings)
    assert ModelSamples.from_json(samples.to_json()) == samples
    one = ModelSamples(name="m", batch_size=1, eager_ms=(1.0,), compiled_ms=(0.5,), contention=readings[:1])
    assert json.loads(one.to_json())["contention"][0]["steal_share"] == 0.0
    assert "contention" not in json.loads(ModelSamples(name="m", batch_size=1, eager_ms=(1.0,),
                                                       compiled_ms=(0.5,)).to_json())  # older files read as before
    with pytest.raises(ValueError, match="one entry per worker"):
        ModelSamples(name="m", batch_size=1, eager_ms=(1.0, 2.0), compiled_ms=(0.5, 1.0), process=(0, 1),
                     contention=(readings[0], readings[0]))
    with pytest.raises(ValueError, match="one entry per worker"):  # a worker that timed no pair
        ModelSamples(name="m", batch_size=1, eager_ms=(1.0,), compiled_ms=(0.5,), contention=readings[1:])
    with pytest.raises(ValueError, match="share of time"):
        LoopContention(process=0, wall_s=1.0, steal_share=1.2)


def test_the_pool_keeps_each_workers_reading_under_its_index_and_the_worker_protocol_carries_it() -> None:
    def perf(eager: tuple[float, ...], steal: float) -> Performance:
        return Performance(eager_ms=eager, compiled_ms=eager, compilation_latency=1.0, eager_peak_mem=None,
                           dynamo_peak_mem=None, contention=(LoopContention(process=0, wall_s=1.0, steal_share=steal),))

    pooled = pool_processes(perf((1.0,), 0.0), [(2, perf((2.0, 2.1), 0.05))])
    assert [(c.process, c.steal_share) for c in pooled.contention] == [(0, 0.0), (2, 0.05)]
    sent = WorkerResult(name="m", batch_size=1, performance=pooled)
    assert WorkerResult.from_dict(json.loads(sent.to_json())) == sent


def test_a_task_stat_line_gives_its_name_and_cpu_ticks_however_odd_the_name() -> None:
    # proc(5): pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime ...
    line = "4242 (pt_main (thread) x) R 1 4242 4242 0 -1 4194304 100 0 0 0 731 42 0 0 20 0 3 0\n"
    assert contention.parse_task_stat(line) == ("pt_main (thread) x", 773)
    assert contention.parse_task_stat("4242 (cut") is None
    assert contention.parse_task_stat("") is None


def test_the_busiest_others_leave_out_the_worker_and_the_idle() -> None:
    before = {1: ("init", 10), 7: ("worker", 0), 8: ("inductor_pool", 100), 9: ("idle", 5), 10: ("gone", 3)}
    after = {1: ("init", 12), 7: ("worker", 900), 8: ("inductor_pool", 160), 9: ("idle", 5), 11: ("new", 40)}
    assert contention.busiest(before, after, exclude=7, tick_s=0.01) == ("inductor_pool (8) 0.60 s",
                                                                         "init (1) 0.02 s")
    assert contention.busiest(before, after, exclude=7, tick_s=0.01, limit=1) == ("inductor_pool (8) 0.60 s",)


def test_busy_threads_count_those_that_ran_a_tenth_of_the_loop() -> None:
    before = {100: ("python", 0), 101: ("python", 0), 102: ("python", 0)}
    after = {100: ("python", 95), 101: ("python", 30), 102: ("python", 5), 103: ("python", 20)}
    # a 2 s loop, 10 ms ticks: 0.95 s, 0.30 s and a thread born during the loop with 0.20 s are busy; 0.05 s is not
    assert contention.busy_threads(before, after, wall_s=2.0, tick_s=0.01) == 3


def test_others_share_is_the_busy_time_the_worker_did_not_use() -> None:
    before, after = CpuTicks(total=1000, steal=0, busy=500), CpuTicks(total=1400, steal=0, busy=800)
    # 300 busy ticks of 400, 250 of them the worker's: 50 / 400
    assert contention.others_share(before, after, own_ticks=250) == pytest.approx(0.125)
    assert contention.others_share(before, after, own_ticks=400) == 0.0  # tick rounding never goes negative
    assert contention.others_share(before, before, own_ticks=0) is None


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="no /proc here")
def test_a_process_burning_beside_the_loop_is_named_and_its_share_counted() -> None:
    """On this machine's real /proc: one CPU-bound process beside a loop that sleeps is the busiest other, and the
    others' share is at least a good part of one CPU."""
    context = multiprocessing.get_context("fork")
    burner = context.Process(target=_burn, args=(1.2,))
    burner.start()
    try:
        with ContentionMeter() as meter:
            time.sleep(1.0)
    finally:
        burner.join()
    result = meter.result
    assert result is not None and burner.pid is not None
    assert any(f"({burner.pid})" in other for other in result.busiest_others)
    cpus = os.cpu_count() or 1
    assert result.others_cpu_share is not None and result.others_cpu_share > 0.5 / cpus
    assert result.own_busy_threads == 0  # the loop slept


def test_the_new_readings_round_trip_and_older_files_read_as_before() -> None:
    reading = LoopContention(process=0, wall_s=1.0, pressure_share=0.2, others_cpu_share=0.15,
                             busiest_others=("cc1plus (77) 0.30 s",), own_busy_threads=3)
    assert LoopContention.from_json(json.loads(json.dumps(reading.to_json()))) == reading
    plain = LoopContention(process=0, wall_s=1.0)
    assert set(plain.to_json()) == {"process", "wall_s", "steal_share", "pressure_share", "involuntary_switches"}
    with pytest.raises(ValueError, match="at most"):
        LoopContention(process=0, wall_s=1.0, busiest_others=("a", "b", "c", "d"))
    with pytest.raises(ValueError, match="never negative"):
        LoopContention(process=0, wall_s=1.0, own_busy_threads=-1)
