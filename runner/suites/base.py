"""The suite interface: what a suite is, how its model list is read, and how a model entry names its builder.

A suite is a module in ``runner/suites/`` that defines ``SUITE = Suite(...)``; the registry (``runner.suites``) finds it
by scanning the package, so a new suite needs no change to the core:

1. a data file ``runner/suites/data/<suite>.toml`` with one ``[[model]]`` table per model (see ``ModelSpec``): the
   suite's default list. Further named lists are ``data/<suite>.<list>.toml`` (``perfdash run --model-list <list>``,
   e.g. ``extended``); the default file alone holds the ``[tolerance]`` tables;
2. a module ``runner/suites/<suite>.py`` defining ``SUITE = Suite(name=..., data_file=..., default_builder=...,
   tolerance=..., versions=...)``. ``default_builder`` says how an entry without a ``builder`` is built (for example
   ``"timm"``: ``timm.create_model(name)``); new builder kinds are plain functions registered in
   ``runner.suites.builders.BUILDERS``.

Model entries (data file, or a ``--models-file`` in the same format)::

    [[model]]
    name = "BertForMaskedLM"          # the name written to the CSVs (PyTorch's names)
    batch_size = 8                    # the batch size PyTorch's list records for this model
    builder = "hf:BertForMaskedLM"    # optional: kind:target, e.g. timm:resnet18, torchbenchmark:BERT_pytorch,
                                      # hf:BertForMaskedLM, module:package.mod:function, py:relative/file.py:function
    options = { config = { hidden_size = 32 }, seq_len = 16 }   # optional, passed to the builder

    [batch_size]
    divisors = { BertForMaskedLM = 2 }  # optional: PyTorch's per-model divisors (its suite yaml)
    training = { densenet121 = 4 }      # optional: PyTorch's per-model batch sizes in training (torchbench.yaml)
    accuracy_max = { pytorch_unet = 2 }  # optional: the most a model's accuracy check uses (torchbench.yaml)

A model's default batch size is PyTorch's rule: the recorded size divided by the model's divisor, rounded down, at
least 1 (``default_batch_size``), or its ``training`` size in training; ``--batch-size`` overrides it for every
model. A list without a ``[batch_size]`` table (e.g. a ``--models-file`` of tiny test models) runs its sizes as
written.

This module is torch-free: the parent process reads model lists without importing torch.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

DATA_DIR = Path(__file__).parent / "data"
DEFAULT_MODEL_LIST = "default"


class SuiteError(ValueError):
    """A suite or model list that cannot be used; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One model entry of a suite's list."""

    name: str
    batch_size: int
    builder: str
    options: Mapping[str, Any] = field(default_factory=dict)
    base_dir: str = ""  # the directory of the list it came from, to resolve ``py:`` paths
    training_batch_size: int | None = None  # the default in training when the suite sets one (torchbench.yaml)
    # the most the accuracy check may use (torchbench.yaml accuracy.max_batch_size: pytorch_unet 2, for memory)
    accuracy_max_batch_size: int | None = None

    def __post_init__(self) -> None:
        if not self.name or any(c in self.name for c in ",\n\r\""):
            raise SuiteError(f"model name {self.name!r} is empty or holds a character a CSV cell cannot")
        sizes = (self.batch_size, self.training_batch_size, self.accuracy_max_batch_size)
        if any(size is not None and size <= 0 for size in sizes):
            raise SuiteError(f"{self.name}: batch sizes must be > 0, got {', '.join(map(str, sizes))}")
        kind, sep, target = self.builder.partition(":")
        if not sep or not kind or not target:
            raise SuiteError(f"{self.name}: builder {self.builder!r} is not 'kind:target'")

    @property
    def builder_kind(self) -> str:
        return self.builder.partition(":")[0]

    @property
    def builder_target(self) -> str:
        return self.builder.partition(":")[2]

    def default_batch_size(self, mode: str) -> int:
        return self.training_batch_size if mode == "training" and self.training_batch_size else self.batch_size

    def accuracy_batch_size(self, wanted: int) -> int:
        """PyTorch's torchbench.py load_model with --accuracy: the wanted size, at most the model's cap."""
        return min(wanted, self.accuracy_max_batch_size) if self.accuracy_max_batch_size else wanted

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "batch_size": self.batch_size, "builder": self.builder,
                "options": dict(self.options), "base_dir": self.base_dir,
                "training_batch_size": self.training_batch_size,
                "accuracy_max_batch_size": self.accuracy_max_batch_size}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelSpec:
        return cls(name=data["name"], batch_size=int(data["batch_size"]), builder=data["builder"],
                   options=dict(data.get("options") or {}), base_dir=data.get("base_dir", ""),
                   training_batch_size=data.get("training_batch_size"),
                   accuracy_max_batch_size=data.get("accuracy_max_batch_size"))


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How the accuracy check compares a model's results (runner.accuracy), as PyTorch's harness does for it."""

    tol: float
    cosine: bool = False
    larger_multiplier: bool = False  # PyTorch's use_larger_multiplier_for_smaller_tensor
    skip: bool = False  # not checked: PyTorch records pass_due_to_skip (e.g. models too large for the check)


@dataclass(frozen=True, slots=True)
class ToleranceQuery:
    """What PyTorch's per-suite tolerance rules look at."""

    name: str
    mode: str  # inference | training
    device: str
    dtype: str  # float32 | bfloat16 | float16 | amp
    freezing: bool = False
    max_autotune: bool = False


