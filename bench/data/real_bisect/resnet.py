"""torchvision's resnet18 built from its config (no weights downloaded): a real model for a modest regression, whose
speedup between runs moves about 1 % on the nightly (bench/README.md, ab_noise). ``settings.py`` of the same checkout
sets Inductor options before the model is compiled."""

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


def build(batch_size: int, training: bool, **_options: object) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from torchvision.models import resnet18

    _apply_settings()
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    return resnet18(weights=None).eval(), (torch.randn(batch_size, 3, 224, 224, generator=gen),)
