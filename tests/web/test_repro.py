"""The Model page's repro command, fed to the real `perfdash run` parser, reproduces the series' configuration."""

from __future__ import annotations

import shlex

import pytest

from perfdash.cli import build_parser
from service.models import Configuration
from service.web.pages import repro_command


def configuration(**overrides: object) -> Configuration:
    fields: dict[str, object] = dict(suite="timm_models", backend="inductor", variant="", compile_mode="default",
                                     dtype="float32", mode="inference", device="cpu", threads=None,
                                     thread_config="all-cores", batch_size_override=None, dynamic_shapes=False,
                                     env={})
    fields.update(overrides)
    return Configuration(**fields)


@pytest.mark.parametrize("overrides", [
    {},
    {"threads": 1, "thread_config": "single-thread"},
    {"compile_mode": "max-autotune", "variant": "max_autotune", "device": "cuda", "dtype": "bfloat16"},
    {"dynamic_shapes": True, "variant": "dynamic", "mode": "training", "dtype": "amp", "device": "cuda"},
    {"batch_size_override": 16, "suite": "huggingface"},
    {"backend": "onnxruntime", "variant": "int8_dynamic"},
    {"backend": "openvino"},
])
def test_repro_command_parses_back_to_the_same_configuration(overrides: dict[str, object]) -> None:
    from runner.cli import options_from_args

    config = configuration(**overrides)
    argv = shlex.split(repro_command(config, "vit_base_patch16_224"))
    assert argv[:2] == ["perfdash", "run"]
    run = options_from_args(build_parser().parse_args(argv[1:])).run_config()
    assert (run.suite, run.backend, run.variant, run.compile_mode, run.dtype, run.mode, run.device, run.threads,
            run.dynamic_shapes, run.batch_size) == (
        config.suite, config.backend, config.variant, config.compile_mode, config.dtype, config.mode, config.device,
        config.threads, config.dynamic_shapes, config.batch_size_override)
    assert run.thread_config == config.thread_config


def test_repro_command_quotes_odd_model_names() -> None:
    argv = shlex.split(repro_command(configuration(), "name with 'quotes'; rm -rf /"))
    assert argv[-2:] == ["--only", "name with 'quotes'; rm -rf /"]