# (query, the suite's named model lists from the data file's [tolerance] table) -> tolerance
ToleranceFn = Callable[[ToleranceQuery, Mapping[str, frozenset[str]]], Tolerance]


# The library each builder kind imports (runner.suites.builders), for the fork server to import once.
BUILDER_LIBRARIES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "timm": ("timm",), "torchvision": ("torchvision",), "hf": ("transformers",), "torchbenchmark": ("torchbenchmark",),
})


def _no_versions() -> dict[str, str]:
    return {}


@dataclass(frozen=True, slots=True)
class Suite:
    name: str
    data_file: Path
    default_builder: str  # builder kind for entries without ``builder``; the model name becomes the target
    tolerance: ToleranceFn
    versions: Callable[[], dict[str, str]] = _no_versions  # library versions for the manifest (may import them)
    # The named list that is the default on a device (torchbench: PyTorch's GPU list on cuda); others: the data file.
    device_lists: Mapping[str, str] = field(default_factory=dict)
    # Optional hook: why these entries cannot run on this machine (a library the suite needs is missing), else None;
    # `perfdash run` stops with it before any model.
    check_ready: Callable[[list[ModelSpec]], str | None] | None = None
    # Where the suite's own lists' models come from when that is part of the series (RunConfig.model_source).
    model_source: str | None = None
    # Optional hook: (model list, --batch-size) -> the entries to run, e.g. one per batch size (hf_vision).
    expand_models: Callable[[list[ModelSpec], int | None], list[ModelSpec]] | None = None
    # Libraries the suite's builders import lazily that the fork server should import once per run.
    libraries: tuple[str, ...] = ()
    # The batch size PyTorch's harness checks accuracy at when none is given (common.py run() with --accuracy);
    # None: the model's own batch size.
    accuracy_batch_size: int | None = None

    def preload(self, specs: list[ModelSpec]) -> list[str]:
        """What the fork server (runner.zygote) imports before the first worker: the libraries of these entries'
        builders (``py:`` files are the tests' own and are left to the worker)."""
        names = list(self.libraries)
        for spec in specs:
            if spec.builder_kind == "module":
                names.append(spec.builder_target.partition(":")[0])
            else:
                names.extend(BUILDER_LIBRARIES.get(spec.builder_kind, ()))
        return list(dict.fromkeys(names))

    def tolerance_for(self, query: ToleranceQuery) -> Tolerance:
        return self.tolerance(query, load_tolerance_lists(self.data_file))

    def model_lists(self) -> dict[str, Path]:
        """The suite's named lists: ``default`` (its data file) and every ``<suite>.<list>.toml`` beside it."""
        lists = {DEFAULT_MODEL_LIST: self.data_file}
        for path in sorted(self.data_file.parent.glob(f"{self.data_file.stem}.*.toml")):
            lists[path.name.removeprefix(f"{self.data_file.stem}.").removesuffix(".toml")] = path
        return lists

    def models(self, models_file: Path | None = None, model_list: str = DEFAULT_MODEL_LIST,
               device: str | None = None) -> list[ModelSpec]:
        """One of the suite's named lists (the default one: the device's, ``device_lists``), or a list in the same
        format given with ``--models-file``."""
        if models_file is not None:
            path = models_file
        else:
            if model_list == DEFAULT_MODEL_LIST and device is not None:
                model_list = self.device_lists.get(device, model_list)
            lists = self.model_lists()
            if model_list not in lists:
                raise SuiteError(f"suite {self.name} has no model list {model_list!r}; "
                                 f"available: {', '.join(lists)}")
            path = lists[model_list]
        return load_model_list(path, self.default_builder)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read model list: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{path}: not valid TOML: {exc}") from None
    unknown = set(data) - {"model", "tolerance", "batch_size"}
    if unknown:
        raise SuiteError(f"{path}: unknown top-level keys {sorted(unknown)}; "
                         "expected [[model]], [tolerance] and [batch_size]")
    return data


