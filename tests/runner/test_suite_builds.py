"""The suites' models build from their own configs, offline, with the inputs PyTorch's harness gives them.

Builds models on the meta device (no memory, no weights) or one small real model; compiles nothing.
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch

from runner.suites import ModelSpec, get_suite
from runner.suites.builders import BuildContext, build

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing may come from the hub: a model that needed a download fails here instead of fetching it.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.mark.parametrize("training, side", [(False, 288), (True, 224)])
def test_a_timm_model_gets_its_own_test_input_size_in_inference(training: bool, side: int) -> None:
    # resnet18's pretrained config: input 224, test input 288 (timm_models.py resolves with use_test_size=not training).
    built = build(ModelSpec("resnet18", 2, "timm:resnet18"), BuildContext(device="cpu", batch_size=2,
                                                                          training=training))
    (images,) = built.args
    assert tuple(images.shape) == (2, 3, side, side)
    assert built.module(images).shape == (2, 1000)


def test_an_explicit_input_size_still_wins() -> None:
    spec = ModelSpec("resnet18", 1, "timm:resnet18", options={"input_size": [3, 32, 32]})
    (images,) = build(spec, BuildContext(device="cpu", batch_size=1, training=False)).args
    assert tuple(images.shape) == (1, 3, 32, 32)


def test_timm_inputs_and_loss_are_pytorchs() -> None:
    # timm_models.py load_model: after reset_rng_state (seed 1337) on the default generator, randint(256) pixels as
    # float32, standardised by the batch's mean and std; compute_loss is the mean of the output (no targets).
    spec = ModelSpec("resnet18", 1, "timm:resnet18", options={"input_size": [3, 8, 8]})
    built = build(spec, BuildContext(device="cpu", batch_size=3, training=True))
    (images,) = built.args
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(1337)
        pixels = torch.randint(256, size=(3, 3, 8, 8)).to(torch.float32)
    finally:
        torch.random.set_rng_state(state)
    assert torch.equal(images, (pixels - pixels.mean()) / pixels.std())
    assert built.loss is None  # the runner's default: the mean of the output, PyTorch's reduce_to_scalar_loss


def _timm_on_meta(name: str) -> torch.nn.Module:
    import timm

    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return timm.create_model(name, pretrained=False)


def test_every_timm_model_builds_from_its_config_offline() -> None:
    from timm.data import resolve_data_config

    sides = {}
    for spec in get_suite("timm_models").models(model_list="extended"):
        module = _timm_on_meta(spec.builder_target)
        sides[spec.name] = resolve_data_config({}, model=module, use_test_size=True)["input_size"][-1]
    # The tags of PyTorch's current list pick their own pretrained configs (sizes from timm's configs).
    assert sides["convnextv2_nano.fcmae_ft_in22k_in1k"] == 288
    assert sides["vit_base_patch14_dinov2.lvd142m"] == 518
    assert sides["vit_base_patch16_siglip_256"] == 256
    assert sides["nfnet_l0"] == 288 and sides["dm_nfnet_f0"] == 256
    assert sides["mobilenetv2_100"] == 224


@pytest.mark.parametrize("model_list", ["default", "extended", "publication"])
def test_every_huggingface_model_builds_from_its_config_offline_at_pytorchs_length(model_list: str) -> None:
    import transformers

    for spec in get_suite("huggingface").models(model_list=model_list):
        cls = getattr(transformers, spec.builder_target)
        config = cls.config_class(**spec.options.get("config", {}))
        with torch.device("meta"):
            module = cls(config)
        assert module.config.vocab_size > 0, spec.name
        # PyTorch's sequence length must fit the model's positions, or the builder would silently shorten it.
        positions = getattr(config, "max_position_embeddings", None)
        if isinstance(positions, int) and positions > 0:
            assert spec.options["seq_len"] <= positions, spec.name


def test_hub_config_models_carry_their_published_values() -> None:
    import transformers

    hf = {m.name: m for m in get_suite("huggingface").models()}
    longformer = hf["AllenaiLongformerBase"]
    config = transformers.LongformerConfig(**longformer.options["config"])
    # allenai/longformer-base-4096: RoBERTa's vocabulary, 4096 tokens (+2), one token type.
    assert (config.vocab_size, config.max_position_embeddings, config.type_vocab_size) == (50265, 4098, 1)
    t5 = transformers.T5Config(**hf["T5Small"].options["config"])
    assert (t5.d_model, t5.num_layers, t5.num_decoder_layers, t5.num_heads) == (512, 6, 6, 8)
    assert transformers.GPT2Config(**hf["DistillGPT2"].options["config"]).n_layer == 6
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_the_publications_models_are_under_their_suites_names() -> None:
    """torchbench resnet50, huggingface BertForMaskedLM (PyTorch's entry) and BERT large from bert-large-uncased's
    published config (335M parameters with the masked-LM head), for the training-throughput experiment."""
    import transformers

    assert "resnet50" in {m.name for m in get_suite("torchbench").models()}
    hf = get_suite("huggingface")
    default = {m.name: m for m in hf.models()}
    publication = {m.name: m for m in hf.models(model_list="publication")}
    assert publication["BertForMaskedLM"] == default["BertForMaskedLM"]
    large = publication["BertLargeForMaskedLM"]
    config = transformers.BertConfig(**large.options["config"])
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.intermediate_size,
            config.vocab_size, config.max_position_embeddings) == (1024, 24, 16, 4096, 30522, 512)
    built = build(ModelSpec(large.name, 2, large.builder, {**large.options, "config": {
        **large.options["config"], "num_hidden_layers": 1}}), BuildContext(device="cpu", batch_size=2,
                                                                           training=True))
    assert tuple(built.kwargs["input_ids"].shape) == (2, 512) and "labels" in built.kwargs  # a loss to train on
    with torch.device("meta"):
        module = transformers.BertForMaskedLM(config)
    assert 330e6 < sum(p.numel() for p in module.parameters()) < 340e6
