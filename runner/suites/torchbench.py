"""PyTorch's torchbench suite: ``torchbenchmark`` models when it is installed, else the torchvision models it wraps."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from importlib import metadata

from runner.suites.base import DATA_DIR, Suite, Tolerance, ToleranceQuery


def tolerance(q: ToleranceQuery, lists: Mapping[str, frozenset[str]]) -> Tolerance:
    """PyTorch's torchbench rule: 1e-4; 1e-3 for fp16/amp and CUDA training; 1e-2 for models its lists name."""
    if q.dtype in ("float16", "amp"):
        return Tolerance(1e-2 if q.name in lists.get("higher_fp16", frozenset()) else 1e-3)
    if q.dtype == "bfloat16" and q.name in lists.get("higher_bf16", frozenset()):
        return Tolerance(1e-2)
    if q.mode == "training" and q.device == "cuda":
        return Tolerance(1e-3, cosine=q.name in lists.get("cosine", frozenset()))
    return Tolerance(1e-4)


def has_torchbenchmark() -> bool:
    return importlib.util.find_spec("torchbenchmark") is not None


def resolve_builder(builder: str) -> str:
    kind, _, target = builder.partition(":")
    return f"torchbenchmark:{target}" if kind == "torchvision" and has_torchbenchmark() else builder


def versions() -> dict[str, str]:
    if has_torchbenchmark():
        try:
            return {"torchbench": metadata.version("torchbenchmark")}
        except metadata.PackageNotFoundError:
            return {"torchbench": "installed (unversioned)"}
    return {"torchbench": f"torchvision {metadata.version('torchvision')} (torchbenchmark not installed)"}


SUITE = Suite(name="torchbench", data_file=DATA_DIR / "torchbench.toml", default_builder="torchvision",
              tolerance=tolerance, versions=versions, resolve_builder=resolve_builder, accuracy_batch_size=4)
