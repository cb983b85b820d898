"""Builders: turn a ``ModelSpec`` into a real model and its example inputs. Runs in the worker (imports torch).

``BUILDERS`` maps a builder kind (the part before ``:``) to a function ``(spec, ctx) -> BuiltModel``. To add a kind,
write such a function and add it to the mapping (a read-only view: edit the literal); suites then name it in their
data files.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch

from runner.suites.base import ModelSpec, SuiteError


@dataclass(frozen=True, slots=True)
class BuildContext:
    device: str
    batch_size: int
    training: bool


@dataclass(slots=True)
class BuiltModel:
    """A model and the inputs of one call: ``module(*args, **kwargs)``.

    ``loss`` maps the output to the scalar that training backpropagates; None means the mean of all output tensors.
    """

    module: torch.nn.Module
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    loss: Callable[[Any], torch.Tensor] | None = None


class ModelLoadError(RuntimeError):
    """The model cannot be built here (missing optional dependency, unknown name): ``model_fail_to_load``."""


def _classification_loss(target: torch.Tensor) -> Callable[[Any], torch.Tensor]:
    def loss(output: Any) -> torch.Tensor:
        logits = output[0] if isinstance(output, (tuple, list)) else output
        return torch.nn.functional.cross_entropy(logits.float(), target)

    return loss


def _image_model(module: torch.nn.Module, input_size: tuple[int, ...], num_classes: int | None,
                 ctx: BuildContext) -> BuiltModel:
    gen = torch.Generator().manual_seed(0)
    images = torch.randn((ctx.batch_size, *input_size), generator=gen)
    loss = None
    if ctx.training and num_classes:
        target = torch.randint(0, num_classes, (ctx.batch_size,), generator=gen)
        loss = _classification_loss(target.to(ctx.device))
    return BuiltModel(module=module, args=(images,), loss=loss)


def build_timm(spec: ModelSpec, ctx: BuildContext) -> BuiltModel:
    import timm
    from timm.data import resolve_data_config

    options = dict(spec.options)
    input_size = options.pop("input_size", None)
    kwargs = dict(options.pop("kwargs", {}))
    if options:
        raise SuiteError(f"{spec.name}: unknown timm options {sorted(options)} (expected input_size, kwargs)")
    try:
        module = timm.create_model(spec.builder_target, pretrained=False, **kwargs)
    except RuntimeError as exc:  # timm raises RuntimeError("Unknown model ...")
        raise ModelLoadError(str(exc)) from exc
    # The model's own data config, its test size in inference (e.g. 288 for resnet18), as PyTorch's timm_models.py.
    size = tuple(input_size) if input_size else tuple(
        resolve_data_config({}, model=module, use_test_size=not ctx.training)["input_size"])
    return _image_model(module, size, getattr(module, "num_classes", None), ctx)


def build_torchvision(spec: ModelSpec, ctx: BuildContext) -> BuiltModel:
    import torchvision

    options = dict(spec.options)
    input_size = tuple(options.pop("input_size", (3, 224, 224)))
    kwargs = dict(options.pop("kwargs", {}))
    try:
        module = torchvision.models.get_model(spec.builder_target, weights=None, **kwargs)
    except ValueError as exc:
        raise ModelLoadError(str(exc)) from exc
    return _image_model(module, input_size, kwargs.get("num_classes", 1000), ctx)


def build_torchbenchmark(spec: ModelSpec, ctx: BuildContext) -> BuiltModel:
    try:
        from torchbenchmark import load_model_by_name
    except ImportError as exc:
        raise ModelLoadError(f"torchbenchmark is not installed: {exc}") from exc
    cls = load_model_by_name(spec.builder_target)
    if cls is None:
        raise ModelLoadError(f"torchbenchmark has no model {spec.builder_target!r}")
    bench = cls(test="train" if ctx.training else "eval", device=ctx.device, batch_size=ctx.batch_size)
    module, example_inputs = bench.get_module()
    if isinstance(example_inputs, Mapping):
        return BuiltModel(module=module, kwargs=dict(example_inputs))
    return BuiltModel(module=module, args=tuple(example_inputs))


def build_hf(spec: ModelSpec, ctx: BuildContext) -> BuiltModel:
    """A transformers model from its config class, with token-id inputs (and labels when training)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers

    options = dict(spec.options)
    seq_len = int(options.pop("seq_len", 128))
    overrides = dict(options.pop("config", {}))
    if options:
        raise SuiteError(f"{spec.name}: unknown hf options {sorted(options)} (expected seq_len, config)")
    cls = getattr(transformers, spec.builder_target, None)
    if cls is None:
        raise ModelLoadError(f"transformers {transformers.__version__} has no class {spec.builder_target!r}")
    try:
        config = cls.config_class(**overrides)
        module = cls(config)
    except ImportError as exc:  # optional dependency of this model (e.g. sentencepiece, timm backbones)
        raise ModelLoadError(str(exc)) from exc
    vocab = int(getattr(config, "vocab_size", 0) or 0) or 1000
    # Model-specific length limits (position embeddings) cap PyTorch's sequence lengths here.
    max_positions = getattr(config, "max_position_embeddings", None)
    if isinstance(max_positions, int) and max_positions > 0:
        seq_len = min(seq_len, max_positions)
    gen = torch.Generator().manual_seed(0)
    shape = (ctx.batch_size, seq_len)
    kwargs: dict[str, Any] = {"input_ids": torch.randint(0, vocab, shape, generator=gen)}
    name = spec.builder_target
    if getattr(config, "is_encoder_decoder", False):
        kwargs["decoder_input_ids"] = torch.randint(0, vocab, shape, generator=gen)
    if ctx.training:
        if name.endswith("ForSequenceClassification"):
            kwargs["labels"] = torch.randint(0, int(getattr(config, "num_labels", 2)), (ctx.batch_size,),
                                             generator=gen)
        elif name.endswith("ForQuestionAnswering"):
            kwargs["start_positions"] = torch.randint(0, seq_len, (ctx.batch_size,), generator=gen)
            kwargs["end_positions"] = torch.randint(0, seq_len, (ctx.batch_size,), generator=gen)
        else:
            kwargs["labels"] = torch.randint(0, vocab, shape, generator=gen)
    return BuiltModel(module=module, kwargs=kwargs, loss=_hf_loss if ctx.training else None)


