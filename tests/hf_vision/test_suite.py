"""The hf_vision suite's model list: the publication's twelve rows, one row per batch size, the fixed image."""

from __future__ import annotations

import hashlib

import pytest

from runner.options import OptionsError, RunOptions, validate
from runner.suites import SuiteError, get_suite
from runner.suites.base import ModelSpec
from runner.suites.hf_vision import BATCH_SIZES, expand, parse_row_name, row_name
from runner.suites.hf_vision.image import synthetic_image

# The publication's table, top to bottom (task, row label).
PUBLICATION = [
    ("Image Classification", "ViT"), ("Image Classification", "BEiT"), ("Image Classification", "ConvNeXT"),
    ("Image Classification", "ResNet"), ("Image Segmentation", "Segformer"), ("Image Segmentation", "Mask2Former"),
    ("Image Segmentation", "MaskFormer"), ("Image Segmentation", "DeepLabV3 MobileNetV2"),
    ("Object Detection", "OWL-ViT"), ("Object Detection", "DETR"), ("Object Detection", "Resnet-101"),
    ("Object Detection", "Conditional DETR"),
]


def test_data_file_holds_the_publication_rows_in_order() -> None:
    models = get_suite("hf_vision").models()
    assert [(m.options["task"], m.options["label"]) for m in models] == PUBLICATION
    assert len({m.options["arch"] for m in models}) == 12


def test_default_run_is_every_model_at_1_4_16_model_major() -> None:
    _, selected = validate(RunOptions(suite="hf_vision"))
    assert BATCH_SIZES == (1, 4, 16)
    assert len(selected) == 36
    assert [s.name for s in selected[:4]] == ["ViT_bs1", "ViT_bs4", "ViT_bs16", "BEiT_bs1"]
    assert [s.batch_size for s in selected[:3]] == [1, 4, 16]


def test_batch_size_flag_runs_only_that_size() -> None:
    _, selected = validate(RunOptions(suite="hf_vision", batch_size=8))
    assert len(selected) == 12
    assert {s.batch_size for s in selected} == {8}
    assert all(s.name.endswith("_bs8") for s in selected)


def test_only_and_filter_select_rows_by_their_csv_names() -> None:
    _, only = validate(RunOptions(suite="hf_vision", only="DETR_bs16"))
    assert [(s.name, s.batch_size, s.options["arch"]) for s in only] == [("DETR_bs16", 16, "detr")]
    _, filtered = validate(RunOptions(suite="hf_vision", filters=("^Mask",)))
    assert [s.name for s in filtered] == ["Mask2Former_bs1", "Mask2Former_bs4", "Mask2Former_bs16",
                                          "MaskFormer_bs1", "MaskFormer_bs4", "MaskFormer_bs16"]
    with pytest.raises(OptionsError, match="no such model"):
        validate(RunOptions(suite="hf_vision", only="ViT"))  # rows carry their batch size


@pytest.mark.parametrize("name, parsed", [("ViT_bs1", ("ViT", 1)), ("DETR_ResNet-101_bs16", ("DETR_ResNet-101", 16)),
                                          ("a_bs2_bs4", ("a_bs2", 4)), ("ViT", None), ("ViT_bs0", None),
                                          ("ViT_bsx", None), ("ViT_bs", None)])
def test_row_names_round_trip(name: str, parsed: tuple[str, int] | None) -> None:
    got = parse_row_name(name)
    assert (None if got is None else (got.model, got.batch_size)) == parsed
    if parsed is not None:
        assert row_name(*parsed) == name


def test_a_model_name_that_already_carries_a_batch_size_is_refused() -> None:
    spec = ModelSpec(name="ViT_bs4", batch_size=1, builder="module:x:y")
    with pytest.raises(SuiteError, match="must not end in _bs"):
        expand([spec], None)


def test_tolerance_uses_the_model_not_the_row_name() -> None:
    from runner.suites.base import ToleranceQuery

    suite = get_suite("hf_vision")
    plain = suite.tolerance_for(ToleranceQuery(name="DETR_bs4", mode="inference", device="cuda", dtype="float32"))
    frozen = suite.tolerance_for(ToleranceQuery(name="DETR_bs4", mode="inference", device="cpu", dtype="float32",
                                                freezing=True))
    assert plain.tol < frozen.tol


def test_the_synthetic_image_is_fixed_and_not_trivial() -> None:
    first, second = synthetic_image(), synthetic_image()
    assert first.shape == (480, 640, 3) and first.dtype.name == "uint8"
    assert hashlib.sha256(first.tobytes()).digest() == hashlib.sha256(second.tobytes()).digest()
    # Edges and colours for the processors and detection heads to work on: many distinct values, full range.
    assert len({tuple(p) for p in first.reshape(-1, 3)[::97]}) > 1000
    assert first.min() == 0 and first.max() >= 245
