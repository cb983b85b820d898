"""A tiny elementwise-heavy model (the bisected repository's only model): its compiled speed depends on Inductor's C++
vectorization. ``settings.py`` of the same checkout sets Inductor options before the model is compiled."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from torch import nn


def _apply_settings() -> None:
    spec = importlib.util.spec_from_file_location("repo_settings", Path(__file__).with_name("settings.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.apply(torch._inductor.config)


class Pointwise(nn.Module):
    def __init__(self, width: int = 2048) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, width))
        self.shift = nn.Parameter(torch.linspace(-0.1, 0.1, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(4):
            x = torch.tanh(torch.nn.functional.gelu(x * self.scale + self.shift)) + torch.sigmoid(x) * 0.5
        return torch.nn.functional.layer_norm(x, x.shape[-1:])


def build(batch_size: int, training: bool, **_options: object) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    _apply_settings()
    gen = torch.Generator().manual_seed(0)
    return Pointwise(), (torch.randn(batch_size, 2048, generator=gen),)
