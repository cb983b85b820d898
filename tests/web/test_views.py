"""View-model rules that need no browser: which group Trends starts from."""

from __future__ import annotations

from service.models import Configuration
from service.web.views import first_group_filter


def config(device: str, dtype: str, mode: str, threads: str = "all-cores") -> Configuration:
    return Configuration(suite="timm_models", backend="inductor", variant="", device=device, dtype=dtype, mode=mode,
                         thread_config=threads)


def test_trends_start_from_the_first_summary_group_gpu_first() -> None:
    configs = [config("cpu", "float32", "inference"), config("cuda", "bfloat16", "inference"),
               config("cuda", "amp", "training"), config("cpu", "float32", "inference", "single-thread")]
    assert first_group_filter(configs) == {"device": "cuda", "dtype": "bfloat16", "mode": "inference",
                                           "thread_config": "all-cores"}


def test_one_group_needs_no_starting_filter() -> None:
    assert first_group_filter([config("cpu", "float32", "inference"), config("cpu", "float32", "inference")]) is None
