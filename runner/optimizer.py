"""The optimizer of a training step, chosen as PyTorch's harness chooses it (benchmarks/dynamo/common.py,
BenchmarkRunner.init_optimizer, pytorch/pytorch main as read for issue 18).

On CPU there is none: the step is zero_grad, forward, backward. On CUDA it is Adam (lr 0.01, capturable, foreach),
or SGD (lr 0.01, foreach) for the models PyTorch lists because they fail accuracy with Adam, or, when Inductor's
accuracy is checked, for two timm models whose fp16 training fails it with Adam. MobileBertForMaskedLM gets none.
(PyTorch's CI_USE_SGD applies to its --ci runs only, which perfdash does not imitate.)
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

_DEVICES_WITH_OPTIMIZER = frozenset({"cuda"})
_NO_OPTIMIZER = frozenset({"MobileBertForMaskedLM"})  # CI_SKIP_OPTIMIZER
BENCHMARK_USE_SGD = frozenset({
    # torchbench
    "BERT_pytorch", "LearningToPaint", "alexnet", "dcgan", "demucs", "densenet121", "dlrm", "fastNLP_Bert",
    "mobilenet_v2", "phlippe_densenet", "phlippe_resnet", "pytorch_stargan", "resnet18", "shufflenet_v2_x1_0",
    "speech_transformer", "squeezenet1_1", "stable_diffusion_text_encoder", "vgg16",
    # huggingface
    "AlbertForMaskedLM", "BartForCausalLM", "ElectraForCausalLM", "M2M100ForConditionalGeneration", "MBartForCausalLM",
    "OPTForCausalLM", "PLBartForCausalLM", "PegasusForCausalLM", "TrOCRForCausalLM", "XGLMForCausalLM",
    # timm
    "adv_inception_v3", "ghostnet_100", "tf_efficientnet_b0",
})
CUDA_INDUCTOR_ACCURACY_USE_SGD = frozenset({"convnextv2_nano.fcmae_ft_in22k_in1k", "vit_base_patch14_dinov2.lvd142m"})


def make_optimizer(name: str, device: str, backend: str, params: Iterable[torch.nn.Parameter],
                   checking_accuracy: bool) -> torch.optim.Optimizer | None:
    """The optimizer for model ``name``'s training step, or None where PyTorch's harness uses none."""
    if device not in _DEVICES_WITH_OPTIMIZER or name in _NO_OPTIMIZER:
        return None
    params = list(params)
    use_sgd = name in BENCHMARK_USE_SGD or (
        torch.version.hip is None and backend == "inductor" and checking_accuracy
        and name in CUDA_INDUCTOR_ACCURACY_USE_SGD)
    if use_sgd:
        sgd = torch.optim.SGD(params, lr=0.01, foreach=True)
        # The step runs inside the compiled iteration (runner.execute.compile_step); PyTorch's init_optimizer keeps
        # SGD's single foreach add out of Dynamo (little to gain, compile time to lose), and so does this.
        sgd.step = torch._dynamo.disable(sgd.step)  # type: ignore[method-assign]  # this instance's step, wrapped
        return sgd
    return torch.optim.Adam(params, lr=0.01, capturable=True, foreach=True)
