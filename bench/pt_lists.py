"""PyTorch's model lists as a copy of its harness (benchmarks/dynamo, never part of this repository) has them, and a
seeded sample of them: which models bench/pt_parity.py compares when it is given ``--sample-suite``.

What is read from the copy (pytorch/pytorch's benchmarks/dynamo; file formats as of common.py 00391a7e,
timm_models.py 0260ed17, huggingface.py 032cbcbb):

- ``timm_models_list.txt``: ``NAME BATCH`` per line (timm_models.py splits on a space);
- ``huggingface_models_list.txt``: ``NAME,BATCH`` per line (huggingface.py splits on a comma); names with a ``/``
  are the hub LLMs that huggingface_llm_models.py times with ``generate()`` (perfdash does not, and PyTorch skips
  them on CPU), so they are not candidates;
- ``torchbench_models_list_cpu.txt`` (on CPU) and ``torchbench_models_list.txt`` (on CUDA): ``NAME,BATCH`` per line,
  PyTorch's CPU and GPU TorchBench lists (as synced into pytorch/benchmark's userbenchmark/dynamo/dynamobench at
  0e83c440; torchbench.py itself lists TorchBench's models, its CI passes these lists);
- ``<suite>.yaml``'s ``skip.all`` and ``skip.device.<device>``: models PyTorch's runner itself does not run there.

Torch-free; pyyaml (the ``bench`` extra) only when a yaml file is there.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

LIST_FILES = {"timm_models": "timm_models_list.txt", "huggingface": "huggingface_models_list.txt",
              "torchbench": "torchbench_models_list.txt"}
# A device whose list is a file of its own: PyTorch's CPU TorchBench list.
DEVICE_LIST_FILES = {("torchbench", "cpu"): "torchbench_models_list_cpu.txt"}
YAML_FILES = {"timm_models": "timm_models.yaml", "huggingface": "huggingface.yaml", "torchbench": "torchbench.yaml"}
# The suites whose lists separate name and batch size by a comma (timm: whitespace).
COMMA_LISTS = frozenset({"huggingface", "torchbench"})
MIN_SAMPLE = 15  # issue 32: at least 15 models per suite and run


class ListError(ValueError):
    """The harness copy lacks the list, or a sample cannot be drawn; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class ListedModel:
    name: str
    batch_size: int  # the size PyTorch's list records (before its divisors)


def parse_models_list(text: str, suite: str) -> list[ListedModel]:
    """The entries of a ``*_models_list.txt``, in file order (blank lines and ``#`` comments skipped)."""
    sep = "," if suite in COMMA_LISTS else None  # timm: whitespace, as `line.split(" ")` in timm_models.py
    models = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(sep)]
        if len(parts) != 2 or not parts[1].isdigit():
            raise ListError(f"{suite} list line {number}: {raw!r} is not NAME{sep or ' '}BATCH")
        models.append(ListedModel(parts[0], int(parts[1])))
    return models


def skipped(config: dict, device: str) -> set[str]:
    """Names a suite yaml (already parsed) tells PyTorch's runner to skip on ``device``: ``skip.all`` and
    ``skip.device.<device>`` (lists, possibly nested, as load_yaml_file flattens them)."""
    skip = config.get("skip") or {}

    def flat(items: Iterable | None) -> set[str]:
        out: set[str] = set()
        for item in items or ():
            out |= flat(item) if isinstance(item, list) else {str(item)}
        return out

    return flat(skip.get("all")) | flat((skip.get("device") or {}).get(device))


def read_list(pytorch_dir: Path, suite: str, device: str = "cpu") -> list[ListedModel]:
    if suite not in LIST_FILES:
        raise ListError(f"no model list for suite {suite!r} in PyTorch's harness; sample one of {sorted(LIST_FILES)}")
    path = pytorch_dir / DEVICE_LIST_FILES.get((suite, device), LIST_FILES[suite])
    if not path.is_file():
        raise ListError(f"{path}: not there (want a copy of PyTorch's benchmarks/dynamo)")
    return parse_models_list(path.read_text(), suite)


def read_skips(pytorch_dir: Path, suite: str, device: str) -> set[str]:
    path = pytorch_dir / YAML_FILES.get(suite, f"{suite}.yaml")
    if not path.is_file():
        return set()
    import yaml

    return skipped(yaml.safe_load(path.read_text()) or {}, device)


def candidates(listed: list[ListedModel], skips: set[str], exclude: Iterable[str] = ()) -> list[str]:
    """The names a sample is drawn from: the list less PyTorch's skips there, the hub LLMs and ``exclude``, sorted
    (so the draw depends on the list's content and the seed, not on its line order)."""
    left_out = skips | set(exclude)
    return sorted({m.name for m in listed if "/" not in m.name and m.name not in left_out})


def sample(names: list[str], n: int, seed: int) -> list[str]:
    """``n`` names drawn without replacement by ``random.Random(seed)``, sorted; all of them if there are fewer."""
    if n < 1:
        raise ListError("the sample size must be at least 1")
    pool = sorted(names)
    return sorted(random.Random(seed).sample(pool, min(n, len(pool))))


def sample_suite(pytorch_dir: Path, suite: str, n: int, seed: int, device: str = "cpu",
                 exclude: Iterable[str] = ()) -> list[str]:
    """The seeded sample of ``suite`` from the harness copy, never drawing ``exclude`` (the models already tuned on)."""
    return sample(candidates(read_list(pytorch_dir, suite, device), read_skips(pytorch_dir, suite, device), exclude),
                  n, seed)