def default_batch_size(recorded: int, divisor: int | None) -> int:
    """PyTorch's harness rule (huggingface.py, timm_models.py): the recorded size divided by the model's divisor,
    truncated, never below 1."""
    return recorded if divisor is None else max(int(recorded / divisor), 1)


@dataclass(frozen=True, slots=True)
class BatchSizeRules:
    """A list's ``[batch_size]`` table: ``divisors`` (model -> divisor of its batch size, huggingface/timm yaml),
    ``training`` (model -> its batch size in training, torchbench.yaml) and ``accuracy_max`` (model -> the most its
    accuracy check uses, torchbench.yaml accuracy.max_batch_size)."""

    divisors: Mapping[str, int] = field(default_factory=dict)
    training: Mapping[str, int] = field(default_factory=dict)
    accuracy_max: Mapping[str, int] = field(default_factory=dict)


def load_batch_size_rules(path: Path, data: Mapping[str, Any] | None = None) -> BatchSizeRules:
    """The ``[batch_size]`` table of a list; every value a positive integer."""
    table = (_read_toml(path) if data is None else data).get("batch_size", {})
    keys = ("divisors", "training", "accuracy_max")
    if not isinstance(table, dict) or set(table) - set(keys):
        raise SuiteError(f"{path}: [batch_size] may only hold 'divisors', 'training' and 'accuracy_max' "
                         "(model = N tables)")
    rules: dict[str, dict[str, int]] = {}
    for key in keys:
        values = table.get(key, {})
        if not isinstance(values, dict):
            raise SuiteError(f"{path}: [batch_size] {key} must map model names to integers")
        for name, value in values.items():
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise SuiteError(f"{path}: [batch_size] {key} of {name!r} must be a positive integer, got {value!r}")
        rules[key] = dict(values)
    return BatchSizeRules(**rules)


def load_tolerance_lists(path: Path) -> dict[str, frozenset[str]]:
    """The ``[tolerance]`` table: list name -> model names (e.g. ``higher = ["inception_v3"]``)."""
    table = _read_toml(path).get("tolerance", {})
    if not isinstance(table, dict) or not all(isinstance(v, list) for v in table.values()):
        raise SuiteError(f"{path}: [tolerance] must map list names to lists of model names")
    return {key: frozenset(map(str, value)) for key, value in table.items()}


def load_model_list(path: Path, default_builder: str) -> list[ModelSpec]:
    """Read a TOML model list, each entry at its default batch size; names must be unique. Raises SuiteError with the
    file and entry on any mistake."""
    data = _read_toml(path)
    rules = load_batch_size_rules(path, data)
    entries = data.get("model")
    if not isinstance(entries, list) or not entries:
        raise SuiteError(f"{path}: expected one or more [[model]] tables")
    specs: list[ModelSpec] = []
    seen: set[str] = set()
    allowed = {"name", "batch_size", "builder", "options"}
    for index, entry in enumerate(entries, start=1):
        where = f"{path}: model #{index}"
        if not isinstance(entry, dict):
            raise SuiteError(f"{where}: not a table")
        unknown = set(entry) - allowed
        if unknown:
            raise SuiteError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}")
        name = entry.get("name")
        batch_size = entry.get("batch_size")
        if not isinstance(name, str):
            raise SuiteError(f"{where}: 'name' (a string) is required")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise SuiteError(f"{where} ({name}): 'batch_size' (a positive integer) is required")
        if name in seen:
            raise SuiteError(f"{where}: duplicate model name {name!r}")
        seen.add(name)
        builder = entry.get("builder", f"{default_builder}:{name}")
        options = entry.get("options", {})
        if not isinstance(builder, str) or not isinstance(options, dict):
            raise SuiteError(f"{where} ({name}): 'builder' must be a string and 'options' a table")
        try:
            specs.append(ModelSpec(name=name, batch_size=default_batch_size(batch_size, rules.divisors.get(name)),
                                   builder=builder, options=options, base_dir=str(path.resolve().parent),
                                   training_batch_size=rules.training.get(name),
                                   accuracy_max_batch_size=rules.accuracy_max.get(name)))
        except SuiteError as exc:
            raise SuiteError(f"{where}: {exc}") from None
    return specs
