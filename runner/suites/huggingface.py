"""PyTorch's huggingface suite: transformers models built from their config classes (no hub downloads)."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata

from runner.suites.base import DATA_DIR, Suite, Tolerance, ToleranceQuery

# huggingface.py use_larger_multiplier_for_smaller_tensor: models whose small outputs (a scalar loss) get a larger
# RMSE multiplier.
LARGER_MULTIPLIER_MODELS = frozenset({"GPT2ForSequenceClassification", "BertForMaskedLM"})


def tolerance(q: ToleranceQuery, lists: Mapping[str, frozenset[str]]) -> Tolerance:
    """PyTorch's huggingface rule: 1e-2 training (2e-2 listed, or listed for max-autotune), 1e-3 inference (4e-3 /
    5e-3 on CPU listed); the yaml's large models are not checked (pass_due_to_skip)."""
    def listed(name: str) -> bool:
        return q.name in lists.get(name, frozenset())

    larger, skip = q.name in LARGER_MULTIPLIER_MODELS, listed("skip_large_models")
    if q.mode == "training":
        higher = listed("higher_training") or (q.max_autotune and listed("higher_max_autotune_training"))
        return Tolerance(2e-2 if higher else 1e-2, larger_multiplier=larger, skip=skip)
    if q.device == "cpu" and listed("higher_inference_cpu"):
        return Tolerance(5e-3, larger_multiplier=larger, skip=skip)
    if listed("higher_inference"):
        return Tolerance(4e-3, larger_multiplier=larger, skip=skip)
    return Tolerance(1e-3, larger_multiplier=larger, skip=skip)


def versions() -> dict[str, str]:
    return {"transformers": metadata.version("transformers")}


SUITE = Suite(name="huggingface", data_file=DATA_DIR / "huggingface.toml", default_builder="hf",
              tolerance=tolerance, versions=versions, accuracy_batch_size=1)
