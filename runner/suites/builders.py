"""Builders: turn a ``ModelSpec`` into a real model and its example inputs. Runs in the worker (imports torch).

``BUILDERS`` maps a builder kind (the part before ``:``) to a function ``(spec, ctx) -> BuiltModel``. To add a kind,
write such a function and add it to the mapping (a read-only view: edit the literal); suites then name it in their
data files.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import urllib.error
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
    # No loss of its own: training backpropagates the mean of the output, as PyTorch's timm compute_loss
    # (reduce_to_scalar_loss) does, not a classification loss against targets.
    size = tuple(input_size) if input_size else tuple(
        resolve_data_config({}, model=module, use_test_size=not ctx.training)["input_size"])
    return BuiltModel(module=module, args=(timm_images(ctx.batch_size, size),))


# The seed PyTorch's harness resets to before building inputs (torch._dynamo.testing.reset_rng_state).
PYTORCH_SEED = 1337


def timm_images(batch_size: int, input_size: tuple[int, ...]) -> torch.Tensor:
    """A batch as PyTorch's timm_models.py ``load_model`` makes it: random integers in [0, 256) drawn after seeding
    1337, standardised by the batch's own mean and standard deviation (the same values as seeding the default
    generator, without touching it). Both sides of bench/pt_parity.py then time and check the same tensor."""
    gen = torch.Generator().manual_seed(PYTORCH_SEED)
    pixels = torch.randint(256, size=(batch_size, *input_size), generator=gen).to(torch.float32)
    return (pixels - pixels.mean()) / pixels.std()


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
    """A model of PyTorch's TorchBench, built as PyTorch's torchbench.py ``load_model`` builds it: the benchmark class
    at the entry's batch size (TorchBench's own for ``keep_batch_size``, torchbench.yaml's dont_change_batch_size, and
    for a model whose class sets ``ALLOW_CUSTOMIZE_BSIZE = False``),
    ``get_module()``, train or eval mode. A model whose install.py downloads input data that is not here stops at once,
    naming the data, before its module is imported."""
    from runner import torchbench_install
    from runner.suites.torchbench import installed_tree, missing_data

    tree = installed_tree()
    if tree is None:
        raise ModelLoadError("torchbenchmark is not importable (scripts/setup.sh installs PyTorch's TorchBench)")
    missing = missing_data(tree, spec.builder_target)
    if missing:
        where = ", ".join(str(torchbench_install.data_path(tree, name)) for name in missing)
        raise ModelLoadError(f"needs TorchBench input data {', '.join(missing)} (downloaded by its install.py; not at "
                             f"{where}): install TorchBench from a source with network, or put the data there")
    options = dict(spec.options)
    keep_batch_size = bool(options.pop("keep_batch_size", False))
    if options:
        raise SuiteError(f"{spec.name}: unknown torchbenchmark options {sorted(options)} (expected keep_batch_size)")
    cls = _torchbenchmark_class(spec.builder_target)
    # A model that sets ALLOW_CUSTOMIZE_BSIZE = False refuses any size but its own: PyTorch passes it none.
    fixed_size = keep_batch_size or not getattr(cls, "ALLOW_CUSTOMIZE_BSIZE", True)
    try:
        bench = cls(test="train" if ctx.training else "eval", device=ctx.device,
                    batch_size=None if fixed_size else ctx.batch_size)
    except OSError as exc:
        if not _download_failed(exc):
            raise
        # TorchBench's torchvision models download pretrained weights while they are built (torch.hub), moondream
        # its weights from the Hugging Face hub; PyTorch's CI machines have them cached.
        raise ModelLoadError(f"downloads pretrained weights while TorchBench builds it (torch.hub or the Hugging "
                             f"Face hub) and cannot here: {type(exc).__name__}: {str(exc).splitlines()[0]}") from exc
    module, example_inputs = bench.get_module()
    if isinstance(example_inputs, Mapping):
        return BuiltModel(module=module, kwargs=dict(example_inputs))
    return BuiltModel(module=module, args=tuple(example_inputs))


def _download_failed(exc: OSError) -> bool:
    """A download that could not reach its server: urllib's (torch.hub) or the Hugging Face hub's, which transformers
    turns into an OSError naming huggingface.co."""
    return isinstance(exc, urllib.error.URLError) or "huggingface.co" in str(exc)


def _torchbenchmark_class(name: str) -> Any:
    """The model's ``Model`` class from torchbenchmark.models (or canary_models), found as PyTorch's torchbench.py
    finds it."""
    for candidate in (f"torchbenchmark.models.{name}", f"torchbenchmark.canary_models.{name}"):
        try:
            module = importlib.import_module(candidate)
        except ModuleNotFoundError as exc:
            if exc.name == candidate:
                continue
            raise ModelLoadError(f"{name} needs the module {exc.name!r}, not installed here (its TorchBench "
                                 "requirements.txt)") from exc
        cls = getattr(module, "Model", None)
        if cls is None:
            raise ModelLoadError(f"{candidate} defines no Model")
        return cls
    raise ModelLoadError(f"torchbenchmark has no model {name!r}")


def build_hf(spec: ModelSpec, ctx: BuildContext) -> BuiltModel:
    """A transformers model from its config class, built and fed as PyTorch's huggingface runner does
    (benchmarks/dynamo/huggingface.py: ``_get_model_cls_and_config``, ``load_model``, ``generate_inputs_for_model``).

    The config's own defaults, with ``pad_token_id = 0`` for the classes PyTorch sets it on, the KV cache off
    (``use_cache = False``), and inputs with the loss arguments (``labels`` ...) in inference too, so the loss is
    part of the measured graph. Options: ``config`` overrides config fields (tiny test models), ``seq_len`` the
    sequence length PyTorch's ``get_sequence_length`` gives the model's name.
    """
    cls, config, seq_len = _hf_class_and_config(spec)
    try:
        module = cls(config)
    except ImportError as exc:  # optional dependency of this model (e.g. sentencepiece, timm backbones)
        raise ModelLoadError(str(exc)) from exc
    if hasattr(module.config, "use_cache"):
        module.config.use_cache = False
    # Model-specific length limits (position embeddings) cap the sequence length of tiny test configs; PyTorch's
    # lengths fit every default config of its list.
    max_positions = getattr(module.config, "max_position_embeddings", None)
    if isinstance(max_positions, int) and max_positions > 0:
        seq_len = min(seq_len, max_positions)
    kwargs = hf_inputs(spec.name, cls.__name__, module.config, ctx.batch_size, seq_len,
                       torch.Generator().manual_seed(0))
    return BuiltModel(module=module, kwargs=kwargs, loss=_hf_loss)


def _hf_class_and_config(spec: ModelSpec) -> tuple[Any, Any, int]:
    """The transformers class of a model entry, its config as build_hf builds the model from it, and the input
    sequence length."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers

    options = dict(spec.options)
    seq_len = int(options.pop("seq_len", hf_sequence_length(spec.name)))
    overrides = dict(options.pop("config", {}))
    if options:
        raise SuiteError(f"{spec.name}: unknown hf options {sorted(options)} (expected seq_len, config)")
    cls = getattr(transformers, spec.builder_target, None)
    if cls is None:
        raise ModelLoadError(f"transformers {transformers.__version__} has no class {spec.builder_target!r}")
    try:
        config = cls.config_class(**overrides)
    except ImportError as exc:
        raise ModelLoadError(str(exc)) from exc
    if cls.__name__ in _PAD_TOKEN_ZERO or cls.__name__.startswith(("Roberta", "Marian")):
        config.pad_token_id = 0  # PyTorch: some models need a pad token to handle batch sizes above 1
    return cls, config, seq_len


