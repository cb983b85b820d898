"""PyTorch's huggingface suite: transformers models built from their config classes (no hub downloads)."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata

from runner.suites.base import DATA_DIR, Suite, Tolerance, ToleranceQuery


def tolerance(q: ToleranceQuery, lists: Mapping[str, frozenset[str]]) -> Tolerance:
    """PyTorch's huggingface rule: 1e-2 training (2e-2 listed), 1e-3 inference (4e-3 / 5e-3 on CPU listed)."""
    if q.mode == "training":
        return Tolerance(2e-2 if q.name in lists.get("higher_training", frozenset()) else 1e-2)
    if q.device == "cpu" and q.name in lists.get("higher_inference_cpu", frozenset()):
        return Tolerance(5e-3)
    if q.name in lists.get("higher_inference", frozenset()):
        return Tolerance(4e-3)
    return Tolerance(1e-3)


def versions() -> dict[str, str]:
    return {"transformers": metadata.version("transformers")}


SUITE = Suite(name="huggingface", data_file=DATA_DIR / "huggingface.toml", default_builder="hf",
              tolerance=tolerance, versions=versions, accuracy_batch_size=1)
