"""runner.torchbench_weights: which TorchBench models download pretrained weights while they are built, read from
the model's source. The trees are written by the tests in TorchBench's layout; one test reads the installed tree when
there is one."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.suites.torchbench import installed_tree
from runner.torchbench_weights import pretrained_weights

TORCHVISION_MODEL = """
from torchbenchmark.util.framework.vision.model_factory import TorchVisionModel
from torchvision import models

class Model(TorchVisionModel):
    def __init__(self, test, device, batch_size=None, extra_args=[]):
        super().__init__(model_name="alexnet", test=test, device=device, batch_size=batch_size,
                         weights=models.AlexNet_Weights.IMAGENET1K_V1, extra_args=extra_args)
"""
TORCHVISION_NO_WEIGHTS = """
from torchbenchmark.util.framework.vision.model_factory import TorchVisionModel

class Model(TorchVisionModel):
    def __init__(self, test, device, batch_size=None):
        super().__init__(model_name="vgg16", test=test, device=device, batch_size=batch_size)
"""
RANDOM_WEIGHTS = """
import torchvision
from torchbenchmark.util.model import BenchmarkModel

class Model(BenchmarkModel):
    def __init__(self, test, device, batch_size=None):
        self.model = torchvision.models.resnet18(weights=None, pretrained=False)
        self.other = build(weights=weights, pretrained=args.pretrained)
"""
DETECTION = """
import torchvision
class Model(BenchmarkModel):
    def __init__(self):
        self.model = torchvision.models.detection.maskrcnn_resnet50_fpn(
            weights=torchvision.models.detection.MaskRCNN_ResNet50_FPN_Weights.COCO_V1)
"""
HUB = """
class Model(BenchmarkModel):
    def __init__(self):
        self.model = CLIPModel.from_pretrained("openai/clip-vit-base-patch32")
"""


def tree_with(root: Path, models: dict[str, str], package: str = "models") -> Path:
    for name, source in models.items():
        (root / "torchbenchmark" / package / name).mkdir(parents=True)
        (root / "torchbenchmark" / package / name / "__init__.py").write_text(source)
    return root


def test_what_downloads_weights(tmp_path: Path) -> None:
    tree = tree_with(tmp_path, {"alexnet": TORCHVISION_MODEL, "vgg16": TORCHVISION_NO_WEIGHTS,
                                "random": RANDOM_WEIGHTS, "maskrcnn": DETECTION, "clip": HUB})
    assert pretrained_weights(tree, "alexnet") == "TorchVisionModel (weights=models.AlexNet_Weights.IMAGENET1K_V1)"
    # TorchVisionModel's constructor falls back to pretrained=True when its subclass passes no weights.
    assert pretrained_weights(tree, "vgg16") == "TorchVisionModel (pretrained=True)"
    assert pretrained_weights(tree, "random") is None  # weights=None, pretrained=False, variables: no evidence
    assert pretrained_weights(tree, "maskrcnn") == \
        "weights=torchvision.models.detection.MaskRCNN_ResNet50_FPN_Weights.COCO_V1"
    assert pretrained_weights(tree, "clip") == "CLIPModel.from_pretrained(...)"
    assert pretrained_weights(tree, "absent") is None


def test_canary_models_and_unparsable_sources(tmp_path: Path) -> None:
    tree = tree_with(tmp_path, {"canary": TORCHVISION_MODEL}, package="canary_models")
    tree_with(tmp_path, {"broken": "def (:\n"})
    assert pretrained_weights(tree, "canary") is not None
    assert pretrained_weights(tree, "broken") is None


@pytest.mark.skipif(installed_tree() is None, reason="no TorchBench installed")
def test_the_installed_trees_torchvision_models() -> None:
    tree = installed_tree()
    assert tree is not None
    for name in ("alexnet", "resnet50", "mobilenet_v2", "vgg16"):
        assert (pretrained_weights(tree, name) or "").startswith("TorchVisionModel"), name
    for name in ("BERT_pytorch", "dcgan", "phlippe_resnet", "functorch_dp_cifar10", "tts_angular"):
        assert pretrained_weights(tree, name) is None, name