def hf_weight_bytes(spec: ModelSpec) -> int:
    """Bytes of the parameters and buffers of the model build_hf builds for ``spec``, counted on the meta device:
    nothing is allocated, so a model too large for the machine can be told before it is built."""
    cls, config, _ = _hf_class_and_config(spec)
    try:
        with torch.device("meta"):
            module = cls(config)
    except ImportError as exc:
        raise ModelLoadError(str(exc)) from exc
    return sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))


# Classes PyTorch builds with config.pad_token_id = 0 (besides every Roberta* and Marian* class).
_PAD_TOKEN_ZERO = frozenset({"GPT2ForSequenceClassification", "GPTNeoForSequenceClassification",
                             "GPTJForSequenceClassification"})
# Classes PyTorch feeds decoder_input_ids (besides names starting T5, M2M100, MT5): the others make theirs from labels.
_DECODER_INPUT_CLASSES = frozenset({"BlenderbotModel", "BlenderbotSmallModel", "BlenderbotForConditionalGeneration",
                                    "PegasusModel", "MarianModel", "MarianMTModel"})
# PyTorch's EXTRA_MODELS (built from hub configs there): labels are token ids like a language model's.
_EXTRA_MODELS = frozenset({"AllenaiLongformerBase", "Reformer", "T5Small", "DistillGPT2", "GoogleFnet",
                           "YituTechConvBert"})
_NUM_CHOICES = 3
_NUM_VISUAL_FEATURES = 42


