"""Test-only: a library that asks for the GPU at import, as some do; the fork server test must catch it."""

import torch

torch.cuda.is_available()
torch.cuda.device_count()
