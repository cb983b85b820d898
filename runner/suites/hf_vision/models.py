"""The twelve architectures of the hf_vision suite, built from transformers configs written here (imports torch).

Each ``Architecture`` reproduces one published checkpoint's architecture and size with random weights: the config
class with the checkpoint's fields, the image processor class with the checkpoint's preprocessing, constructed in
code (never ``from_pretrained``; nothing is downloaded, ``HF_HUB_OFFLINE=1``). DETR-family models keep their timm
ResNet backbones (as the checkpoints do) with ``use_pretrained_backbone=False``; MaskFormer and Mask2Former use
transformers' own Swin backbone, so no backbone weights are looked for either.

The suite's data file names an architecture per row (``options.arch``); ``options.config``, ``options.backbone`` and
``options.processor`` override fields, which is how tests build every architecture at a tiny size.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runner.suites.base import SuiteError
from runner.suites.builders import BuiltModel, ModelLoadError
from runner.suites.hf_vision.image import synthetic_image

# OWL-ViT's two text queries (the publication's detection example asked for two objects).
TEXT_QUERIES: tuple[str, ...] = ("a photo of a cat", "a photo of a dog")

Overrides = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Architecture:
    checkpoint: str  # the checkpoint whose architecture and size the config reproduces (documentation only)
    model_class: str  # a transformers class name
    config: Callable[[Overrides, Overrides], Any]  # (config overrides, backbone overrides) -> config
    processor: Callable[[Overrides], Any]  # processor overrides -> image processor
    text_queries: bool = False


def _merge(defaults: Mapping[str, Any], overrides: Overrides) -> dict[str, Any]:
    return {**defaults, **overrides}


def _no_backbone(name: str) -> Callable[[Overrides, Overrides], Any]:
    """A config class without a backbone sub-config, from ``_CONFIG_DEFAULTS[name]`` plus overrides."""

    def make(overrides: Overrides, backbone: Overrides) -> Any:
        import transformers

        if backbone:
            raise SuiteError(f"{name} has no backbone to override (got backbone = {dict(backbone)})")
        return getattr(transformers, name)(**_merge(_CONFIG_DEFAULTS[name], overrides))

    return make


_CONFIG_DEFAULTS: dict[str, dict[str, Any]] = {
    # google/vit-base-patch16-224: ViT-B/16 at 224, ImageNet-1k head (ViTConfig's defaults are this model).
    "ViTConfig": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
                  "image_size": 224, "patch_size": 16, "num_labels": 1000},
    # microsoft/beit-base-patch16-224-pt22k-ft22k: BEiT-B/16, relative position bias, ImageNet-22k head.
    "BeitConfig": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
                   "image_size": 224, "patch_size": 16, "use_relative_position_bias": True,
                   "use_absolute_position_embeddings": False, "use_mean_pooling": True,
                   "layer_scale_init_value": 0.1, "num_labels": 21841},
    # facebook/convnext-large-224.
    "ConvNextConfig": {"depths": [3, 3, 27, 3], "hidden_sizes": [192, 384, 768, 1536], "num_labels": 1000},
    # microsoft/resnet-50: bottleneck blocks 3-4-6-3.
    "ResNetConfig": {"depths": [3, 4, 6, 3], "hidden_sizes": [256, 512, 1024, 2048], "embedding_size": 64,
                     "layer_type": "bottleneck", "num_labels": 1000},
    # nvidia/segformer-b0-finetuned-ade-512-512: MiT-b0 encoder, 256-wide all-MLP decoder, ADE20k's 150 classes.
    "SegformerConfig": {"depths": [2, 2, 2, 2], "hidden_sizes": [32, 64, 160, 256], "num_attention_heads": [1, 2, 5, 8],
                        "sr_ratios": [8, 4, 2, 1], "decoder_hidden_size": 256, "num_labels": 150},
    # google/deeplabv3_mobilenet_v2_1.0_513: MobileNetV2 1.0, output stride 8, PASCAL VOC's 21 classes.
    "MobileNetV2Config": {"depth_multiplier": 1.0, "image_size": 513, "output_stride": 8, "num_labels": 21},
    # google/owlvit-base-patch32: OwlViTConfig's defaults are this model (ViT-B/32 at 768, 512-wide text tower).
    "OwlViTConfig": {},
}


def _mask2former(overrides: Overrides, backbone: Overrides) -> Any:
    """facebook/mask2former-swin-tiny-coco-panoptic: Swin-T backbone, COCO panoptic's 133 classes."""
    from transformers import Mask2FormerConfig, SwinConfig

    swin = SwinConfig(**_merge({"embed_dim": 96, "depths": [2, 2, 6, 2], "num_heads": [3, 6, 12, 24],
                                "window_size": 7, "image_size": 224, "drop_path_rate": 0.3,
                                "out_features": ["stage1", "stage2", "stage3", "stage4"]}, backbone))
    return Mask2FormerConfig(**_merge({"backbone_config": swin, "num_labels": 133, "num_queries": 100}, overrides))


