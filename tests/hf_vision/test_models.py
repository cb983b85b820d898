"""Every hf_vision architecture: built from its config at a tiny size and run once (no compile), and at full size
on the meta device, where its parameter count must be the published checkpoint's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from runner.suites.base import load_model_list
from runner.suites.builders import BuildContext, build
from runner.suites.hf_vision.models import ARCHITECTURES, TEXT_QUERIES

os.environ.setdefault("HF_HUB_OFFLINE", "1")
TINY = load_model_list(Path(__file__).parent / "data" / "tiny.toml", "module")
BATCH = 2

# Parameters of the published checkpoints, millions (model cards and papers), for the full-size configs.
PUBLISHED_PARAMS_M = {
    "vit": 86.6, "beit": 102.6, "convnext": 198.0, "resnet": 25.6, "segformer": 3.8, "mask2former": 47.4,
    "maskformer": 102.0, "deeplabv3": 2.5, "owlvit": 153.0, "detr": 41.5, "detr_resnet101": 60.5,
    "conditional_detr": 43.5,
}


def test_tiny_list_covers_every_architecture() -> None:
    assert sorted(s.options["arch"] for s in TINY) == sorted(ARCHITECTURES)


@pytest.mark.parametrize("spec", TINY, ids=[s.name for s in TINY])
def test_tiny_model_runs_one_inference_on_the_processed_image(spec) -> None:  # type: ignore[no-untyped-def]
    built = build(spec, BuildContext(device="cpu", batch_size=BATCH, training=False))
    pixels = built.kwargs["pixel_values"]
    assert pixels.shape[0] == BATCH and pixels.shape[1] == 3 and pixels.dtype == torch.float32
    assert torch.equal(pixels[0], pixels[1])  # one image, repeated: the publication fed one image
    assert pixels.std() > 0.1  # normalised, not a constant
    config = built.module.config
    built.module.eval()
    with torch.no_grad():
        out = built.module(**built.kwargs)
    arch = spec.options["arch"]
    if arch in ("vit", "beit", "convnext", "resnet"):
        assert out.logits.shape == (BATCH, config.num_labels)
    elif arch in ("segformer", "deeplabv3"):
        assert out.logits.shape[:2] == (BATCH, config.num_labels) and out.logits.ndim == 4
    elif arch in ("mask2former", "maskformer"):
        assert out.class_queries_logits.shape[0] == BATCH
        assert out.class_queries_logits.shape[-1] == config.num_labels + 1  # + no-object
        assert out.masks_queries_logits.shape[0] == BATCH and out.masks_queries_logits.ndim == 4
    elif arch == "owlvit":
        assert built.kwargs["input_ids"].shape == (BATCH * len(TEXT_QUERIES), 16)
        assert out.logits.shape[0] == BATCH and out.logits.shape[-1] == len(TEXT_QUERIES)
        assert out.pred_boxes.shape[-1] == 4
    else:  # DETR family: num_queries boxes; DETR adds a no-object class, Conditional DETR (focal loss) does not
        classes = config.num_labels + (0 if arch == "conditional_detr" else 1)
        assert out.logits.shape == (BATCH, config.num_queries, classes)
        assert out.pred_boxes.shape == (BATCH, config.num_queries, 4)
    first = out.logits if getattr(out, "logits", None) is not None else out.class_queries_logits
    assert torch.isfinite(first).all()


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_full_size_config_matches_the_published_checkpoint(arch: str) -> None:
    import transformers

    architecture = ARCHITECTURES[arch]
    config = architecture.config({}, {})
    with torch.device("meta"):  # shapes only: no memory, no initialisation
        module = getattr(transformers, architecture.model_class)(config)
    params_m = sum(p.numel() for p in module.parameters()) / 1e6
    assert params_m == pytest.approx(PUBLISHED_PARAMS_M[arch], rel=0.03)
    backbone = getattr(config, "backbone_config", None)
    if backbone is not None:  # never a pretrained backbone (nothing may be downloaded)
        assert not getattr(backbone, "use_pretrained_backbone", False)
        assert not getattr(config, "use_pretrained_backbone", False)
