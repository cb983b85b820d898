"""Real (tiny) models for the DDP scaling tests (``py:`` builder); the faulty ones fail on one rank of one world
size only, read from the variables every rank gets (RANK, WORLD_SIZE), so the other world sizes run normally."""

from __future__ import annotations

import os
import time

import torch
from torch import nn


class TinyCNN(nn.Module):
    # A class of its own, not an nn.Sequential: under DDP Dynamo starts its graph at the wrapped module's forward, and
    # it never starts one in torch.nn's own code.
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(x)).mean((2, 3)))


def tiny_cnn(batch_size: int, training: bool) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return TinyCNN(), (torch.randn(batch_size, 3, 16, 16, generator=torch.Generator().manual_seed(0)),)


class _OnOneRank(nn.Module):
    """A tiny MLP that misbehaves on rank ``rank`` of a world of ``world_size`` ranks."""

    def __init__(self, rank: int, world_size: int, how: str) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
        self.rank, self.world_size, self.how = rank, world_size, how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if os.environ.get("RANK") == str(self.rank) and os.environ.get("WORLD_SIZE") == str(self.world_size):
            if self.how == "raise":
                raise RuntimeError(f"injected failure on rank {self.rank}")
            while True:  # hang
                time.sleep(1)
        return self.net(x)


def on_one_rank(batch_size: int, training: bool, rank: int, world_size: int,
                how: str) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return _OnOneRank(rank, world_size, how), (torch.randn(batch_size, 16, generator=torch.Generator().manual_seed(0)),)
