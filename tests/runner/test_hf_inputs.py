"""Hugging Face models built and fed as PyTorch's huggingface runner does (benchmarks/dynamo/huggingface.py), on tiny
configs of the real classes: the cache off, the loss arguments in inference too, inputs by model name."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from runner.suites import get_suite
from runner.suites.base import ModelSpec
from runner.suites.builders import BuildContext, BuiltModel, ModelLoadError, build, hf_sequence_length

TINY_BART = {"d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
             "decoder_attention_heads": 2, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "vocab_size": 64,
             "max_position_embeddings": 32}
TINY_BERT = {"dim": 16, "n_layers": 1, "n_heads": 2, "hidden_dim": 32, "vocab_size": 64,
             "max_position_embeddings": 32}
TINY_GPT2 = {"n_embd": 16, "n_layer": 1, "n_head": 2, "vocab_size": 64, "n_positions": 32}
TINY_T5 = {"d_model": 16, "d_kv": 8, "d_ff": 32, "num_layers": 1, "num_heads": 2, "vocab_size": 64}


def _build(name: str, cls: str, config: dict[str, Any], seq_len: int = 8, training: bool = False) -> BuiltModel:
    spec = ModelSpec(name=name, batch_size=2, builder=f"hf:{cls}", options={"seq_len": seq_len, "config": config})
    return build(spec, BuildContext(device="cpu", batch_size=2, training=training))


def _run(built: BuiltModel) -> Any:
    built.module.eval()
    with torch.no_grad():
        return built.module(*built.args, **built.kwargs)


def test_a_causal_lm_runs_without_its_cache_and_with_labels() -> None:
    built = _build("BlenderbotSmallForCausalLM", "BlenderbotSmallForCausalLM", TINY_BART)
    assert built.module.config.use_cache is False
    assert set(built.kwargs) == {"input_ids", "labels"}
    assert built.kwargs["labels"].shape == built.kwargs["input_ids"].shape == (2, 8)
    out = _run(built)
    assert out.loss is not None and out.loss.ndim == 0  # the loss is part of the inference graph
    assert out.get("past_key_values") is None  # no cache object in the output
    assert built.loss is not None and built.loss(out) is out.loss  # PyTorch's compute_loss: the first output


@pytest.mark.parametrize(("name", "cls", "config", "expected"), [
    ("DistilBertForMaskedLM", "DistilBertForMaskedLM", TINY_BERT, {"input_ids": (2, 8), "labels": (2, 8)}),
    ("DistilBertForQuestionAnswering", "DistilBertForQuestionAnswering", TINY_BERT,
     {"input_ids": (2, 8), "start_positions": (2,), "end_positions": (2,)}),
    ("GPT2ForSequenceClassification", "GPT2ForSequenceClassification", TINY_GPT2,
     {"input_ids": (2, 8), "labels": (2,)}),
    # T5 gets decoder_input_ids (the input itself); an EXTRA_MODELS name gets language-model labels.
    ("T5Small", "T5ForConditionalGeneration", TINY_T5,
     {"input_ids": (2, 8), "decoder_input_ids": (2, 8), "labels": (2, 8)}),
    # Bart makes its decoder inputs from the labels; its input ends with the end-of-sequence token.
    ("BartForConditionalGeneration", "BartForConditionalGeneration", TINY_BART,
     {"input_ids": (2, 8), "labels": (2, 8)}),
])
def test_inputs_follow_pytorch_rules_for_the_model_name(name: str, cls: str, config: dict[str, Any],
                                                        expected: dict[str, tuple[int, ...]]) -> None:
    built = _build(name, cls, config)
    assert {key: tuple(value.shape) for key, value in built.kwargs.items()} == expected
    assert all(value.dtype == torch.int64 for value in built.kwargs.values())
    if name.startswith("T5"):
        assert torch.equal(built.kwargs["decoder_input_ids"], built.kwargs["input_ids"])
    if "Bart" in name:
        assert (built.kwargs["input_ids"][:, -1] == built.module.config.eos_token_id).all()
    if name == "GPT2ForSequenceClassification":
        assert built.module.config.pad_token_id == 0  # PyTorch sets it so batches above 1 work
        assert (built.kwargs["labels"] == 0).all()  # randint(0, num_labels - 1) with the default two labels
    assert _run(built).loss is not None


def test_a_name_without_pytorch_loss_inputs_fails_to_load() -> None:
    with pytest.raises(ModelLoadError, match="no loss inputs"):
        _build("DistilBertModel", "DistilBertModel", TINY_BERT)


def test_sequence_lengths_by_name() -> None:
    # Hand-written from huggingface.py get_sequence_length (pytorch/pytorch main).
    expected = {"BlenderbotSmallForCausalLM": 128, "GPT2ForSequenceClassification": 1024, "T5Small": 1024,
                "OPTForCausalLM": 2048, "AllenaiLongformerBase": 1024, "BertForMaskedLM": 512, "DistillGPT2": 512,
                "TrOCRForCausalLM": 256, "MobileBertForMaskedLM": 128, "DistilBertForMaskedLM": 128,
                "XLNetLMHeadModel": 512, "M2M100ForConditionalGeneration": 128}
    assert {name: hf_sequence_length(name) for name in expected} == expected


def test_the_suite_default_sequence_length_is_pytorch_one() -> None:
    spec = ModelSpec(name="DistilBertForMaskedLM", batch_size=1, builder="hf:DistilBertForMaskedLM",
                     options={"config": {**TINY_BERT, "max_position_embeddings": 512}})
    built = build(spec, BuildContext(device="cpu", batch_size=1, training=False))
    assert built.kwargs["input_ids"].shape == (1, 128)


def test_the_suite_entries_have_pytorch_sequence_lengths() -> None:
    """Each entry's input length (its seq_len option, else the builder's rule) is get_sequence_length's."""
    for spec in get_suite("huggingface").models():
        assert spec.options.get("seq_len", hf_sequence_length(spec.name)) == hf_sequence_length(spec.name), spec.name
