"""--allocator: which C allocator settings CPU workers get, and that the choice is part of the recorded config."""

from __future__ import annotations

import argparse

import pytest

from runner.cli import options_from_args, register
from runner.options import CPU_MALLOC_ENV, OptionsError, RunOptions, validate


def parse(*argv: str) -> RunOptions:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return options_from_args(parser.parse_args(["run", "--suite", "timm_models", *argv]))


def test_default_is_pytorchs_allocator_no_malloc_variables() -> None:
    options = parse()
    assert options.allocator == "pytorch"
    env = options.run_config().env
    assert not any(key.startswith("MALLOC_") for key in env)
    assert env["TORCHINDUCTOR_FREEZING"] == "1"  # the rest of the CPU dashboard's settings stay


def test_perfdash_allocator_is_recorded_in_the_run_config() -> None:
    env = parse("--allocator", "perfdash").run_config().env
    assert {k: env[k] for k in CPU_MALLOC_ENV} == CPU_MALLOC_ENV


def test_allocator_settings_are_for_cpu_workers_only() -> None:
    options = RunOptions(suite="timm_models", device="cuda", allocator="perfdash")
    assert not any(key.startswith("MALLOC_") for key in options.worker_env())


def test_unknown_allocator_is_refused_before_any_model_runs() -> None:
    with pytest.raises(OptionsError, match="--allocator 'jemalloc' is not one of pytorch, perfdash"):
        validate(RunOptions(suite="timm_models", allocator="jemalloc"))
    with pytest.raises(SystemExit):
        parse("--allocator", "jemalloc")
