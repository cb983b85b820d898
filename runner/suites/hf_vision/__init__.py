"""The hf_vision suite: the Hugging Face vision latency benchmark (twelve transformers vision models, eager vs
torch.compile at batch sizes 1, 4 and 16). Torch-free: the parent reads the list; ``models`` builds in the worker.

The result contract holds one row per model name, and a failure row (OOM) carries batch size 0, so each model's batch
sizes are separate rows named ``<name>_bs<N>`` (``row_name`` / ``parse_row_name``): an OOM at 16 stays an OOM *at
16* and the other sizes go on in their own workers.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata

from perfdash.vision import BATCH_SIZES, MODELS_FILE, RowName, parse_row_name, row_name
from runner.suites.base import ModelSpec, Suite, SuiteError, Tolerance, ToleranceQuery

# The model list is the contract's (perfdash/data/hf_vision.toml): the Vision page reads the same one.
DATA_FILE = MODELS_FILE
__all__ = ["BATCH_SIZES", "DATA_FILE", "SUITE", "RowName", "expand", "parse_row_name", "row_name"]


def expand(models: list[ModelSpec], batch_size: int | None) -> list[ModelSpec]:
    """One entry per model and batch size (model-major, as the publication's table reads)."""
    sizes = (batch_size,) if batch_size is not None else BATCH_SIZES
    out: list[ModelSpec] = []
    for spec in models:
        if parse_row_name(spec.name) is not None:
            raise SuiteError(f"hf_vision model name {spec.name!r} must not end in _bs<N> (the suite adds it)")
        out.extend(ModelSpec(name=row_name(spec.name, size), batch_size=size, builder=spec.builder,
                             options=spec.options, base_dir=spec.base_dir) for size in sizes)
    return out


def tolerance(q: ToleranceQuery, lists: Mapping[str, frozenset[str]]) -> Tolerance:
    """The huggingface suite's inference rule (1e-3; 4e-3 with freezing on CPU, whose constant folding reorders
    float sums), cosine similarity for the rows the data file lists."""
    parsed = parse_row_name(q.name)
    model = parsed.model if parsed else q.name
    tol = 4e-3 if q.freezing else 1e-3
    return Tolerance(tol, cosine=model in lists.get("cosine", frozenset()))


def versions() -> dict[str, str]:
    return {"transformers": metadata.version("transformers"), "timm": metadata.version("timm")}


SUITE = Suite(name="hf_vision", data_file=DATA_FILE, default_builder="module", tolerance=tolerance,
              versions=versions, expand_models=expand, libraries=("transformers",))
