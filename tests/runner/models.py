"""Real (tiny) test models for the runner's tests, built through the ``py:`` builder of a models file.

Each builder takes ``batch_size`` and ``training`` (and the entry's options) and returns ``(module, inputs)``.
"""

from __future__ import annotations

import os
import time

import torch
from torch import nn


class TinyMLP(nn.Module):
    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Raises(TinyMLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("this model always raises")


class Aborts(TinyMLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        os.abort()


class Hangs(TinyMLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        while True:
            time.sleep(1)


class Perturbed(TinyMLP):
    """Right in eager, off by 1e-2 once compiled: what an accuracy bug in a compiler looks like."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.net(x)
        if torch.compiler.is_compiling():
            y = y + 1e-2
        return y


class WideLinear(nn.Module):
    """Returns a large activation (batch x WIDE floats), which eager and compiled must both hold at their peak."""

    WIDE = 65536

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, self.WIDE)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.proj(x))  # eager: the linear's output and relu's; Inductor can fuse the two


@torch.compiler.disable
def _clock_noise() -> float:
    return (time.perf_counter_ns() % 997 + 1) * 1e-3


class Nondeterministic(TinyMLP):
    """Eager gives a different answer every call (noise from the clock, which no seed resets)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x) + _clock_noise()


def _inputs(batch_size: int) -> tuple[torch.Tensor]:
    return (torch.randn(batch_size, 16, generator=torch.Generator().manual_seed(0)),)


def tiny_mlp(batch_size: int, training: bool, width: int = 32) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return TinyMLP(width), _inputs(batch_size)


def raises(batch_size: int, training: bool) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return Raises(), _inputs(batch_size)


def aborts(batch_size: int, training: bool) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return Aborts(), _inputs(batch_size)


def hangs(batch_size: int, training: bool) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return Hangs(), _inputs(batch_size)


def perturbed(batch_size: int, training: bool) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return Perturbed(), _inputs(batch_size)


def nondeterministic(batch_size: int, training: bool) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return Nondeterministic(), _inputs(batch_size)


def wide_linear(batch_size: int, training: bool) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return WideLinear(), _inputs(batch_size)


class BigWeight(nn.Module):
    """A 128 MiB weight and a small activation: PyTorch's peak memory holds the weight, the activation peak not."""

    IN, OUT = 4096, 8192

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(self.IN, self.OUT, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


def big_weight(batch_size: int, training: bool) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return BigWeight(), (torch.randn(batch_size, BigWeight.IN),)


def where_built(batch_size: int, training: bool) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """A tiny MLP that appends to $PERFDASH_TEST_PROCESS_LOG where it was built: its process, parent and process
    group, whether the compiler was imported before the model was (the fork server must not), whether jemalloc's
    background threads run in it, and the Inductor and Triton cache directories it would compile into."""
    import json
    import sys

    from torch._inductor.runtime.cache_dir_utils import cache_dir, triton_cache_dir

    from runner.allocator import jemalloc_background_threads

    with open(os.environ["PERFDASH_TEST_PROCESS_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0),
                              "compiler_imported": "torch._inductor.compile_fx" in sys.modules,
                              "jemalloc_background_threads": jemalloc_background_threads(),
                              "inductor_cache": cache_dir(), "triton_cache": triton_cache_dir(0)}) + "\n")
    return tiny_mlp(batch_size, training)


class SettingsProbe(TinyMLP):
    """Appends the global settings each eager call runs under to $PERFDASH_TEST_SETTINGS_LOG: deterministic
    algorithms (on only in the accuracy check), TF32 matmuls, the reduced-precision SDPA math, Inductor's CUDA
    graphs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.compiler.is_compiling():
            import json

            from torch._inductor import config as inductor_config

            with open(os.environ["PERFDASH_TEST_SETTINGS_LOG"], "a", encoding="utf-8") as log:
                log.write(json.dumps({
                    "deterministic": torch.are_deterministic_algorithms_enabled(),
                    "tf32": torch.backends.cuda.matmul.allow_tf32,
                    "sdpa_reduced": torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed(),
                    "cudagraphs": inductor_config.triton.cudagraphs}) + "\n")
        return self.net(x)


def settings_probe(batch_size: int, training: bool) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return SettingsProbe(), _inputs(batch_size)


def kills_server(batch_size: int, training: bool) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """Kills the process that forked it (the fork server), then hangs: what a misbehaving library could do."""
    import signal

    os.kill(os.getppid(), signal.SIGKILL)
    while True:
        time.sleep(1)


class Counting(TinyMLP):
    """Counts its calls in a buffer and scales its output by the count: a run's result tells how many iterations it
    ran and whether it started from the pristine model."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return self.net(x) * self.calls


def counting(batch_size: int, training: bool) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return Counting(), _inputs(batch_size)


class TwoBreaks(TinyMLP):
    """Two graph breaks inside the model's forward, as a transformers model has where it calls into Python that
    Dynamo cannot trace."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.net(x)
        torch._dynamo.graph_break()
        x = torch.relu(x)
        torch._dynamo.graph_break()
        return x * 2


def two_breaks(batch_size: int, training: bool) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return TwoBreaks(), _inputs(batch_size)


def cached_decoder(batch_size: int, training: bool) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """A tiny transformers decoder with its KV cache on: its output holds a DynamicCache object."""
    from transformers import BlenderbotSmallConfig, BlenderbotSmallForCausalLM

    config = BlenderbotSmallConfig(d_model=16, decoder_layers=1, encoder_layers=1, decoder_attention_heads=2,
                                   encoder_attention_heads=2, decoder_ffn_dim=32, encoder_ffn_dim=32, vocab_size=64,
                                   max_position_embeddings=32, use_cache=True)
    ids = torch.randint(0, 64, (batch_size, 8), generator=torch.Generator().manual_seed(0))
    return BlenderbotSmallForCausalLM(config), {"input_ids": ids}


class ProfileTrap(TinyMLP):
    """tiny_mlp until the kernel profile after the timed loop, which it breaks: its calls made while torch.profiler
    records are counted, and those after the memory phase's (one eager, one compiled call in inference) raise, abort
    or hang, as a profile that fails, crashes or runs long."""

    MEMORY_PHASE_CALLS = 2

    def __init__(self, trap: str) -> None:
        super().__init__()
        self.trap = trap
        self.profiled_calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _spring(self)
        return self.net(x)


@torch._dynamo.disable  # runs on every call of the compiled model too
def _spring(model: ProfileTrap) -> None:
    if not torch.autograd.profiler._is_profiler_enabled:
        return
    model.profiled_calls += 1
    if model.profiled_calls <= model.MEMORY_PHASE_CALLS:
        return
    if model.trap == "raises":
        raise RuntimeError("the kernel profile raised")
    if model.trap == "aborts":
        os.abort()
    while True:
        time.sleep(1)


def profile_trap(batch_size: int, training: bool, trap: str) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return ProfileTrap(trap), _inputs(batch_size)