def _maskformer(overrides: Overrides, backbone: Overrides) -> Any:
    """facebook/maskformer-swin-base-ade: Swin-B (384, window 12) backbone, DETR decoder, ADE20k's 150 classes."""
    from transformers import MaskFormerConfig, SwinConfig

    swin = SwinConfig(**_merge({"embed_dim": 128, "depths": [2, 2, 18, 2], "num_heads": [4, 8, 16, 32],
                                "window_size": 12, "image_size": 384, "drop_path_rate": 0.3,
                                "out_features": ["stage1", "stage2", "stage3", "stage4"]}, backbone))
    from transformers import DetrConfig

    # The decoder is a DETR transformer; overrides of it come as a table (tests shrink it).
    decoder = dict(overrides.get("decoder_config", {}))
    rest = {k: v for k, v in overrides.items() if k != "decoder_config"}
    return MaskFormerConfig(**_merge({"backbone_config": swin, "decoder_config": DetrConfig(**decoder) if decoder
                                      else None, "num_labels": 150}, rest))


def _detr_family(class_name: str, resnet: str, queries: int) -> Callable[[Overrides, Overrides], Any]:
    """DETR / Conditional DETR with the checkpoints' timm ResNet backbone, never its pretrained weights."""

    def make(overrides: Overrides, backbone: Overrides) -> Any:
        import transformers

        timm_backbone = {"backbone": backbone.get("name", resnet), "use_timm_backbone": True,
                         "use_pretrained_backbone": False}
        if set(backbone) - {"name"}:
            raise SuiteError(f"{class_name}: only backbone.name (a timm ResNet) can be overridden")
        return getattr(transformers, class_name)(**_merge({**timm_backbone, "num_queries": queries,
                                                           "num_labels": 91}, overrides))

    return make


def _processor(class_name: str, defaults: Mapping[str, Any]) -> Callable[[Overrides], Any]:
    def make(overrides: Overrides) -> Any:
        import transformers

        return getattr(transformers, class_name)(**_merge(defaults, overrides))

    return make


_DETR_SIZE = {"size": {"shortest_edge": 800, "longest_edge": 1333}}

ARCHITECTURES: dict[str, Architecture] = {
    "vit": Architecture("google/vit-base-patch16-224", "ViTForImageClassification", _no_backbone("ViTConfig"),
                        _processor("ViTImageProcessor", {"size": {"height": 224, "width": 224}})),
    "beit": Architecture("microsoft/beit-base-patch16-224-pt22k-ft22k", "BeitForImageClassification",
                         _no_backbone("BeitConfig"),
                         _processor("BeitImageProcessor", {"size": {"height": 224, "width": 224},
                                                           "do_center_crop": False})),
    "convnext": Architecture("facebook/convnext-large-224", "ConvNextForImageClassification",
                             _no_backbone("ConvNextConfig"),
                             _processor("ConvNextImageProcessor", {"size": {"shortest_edge": 224},
                                                                   "crop_pct": 0.875})),
    "resnet": Architecture("microsoft/resnet-50", "ResNetForImageClassification", _no_backbone("ResNetConfig"),
                           _processor("ConvNextImageProcessor", {"size": {"shortest_edge": 224},
                                                                 "crop_pct": 0.875})),
    "segformer": Architecture("nvidia/segformer-b0-finetuned-ade-512-512", "SegformerForSemanticSegmentation",
                              _no_backbone("SegformerConfig"),
                              _processor("SegformerImageProcessor", {"size": {"height": 512, "width": 512}})),
    "mask2former": Architecture("facebook/mask2former-swin-tiny-coco-panoptic",
                                "Mask2FormerForUniversalSegmentation", _mask2former,
                                _processor("Mask2FormerImageProcessor",
                                           {"size": {"shortest_edge": 384, "longest_edge": 1333}})),
    "maskformer": Architecture("facebook/maskformer-swin-base-ade", "MaskFormerForInstanceSegmentation",
                               _maskformer,
                               _processor("MaskFormerImageProcessor",
                                          {"size": {"shortest_edge": 640, "longest_edge": 2560}})),
    "deeplabv3": Architecture("google/deeplabv3_mobilenet_v2_1.0_513", "MobileNetV2ForSemanticSegmentation",
                              _no_backbone("MobileNetV2Config"),
                              _processor("MobileNetV2ImageProcessor", {"size": {"shortest_edge": 513},
                                                                       "crop_size": {"height": 513, "width": 513}})),
    "owlvit": Architecture("google/owlvit-base-patch32", "OwlViTForObjectDetection", _no_backbone("OwlViTConfig"),
                           _processor("OwlViTImageProcessor", {"size": {"height": 768, "width": 768},
                                                               "crop_size": {"height": 768, "width": 768}}),
                           text_queries=True),
    "detr": Architecture("facebook/detr-resnet-50", "DetrForObjectDetection",
                         _detr_family("DetrConfig", "resnet50", 100), _processor("DetrImageProcessor", _DETR_SIZE)),
    "detr_resnet101": Architecture("facebook/detr-resnet-101", "DetrForObjectDetection",
                                   _detr_family("DetrConfig", "resnet101", 100),
                                   _processor("DetrImageProcessor", _DETR_SIZE)),
    "conditional_detr": Architecture("microsoft/conditional-detr-resnet-50", "ConditionalDetrForObjectDetection",
                                     _detr_family("ConditionalDetrConfig", "resnet50", 300),
                                     _processor("ConditionalDetrImageProcessor", _DETR_SIZE)),
}


