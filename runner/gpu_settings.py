"""The GPU settings of PyTorch's harness for timed runs, as environment entries of the run's workers.

PyTorch's ``benchmarks/dynamo/common.py`` (compared at pytorch/pytorch main as mirrored by cyyever/pytorch, commit
021c4c1a30ae5d1d131c5f950440939de962ebdc) sets, at import and so for every timed run:

- ``torch.backends.cuda.matmul.allow_tf32 = True`` (cuBLAS float32 matmuls in TF32; cuDNN's ``allow_tf32`` it leaves
  at torch's default, and so does perfdash);
- ``torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True)`` (the SDPA math kernel reduces fp16/bf16 in their
  own precision);

and for ``--inductor`` ``inductor_config.triton.cudagraphs = not args.disable_cudagraphs``: the headline Inductor
series runs with CUDA graphs, the ``--disable-cudagraphs`` one is named ``inductor_no_cudagraphs`` by its CI. (Its
per-model exception, torchbench.yaml's ``disable_cudagraph``, lists tts_angular alone at the mirror's commit
d0c95f95718e, a model none of perfdash's lists has.)
Its accuracy check turns TF32 and the reduced-precision SDPA off (``setup_determinism``), as perfdash's does
(runner.check_settings, which restores them for the timed phases).

perfdash hands these to the workers as environment entries (``timed_run_env``, part of
runner.options.RunOptions.worker_env), so the manifest's ``config.env`` records them and they are part of the series,
as ``TORCHINDUCTOR_FREEZING`` is on CPU. CUDA graphs use Inductor's own variable, read when its configuration is
imported (the fork server is started with the run's environment); the two torch.backends flags have no variable of
torch's, so the worker applies perfdash's (``apply``) before the job starts. Torch-free until ``apply``.
"""

from __future__ import annotations

from collections.abc import Mapping

MATMUL_TF32 = "PERFDASH_CUDA_MATMUL_ALLOW_TF32"
SDPA_REDUCED_PRECISION = "PERFDASH_CUDA_SDPA_FP16_BF16_REDUCTION"
CUDAGRAPHS = "TORCHINDUCTOR_CUDAGRAPHS"  # Inductor's: torch._inductor.config.triton.cudagraphs

# The variant PyTorch's CI gives Inductor without CUDA graphs (inductor_no_cudagraphs_* result files).
NO_CUDAGRAPHS_VARIANT = "no_cudagraphs"


def timed_run_env(device: str, backend: str, cudagraphs: bool = True) -> dict[str, str]:
    """The entries a run's workers get: nothing on CPU; on CUDA, TF32 and the reduced-precision SDPA math for every
    backend (common.py sets them for the eager side too), and for Inductor whether it captures CUDA graphs."""
    if device != "cuda":
        return {}
    env = {MATMUL_TF32: "1", SDPA_REDUCED_PRECISION: "1"}
    if backend == "inductor":
        env[CUDAGRAPHS] = "1" if cudagraphs else "0"
    return env


def in_force(env: Mapping[str, str]) -> dict[str, bool]:
    """Which of these settings an environment turns on, by short name (gpu-smoke's table, the README)."""
    return {"tf32": env.get(MATMUL_TF32) == "1", "sdpa_reduced": env.get(SDPA_REDUCED_PRECISION) == "1",
            "cudagraphs": env.get(CUDAGRAPHS) == "1"}


def apply(environ: Mapping[str, str]) -> None:
    """Set the torch.backends flags the environment asks for (a worker, before its job; imports torch). Setting them
    touches no device, so a CPU worker may run it too."""
    import torch

    if environ.get(MATMUL_TF32) == "1":
        torch.backends.cuda.matmul.allow_tf32 = True
    if environ.get(SDPA_REDUCED_PRECISION) == "1":
        torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True)
