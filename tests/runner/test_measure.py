"""CPU memory in process (no worker, no compilation): PyTorch's warm-up peak (the resident set after the warm-up) and
perfdash's activation peak replayed from torch.profiler's memory events."""

from __future__ import annotations

import pytest
import torch

from runner.measure import GB, PeakMemory, cpu_peak_bytes, peak_above_start, process_rss_bytes, warmup

MB = 1 << 20


def test_replay_is_the_peak_above_the_start() -> None:
    assert peak_above_start([]) == 0
    assert peak_above_start([100, 50, -150, 20]) == 150
    # Frees of memory that was in use before the start lower the total: the peak is above the baseline, never below.
    assert peak_above_start([-100, 60, 30]) == 0
    assert peak_above_start([-100, 60, 30, 40]) == 30


def test_a_known_intermediate_is_counted() -> None:
    x = torch.ones(1024, 1024)  # 4 MiB, allocated before the measurement: not part of the peak

    def step() -> torch.Tensor:
        y = x * 2  # 4 MiB
        z = y + 1  # 4 MiB more while y lives
        return z.sum()

    peak = cpu_peak_bytes(step)
    assert 8 * MB <= peak < 9 * MB
    assert PeakMemory("cpu").measure(step) == peak / GB


def test_memory_the_previous_step_left_is_freed_in_the_window() -> None:
    """As training's zero_grad(set_to_none=True) frees the gradients the previous step allocated."""
    state = {"grad": torch.ones(4 * MB // 4)}

    def step() -> None:
        del state["grad"]  # -4 MiB, allocated by the previous call
        state["grad"] = torch.ones(4 * MB // 4)  # +4 MiB: back at the baseline
        temporary = torch.ones(MB // 4)  # +1 MiB: the peak above the baseline
        del temporary

    assert cpu_peak_bytes(step) == MB


def test_one_unprimed_call_is_exact_for_an_inference_like_step() -> None:
    """What the worker relies on in inference: a step that frees only what it allocated needs no priming call."""
    weight = torch.ones(512, 512)
    calls: list[int] = []

    def step() -> torch.Tensor:
        calls.append(1)
        hidden = torch.relu(weight @ weight)  # 1 MiB
        return (hidden * 2).sum()  # 1 MiB more while hidden lives

    step()  # warm, as the worker's memory phase runs after the first call and compilation
    primed = cpu_peak_bytes(step)
    unprimed = cpu_peak_bytes(step, primed=False)
    assert unprimed == primed and 2 * MB <= primed < 3 * MB
    calls.clear()
    PeakMemory("cpu", primed=False).measure(step)
    assert len(calls) == PeakMemory("cpu", primed=False).calls == 1


def test_pytorchs_cpu_peak_holds_a_big_weight_that_the_activation_peak_leaves_out() -> None:
    """PyTorch's CPU column is the process's resident memory after the warm-up: a weight the model holds is in it.
    perfdash's activation peak of the same step is what one call adds, without the weight."""
    before = warmup(lambda: None, 5, "cpu")
    assert before.peak_mem * GB == pytest.approx(process_rss_bytes(), rel=0.05)
    weight = torch.ones(64 * MB // 4)  # 64 MiB, written, so resident
    x = torch.ones(1, 64 * MB // 4)
    calls: list[int] = []

    def step() -> torch.Tensor:
        calls.append(1)
        return (x * weight).sum()  # one 64 MiB temporary

    after = warmup(step, 5, "cpu")
    assert len(calls) == 5 and after.seconds > 0
    assert (after.peak_mem - before.peak_mem) * GB >= 0.95 * 2 * 64 * MB  # weight and input, both resident
    activation = PeakMemory("cpu", primed=False).measure(step) * GB
    assert 64 * MB <= activation < 65 * MB  # the temporary only
