"""Which TorchBench models download pretrained weights while they are built, read from TorchBench's own code (the
model's ``__init__.py``, parsed, never imported): what a machine without network cannot build.

The rule, from pytorch/benchmark at the pinned commit (runner/torchbench_install.COMMIT):

- a ``Model`` class derived from ``TorchVisionModel`` (torchbenchmark/util/framework/vision/model_factory.py, the
  classes TorchBench marks ``TORCHVISION_MODEL``): its constructor builds the torchvision model with the ``weights=``
  its subclass passes, or ``pretrained=True`` when none, so it always loads ImageNet weights through torch.hub;
- a call in the model's module with ``weights=`` a weights enum member (``X_Weights.Y``) or ``pretrained=True``
  (vision_maskrcnn's COCO weights, doctr's predictors);
- a call of ``torch.hub.load``, ``load_state_dict_from_url`` or a ``from_pretrained`` (a hub download by name).

What a framework class fetches by the model's name (``HuggingFaceModel``'s moondream) is not in the model's module and
is not found here; perfdash's builder still reports any such build as ``model_fail_to_load`` when it runs
(runner/suites/builders.py). Standard library only.
"""

from __future__ import annotations

import ast
from pathlib import Path

# TorchBench's base class whose constructor always loads torchvision's pretrained weights.
TORCHVISION_BASE = "TorchVisionModel"
WEIGHTS_KEYWORDS = frozenset({"weights", "weights_backbone"})
PRETRAINED_KEYWORDS = frozenset({"pretrained", "pretrained_backbone"})
DOWNLOAD_CALLS = ("torch.hub.load", "hub.load", "load_state_dict_from_url", "from_pretrained")


def model_module(tree: Path, model: str) -> Path | None:
    """The model's ``__init__.py`` where PyTorch's torchbench.py imports it from (models, then canary_models)."""
    for package in ("models", "canary_models"):
        path = tree / "torchbenchmark" / package / model / "__init__.py"
        if path.is_file():
            return path
    return None


def _name(node: ast.expr) -> str:
    return ast.unparse(node)


def _downloads(call: ast.Call) -> str | None:
    """What this call downloads, as its source text says it; None when nothing."""
    func = _name(call.func)
    if func.endswith(DOWNLOAD_CALLS):
        return f"{func}(...)"
    for kw in call.keywords:
        # A weights enum member (torchvision's X_Weights.IMAGENET1K_V1); None or a variable is no evidence.
        if kw.arg in WEIGHTS_KEYWORDS and isinstance(kw.value, ast.Attribute):
            return f"{kw.arg}={_name(kw.value)}"
        if kw.arg in PRETRAINED_KEYWORDS and isinstance(kw.value, ast.Constant) and kw.value.value is True:
            return f"{kw.arg}=True"
    return None


def pretrained_weights(tree: Path, model: str) -> str | None:
    """Why the model downloads pretrained weights while it is built (the source text that does it), else None."""
    path = model_module(tree, model)
    if path is None:
        return None
    try:
        module = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    found = [d for node in ast.walk(module) if isinstance(node, ast.Call) and (d := _downloads(node))]
    torchvision = any(isinstance(node, ast.ClassDef) and node.name == "Model"
                      and any(_name(base).endswith(TORCHVISION_BASE) for base in node.bases)
                      for node in ast.walk(module))
    if torchvision:
        return f"{TORCHVISION_BASE} ({found[0] if found else 'pretrained=True'})"
    return found[0] if found else None