def hf_sequence_length(name: str) -> int:
    """PyTorch's sequence length for a huggingface model name (huggingface.py ``get_sequence_length``)."""
    if name.startswith("Blenderbot"):
        return 128
    if name.startswith(("GPT2", "Bart", "T5", "PLBart", "MBart")) or name in ("AllenaiLongformerBase", "BigBird"):
        return 1024
    if name.startswith("OPT"):
        return 2048
    if "Reformer" in name:
        return 4096
    if name.startswith(("Albert", "Deberta", "Layout", "Electra", "XLNet", "MegatronBert", "Bert", "Roberta")) \
            or name in ("DistillGPT2", "GoogleFnet", "YituTechConvBert"):
        return 512
    if name in "TrOCRForCausalLM":  # PyTorch tests `in` a string here, so its substrings match too
        return 256
    if name.startswith("MobileBert"):
        return 128
    if name.startswith("Wav2Vec2"):
        return 10000
    return 128


def hf_inputs(name: str, class_name: str, config: Any, batch_size: int, seq_len: int,
              gen: torch.Generator) -> dict[str, Any]:
    """One call's keyword inputs, with the loss arguments, for PyTorch's model ``name`` of class ``class_name``
    (huggingface.py ``generate_inputs_for_model`` with ``include_loss_args=True``). Raises ModelLoadError for a name
    none of PyTorch's rules gives labels to, as PyTorch reports such a model as model_fail_to_load."""
    vocab = int(config.vocab_size)
    bs = batch_size

    def ids(high: int, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randint(0, high, shape, generator=gen, dtype=torch.int64)

    if name.startswith("Wav2Vec2"):
        return {"input_values": torch.randn((bs, seq_len), generator=gen), "attention_mask": ids(2, (bs, seq_len)),
                "labels": ids(vocab, (bs, 100))}
    if name.endswith("MultipleChoice"):
        input_ids = ids(vocab, (bs, _NUM_CHOICES, seq_len))
    elif name.startswith("Roberta"):
        input_ids = ids(1, (bs, seq_len))  # all zeros: the pad token PyTorch sets, so positions stay in range
    else:
        input_ids = ids(vocab, (bs, seq_len))
    if "Bart" in name:
        input_ids[:, -1] = config.eos_token_id
    inputs: dict[str, Any] = {"input_ids": input_ids}
    if name.startswith(("T5", "M2M100", "MT5")) or class_name in _DECODER_INPUT_CLASSES:
        inputs["decoder_input_ids"] = input_ids
    if name.startswith("Lxmert"):
        inputs["visual_feats"] = torch.randn((bs, _NUM_VISUAL_FEATURES, config.visual_feat_dim), generator=gen)
        inputs["visual_pos"] = torch.randn((bs, _NUM_VISUAL_FEATURES, config.visual_pos_dim), generator=gen)
    inputs.update(_hf_loss_inputs(name, class_name, config, bs, seq_len, ids))
    return inputs


def _hf_loss_inputs(name: str, class_name: str, config: Any, bs: int, seq_len: int,
                    ids: Callable[[int, tuple[int, ...]], torch.Tensor]) -> dict[str, torch.Tensor]:
    vocab = int(config.vocab_size)
    if name.endswith("PreTraining"):
        if class_name in ("ElectraForPreTraining", "LxmertForPreTraining"):
            return {"labels": ids(1, (bs, seq_len))}
        # PyTorch wraps these labels in a 1-tuple, which no model of its list reaches; a tensor is what models take.
        label_name = "sentence_order_label" if class_name == "AlbertForPreTraining" else "next_sentence_label"
        return {"labels": ids(vocab, (bs, seq_len)), label_name: ids(1, (bs,))}
    if name.endswith("QuestionAnswering"):
        return {"start_positions": ids(seq_len, (bs,)), "end_positions": ids(seq_len, (bs,))}
    if name.endswith(("MaskedLM", "HeadModel", "CausalLM", "DoubleHeadsModel")):
        return {"labels": ids(vocab, (bs, seq_len))}
    if name.endswith("TokenClassification"):
        return {"labels": ids(config.num_labels - 1, (bs, seq_len))}
    if name.endswith("MultipleChoice"):
        return {"labels": ids(_NUM_CHOICES, (bs,))}
    if name.endswith("SequenceClassification"):
        return {"labels": ids(config.num_labels - 1, (bs,))}
    if name.endswith("NextSentencePrediction"):
        return {"labels": ids(1, (bs,))}
    if name.endswith("ForConditionalGeneration"):
        return {"labels": ids(vocab - 1, (bs, seq_len))}
    if name in _EXTRA_MODELS:
        return {"labels": ids(vocab, (bs, seq_len))}
    raise ModelLoadError(f"{name}: PyTorch's huggingface runner has no loss inputs for this model name")


def _hf_loss(output: Any) -> torch.Tensor:
    """PyTorch's compute_loss: the first output, which is the loss when the inputs carry labels."""
    return output[0]


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