def _hf_loss(output: Any) -> torch.Tensor:
    loss = output.get("loss") if isinstance(output, Mapping) else None
    if loss is None:
        from runner.accuracy import scalar_loss

        return scalar_loss(output)
    return loss


def _call_target(factory: Callable[..., Any], spec: ModelSpec, ctx: BuildContext) -> BuiltModel:
    built = factory(batch_size=ctx.batch_size, training=ctx.training, **dict(spec.options))
    if isinstance(built, BuiltModel):
        return built
    if isinstance(built, tuple) and len(built) == 2 and isinstance(built[0], torch.nn.Module):
        inputs = built[1]
        if isinstance(inputs, Mapping):
            return BuiltModel(module=built[0], kwargs=dict(inputs))
        return BuiltModel(module=built[0], args=tuple(inputs))
    raise SuiteError(f"{spec.name}: {spec.builder} returned {type(built).__name__}, expected BuiltModel or "
                     "(module, inputs)")


def build_module(spec: ModelSpec, ctx: BuildContext) -> BuiltModel:
    """``module:package.mod:function``; the function takes batch_size, training and the entry's options."""
    module_name, sep, function = spec.builder_target.partition(":")
    if not sep:
        raise SuiteError(f"{spec.name}: builder {spec.builder!r} is not module:package.mod:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelLoadError(f"cannot import {module_name}: {exc}") from exc
    return _call_target(getattr(module, function), spec, ctx)


def build_py(spec: ModelSpec, ctx: BuildContext) -> BuiltModel:
    """``py:path/to/file.py:function``, the path relative to the model list's directory (for test models)."""
    path_text, sep, function = spec.builder_target.rpartition(":")
    if not sep:
        raise SuiteError(f"{spec.name}: builder {spec.builder!r} is not py:path.py:function")
    path = Path(spec.base_dir, path_text)
    loader_spec = importlib.util.spec_from_file_location(f"perfdash_models_{path.stem}", path)
    if loader_spec is None or loader_spec.loader is None or not path.is_file():
        raise ModelLoadError(f"no such file: {path}")
    module = importlib.util.module_from_spec(loader_spec)
    loader_spec.loader.exec_module(module)
    return _call_target(getattr(module, function), spec, ctx)


BUILDERS: Mapping[str, Callable[[ModelSpec, BuildContext], BuiltModel]] = MappingProxyType({
    "timm": build_timm,
    "torchvision": build_torchvision,
    "torchbenchmark": build_torchbenchmark,
    "hf": build_hf,
    "module": build_module,
    "py": build_py,
})


def build(spec: ModelSpec, ctx: BuildContext) -> BuiltModel:
    try:
        builder = BUILDERS[spec.builder_kind]
    except KeyError:
        raise SuiteError(f"{spec.name}: unknown builder kind {spec.builder_kind!r}; known: {sorted(BUILDERS)}") \
            from None
    return builder(spec, ctx)