def query_tokenizer(queries: tuple[str, ...]) -> Any:
    """A CLIP BPE tokenizer over a vocabulary built from the queries' own words (CLIP's vocab is not shipped).

    The ids differ from CLIP's, which does not matter for random weights: the text tower runs the same shapes
    (OWL-ViT pads every query to 16 tokens) and the same kernels.
    """
    from transformers import CLIPTokenizer

    vocab: dict[str, int] = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    merges: list[tuple[str, str]] = []
    words = sorted({w for q in queries for w in q.lower().split()})
    for ch in sorted({c for w in words for c in w}):
        vocab.setdefault(ch, len(vocab))
        vocab.setdefault(ch + "</w>", len(vocab))
    for word in words:  # merge left to right until the word is one token
        pieces = [*word[:-1], word[-1] + "</w>"]
        while len(pieces) > 1:
            merge = (pieces[0], pieces[1])
            if merge not in merges:
                merges.append(merge)
            pieces = [pieces[0] + pieces[1], *pieces[2:]]
            vocab.setdefault(pieces[0], len(vocab))
    # tokenizers' BPE takes the merges as pairs; transformers annotates them as "a b" lines
    return CLIPTokenizer(vocab=vocab, merges=merges)  # type: ignore[arg-type]


def make_inputs(arch: Architecture, processor_overrides: Overrides, batch_size: int,
                max_text_length: int = 16) -> dict[str, Any]:
    """The model's keyword inputs: its image processor applied to ``batch_size`` copies of the synthetic image."""
    processor = arch.processor(processor_overrides)
    image = synthetic_image()
    inputs = dict(processor(images=[image] * batch_size, return_tensors="pt"))
    if arch.text_queries:
        tokens = query_tokenizer(TEXT_QUERIES)(list(TEXT_QUERIES) * batch_size, padding="max_length",
                                               max_length=max_text_length, truncation=True, return_tensors="pt")
        inputs["input_ids"] = tokens["input_ids"]
        inputs["attention_mask"] = tokens["attention_mask"]
    return inputs


def build(batch_size: int, training: bool, *, arch: str, config: Overrides | None = None,
          backbone: Overrides | None = None, processor: Overrides | None = None, label: str = "",
          task: str = "") -> BuiltModel:
    """The ``module:`` builder the data file names. ``label`` and ``task`` are the Vision page's, unused here."""
    del training, label, task  # the suite measures inference; label/task only describe the row
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        architecture = ARCHITECTURES[arch]
    except KeyError:
        raise SuiteError(f"unknown hf_vision arch {arch!r}; known: {', '.join(ARCHITECTURES)}") from None
    import transformers

    try:
        cfg = architecture.config(dict(config or {}), dict(backbone or {}))
        module = getattr(transformers, architecture.model_class)(cfg)
    except ImportError as exc:  # an optional dependency of the model (timm for DETR backbones)
        raise ModelLoadError(str(exc)) from exc
    max_text = int(getattr(getattr(cfg, "text_config", None), "max_position_embeddings", 16) or 16)
    inputs = make_inputs(architecture, dict(processor or {}), batch_size, max_text)
    return BuiltModel(module=module, kwargs=inputs)
