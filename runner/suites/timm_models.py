"""PyTorch's timm_models suite: timm models with random weights (``pretrained=False``)."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata

from runner.suites.base import DATA_DIR, Suite, Tolerance, ToleranceQuery


def tolerance(q: ToleranceQuery, lists: Mapping[str, frozenset[str]]) -> Tolerance:
    """PyTorch's timm rule: 1e-3 for inference, 1e-2 for training, wider for the models its lists name."""
    if q.mode == "training":
        if q.name in lists.get("highest_training", frozenset()):
            return Tolerance(16e-2)
        if q.name in lists.get("even_higher", frozenset()):
            return Tolerance(8e-2)
        if q.name in lists.get("higher", frozenset()):
            return Tolerance(4e-2)
        return Tolerance(1e-2)
    if q.freezing and q.name in lists.get("higher_for_freezing", frozenset()):
        return Tolerance(8e-2)
    return Tolerance(1e-3)


def versions() -> dict[str, str]:
    return {"timm": metadata.version("timm")}


SUITE = Suite(name="timm_models", data_file=DATA_DIR / "timm_models.toml", default_builder="timm",
              tolerance=tolerance, versions=versions, accuracy_batch_size=8)
