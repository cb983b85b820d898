"""Test-only: leaves torch's CUDA state as an import that initialised CUDA would (no GPU here to really do it)."""

import torch.cuda

torch.cuda._initialized = True
