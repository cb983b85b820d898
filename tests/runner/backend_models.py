"""Tiny real models for the backend tests (onnxruntime, openvino), built through the ``py:`` builder."""

from __future__ import annotations

import torch
from torch import nn


class TinyConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


class TwoInputs(nn.Module):
    """Keyword inputs and a tuple of outputs, as transformers models are called."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.proj = nn.Linear(16, 16)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.proj(self.embed(input_ids)) * attention_mask.unsqueeze(-1)
        return hidden, hidden.mean(dim=1)


class PerturbedWhenExported(TinyConvNet):
    """Right in eager, off by 1e-2 in whatever a backend exports or compiles: an accuracy bug in a backend."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        if torch.onnx.is_in_onnx_export() or torch.compiler.is_exporting() or torch.compiler.is_compiling():
            y = y + 1e-2
        return y


class Unexportable(nn.Module):
    """A singular value decomposition: no ONNX operator (or exporter translation) exists for it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.svdvals(x)


def tiny_conv(batch_size: int, training: bool) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return TinyConvNet(), (torch.randn(batch_size, 3, 16, 16),)


def two_inputs(batch_size: int, training: bool) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    ids = torch.randint(0, 50, (batch_size, 12))
    return TwoInputs(), {"input_ids": ids, "attention_mask": torch.ones(batch_size, 12)}


def perturbed_export(batch_size: int, training: bool) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return PerturbedWhenExported(), (torch.randn(batch_size, 3, 16, 16),)


def unexportable(batch_size: int, training: bool) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Unexportable(), (torch.randn(batch_size, 6, 6),)
