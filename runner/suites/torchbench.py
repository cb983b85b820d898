"""PyTorch's torchbench suite: the models of PyTorch's TorchBench (``torchbenchmark``, pytorch/benchmark at the commit
runner/torchbench_install.py pins), never a stand-in. Without torchbenchmark the suite refuses to run."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from runner import torchbench_install
from runner.suites.base import DATA_DIR, ModelSpec, Suite, Tolerance, ToleranceQuery

# The default list of each device: PyTorch's CPU list (torchbench.toml) and its GPU list (torchbench.gpu.toml).
DEVICE_LISTS: Mapping[str, str] = MappingProxyType({"cuda": "gpu"})
# What the configuration records as the models' origin (perfdash.manifest.RunConfig.model_source): series measured
# on TorchBench are never joined to those its torchvision stand-ins measured before (which recorded none).
MODEL_SOURCE = "torchbenchmark"


def tolerance(q: ToleranceQuery, lists: Mapping[str, frozenset[str]]) -> Tolerance:
    """PyTorch's torchbench rule: 1e-4; 1e-3 for fp16/amp and CUDA training; 1e-2 for models its lists name; the
    yaml's large models are not checked (pass_due_to_skip); its larger-multiplier models compare with a larger RMSE
    multiplier."""
    def listed(name: str) -> bool:
        return q.name in lists.get(name, frozenset())

    larger, skip = listed("larger_multiplier"), listed("skip_large_models")
    if q.dtype in ("float16", "amp"):
        return Tolerance(1e-2 if listed("higher_fp16") else 1e-3, larger_multiplier=larger, skip=skip)
    if q.dtype == "bfloat16" and listed("higher_bf16"):
        return Tolerance(1e-2, larger_multiplier=larger, skip=skip)
    if q.mode == "training" and q.device == "cuda":
        return Tolerance(1e-3, cosine=listed("cosine"), larger_multiplier=larger, skip=skip)
    return Tolerance(1e-4, larger_multiplier=larger, skip=skip)


def installed_tree() -> Path | None:
    """The root of the importable TorchBench (found without importing it), None when there is none."""
    spec = importlib.util.find_spec("torchbenchmark")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).resolve().parent.parent


def how_to_install() -> str:
    return (f"install PyTorch's TorchBench: scripts/setup.sh VENV run (or `python -m runner.torchbench_install`) "
            f"fetches pytorch/benchmark {torchbench_install.COMMIT[:8]} from ${torchbench_install.SETTING} (a git URL, "
            f"a checkout, or a git archive of that commit; default {torchbench_install.DEFAULT_SOURCE}, or "
            f"{torchbench_install.SHARED_ARCHIVE} beside the clone when it exists)")


def check_ready(specs: list[ModelSpec]) -> str | None:
    """Why these entries cannot run here (their builder is torchbenchmark and it is not importable), else None."""
    if any(s.builder_kind == "torchbenchmark" for s in specs) and installed_tree() is None:
        return f"suite torchbench runs PyTorch's TorchBench and torchbenchmark is not importable: {how_to_install()}"
    return None


def commit_of(tree: Path) -> str:
    """The installed tree's commit, as its installer recorded it; "unknown" for a tree installed some other way."""
    marker = torchbench_install.read_marker(tree)
    return str(marker.get("commit", "unknown")) if marker else "unknown"


def missing_data(tree: Path, model: str) -> list[str]:
    """The input data a model's install.py downloads that is not in this tree."""
    return [name for name in torchbench_install.input_data(tree, model)
            if not torchbench_install.data_path(tree, name).exists()]


def versions() -> dict[str, str]:
    tree = installed_tree()
    return {"torchbench": commit_of(tree)} if tree is not None else {}


SUITE = Suite(name="torchbench", data_file=DATA_DIR / "torchbench.toml", default_builder="torchbenchmark",
              tolerance=tolerance, versions=versions, accuracy_batch_size=4, device_lists=DEVICE_LISTS,
              check_ready=check_ready, model_source=MODEL_SOURCE)
