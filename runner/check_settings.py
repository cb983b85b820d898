"""The global settings PyTorch's harness runs its accuracy check under, switched on only around the check.

PyTorch's ``benchmarks/dynamo/common.py`` runs ``--accuracy`` in a process of its own: ``run()`` sets Inductor's
``fallback_random`` and calls ``setup_determinism``, which turns on deterministic algorithms (except for the models
it lists), cuDNN's and oneDNN's (``mkldnn``) deterministic modes, turns off cuDNN autotuning and TF32, and makes the
SDPA math kernel reduce in full precision. perfdash checks accuracy and times the model in one worker, so the settings
are applied for the check's runs and restored for the timed ones, which PyTorch runs without them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

# Models setup_determinism leaves without torch.use_deterministic_algorithms: they have ops without a deterministic
# implementation (the set in common.py's setup_determinism, pytorch/pytorch main as read for issue 18).
NO_DETERMINISTIC_ALGORITHMS: frozenset[str] = frozenset({
    "alexnet", "Background_Matting", "pytorch_CycleGAN_and_pix2pix", "pytorch_unet", "Super_SloMo", "vgg16",
    "Wav2Vec2ForCTC", "Wav2Vec2ForPreTraining", "sam", "sam_fast", "resnet50_quantized_qat",
    "mobilenet_v2_quantized_qat", "detectron2_maskrcnn", "detectron2_maskrcnn_r_101_c4",
    "detectron2_maskrcnn_r_101_fpn", "detectron2_maskrcnn_r_50_c4", "detectron2_maskrcnn_r_50_fpn",
    "detectron2_fasterrcnn_r_101_c4", "detectron2_fasterrcnn_r_101_dc5", "detectron2_fasterrcnn_r_101_fpn",
    "detectron2_fasterrcnn_r_50_c4", "detectron2_fasterrcnn_r_50_dc5", "detectron2_fasterrcnn_r_50_fpn",
})

_CUBLAS_WORKSPACE = "CUBLAS_WORKSPACE_CONFIG"


@contextmanager
def accuracy_settings(model_name: str) -> Iterator[None]:
    """PyTorch's accuracy-check settings for ``model_name`` while the block runs; the previous ones afterwards."""
    from torch._inductor import config as inductor_config

    cudnn, mkldnn, matmul = torch.backends.cudnn, torch.backends.mkldnn, torch.backends.cuda.matmul
    saved = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
             cudnn.deterministic, cudnn.benchmark, cudnn.allow_tf32, mkldnn.deterministic, matmul.allow_tf32,
             torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed(), os.environ.get(_CUBLAS_WORKSPACE))
    try:
        if model_name not in NO_DETERMINISTIC_ALGORITHMS:
            torch.use_deterministic_algorithms(True)
        cudnn.deterministic = True
        cudnn.benchmark = False
        mkldnn.deterministic = True  # type: ignore[assignment]  # a flag of torch's PropModule, typed as its ContextProp
        os.environ[_CUBLAS_WORKSPACE] = ":4096:8"
        cudnn.allow_tf32 = False
        matmul.allow_tf32 = False
        torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(False)
        with inductor_config.patch(fallback_random=True):
            yield
    finally:
        (algorithms, warn_only, cudnn.deterministic, cudnn.benchmark, cudnn.allow_tf32, mkldnn.deterministic,
         matmul.allow_tf32, sdp_reduction, workspace) = saved
        torch.use_deterministic_algorithms(algorithms, warn_only=warn_only)
        torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(sdp_reduction)
        if workspace is None:
            os.environ.pop(_CUBLAS_WORKSPACE, None)
        else:
            os.environ[_CUBLAS_WORKSPACE] = workspace
