"""What ``perfdash run`` is told to measure has its fields from perfdash.axes: every axis with a flag is a field of
RunAxes, of the runner's options and of the bisect tool's target, with its axis' default, and the CLI's defaults are
the same."""

from __future__ import annotations

import dataclasses
import importlib
import typing

import pytest

from perfdash.axes import AXES, RUN_AXES, Axis, RunAxes, run_axis_values

# Everything that is told a configuration to run: each must have one field per run axis.
RUNNABLE = ("perfdash.axes:RunAxes", "runner.options:RunOptions", "perfbisect.pytorch:TorchTarget")


def _class(path: str) -> type:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def _default(field: dataclasses.Field) -> object:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING  # required


def test_the_run_axes_are_the_axes_with_a_flag() -> None:
    assert [axis.name for axis in RUN_AXES] == [axis.name for axis in AXES if axis.flag is not None]
    assert [field.name for field in dataclasses.fields(RunAxes)] == [axis.name for axis in RUN_AXES]


def _check_field(cls: type, axis: Axis) -> None:
    fields = {field.name: field for field in dataclasses.fields(cls)}
    assert axis.name in fields, f"{cls.__name__} has no field for axis {axis.name} ({axis.flag})"
    default = _default(fields[axis.name])
    if default is dataclasses.MISSING:  # a required field: an axis without a default (the suite)
        assert axis.default is None, f"{cls.__name__}.{axis.name} is required, its axis defaults to {axis.default!r}"
    else:
        assert default == axis.default and type(default) is type(axis.default), \
            f"{cls.__name__}.{axis.name} defaults to {default!r}, its axis to {axis.default!r}"
    hint = typing.get_type_hints(cls)[axis.name]
    assert axis.type is hint or axis.type in typing.get_args(hint), f"{cls.__name__}.{axis.name}: {hint}"


@pytest.mark.parametrize("path", RUNNABLE)
@pytest.mark.parametrize("axis", RUN_AXES, ids=lambda axis: axis.name)
def test_each_runnable_class_has_the_axis_with_its_default_and_type(path: str, axis: Axis) -> None:
    _check_field(_class(path), axis)


def test_a_drifted_default_or_a_missing_field_is_caught() -> None:
    """The check can fail: a default that drifted from its axis, an axis with no field."""

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Drifted(RunAxes):
        device: str = "cuda"

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Handwritten:
        suite: str
        backend: str = "inductor"

    by_name = {axis.name: axis for axis in RUN_AXES}
    with pytest.raises(AssertionError, match="defaults to 'cuda'"):
        _check_field(Drifted, by_name["device"])
    with pytest.raises(AssertionError, match="no field for axis dtype"):
        _check_field(Handwritten, by_name["dtype"])


def test_the_run_cli_defaults_are_the_axes_defaults() -> None:
    """``perfdash run --suite S`` and ``perfdash bisect --suite S --model M`` leave every axis at its default."""
    from perfdash.cli import build_parser

    parser = build_parser()
    for argv in (["run", "--suite", "timm_models"], ["bisect", "--suite", "timm_models", "--model", "m"]):
        values = run_axis_values(parser.parse_args(argv))
        assert values == {axis.name: "timm_models" if axis.name == "suite" else axis.default for axis in RUN_AXES}


def test_the_runner_options_and_the_bisect_target_name_the_same_run() -> None:
    """The bisect tool's ``perfdash run`` command, parsed by the runner's own CLI, gives back the target's axes."""
    from pathlib import Path

    from perfbisect.pytorch import TorchTarget

    from perfdash.cli import build_parser
    from runner.cli import options_from_args

    target = TorchTarget(suite="timm_models", model="m", backend="aot_eager", compile_mode="max-autotune",
                         device="cpu", dtype="bfloat16", mode="training", threads=1, batch_size=3,
                         dynamic_shapes=True)
    options = options_from_args(build_parser().parse_args(["run", *target.run_args(Path("out"))]))
    assert run_axis_values(options) == run_axis_values(target)
    assert options.run_config().key() == target.key()


def test_a_job_takes_each_setting_from_the_runs_option_of_its_name_and_type() -> None:
    """runner.api.make_job copies runner.protocol.ModelSettings' fields from the run's options by name: each is an
    option of the same type (the axes among them written out in the protocol, which imports no pydantic)."""
    from runner.options import RunOptions
    from runner.protocol import ModelSettings

    options = typing.get_type_hints(RunOptions)
    for name, hint in typing.get_type_hints(ModelSettings).items():
        assert options.get(name) == hint, f"ModelSettings.{name}: {hint}; RunOptions.{name}: {options.get(name)}"


def test_each_summary_groups_by_its_own_axes_and_the_machine() -> None:
    """The Summary page groups by device, dtype, mode and threads (its rows name the rest); the report and
    ``perfdash summary`` by the compile mode, dynamic shapes and batch-size override as well; all by the machine."""
    from types import SimpleNamespace

    from perfdash.axes import SummaryScope, summary_axis_values, summary_group

    def stored(**changes: object) -> SimpleNamespace:
        columns = {"device": "cuda", "dtype": "bfloat16", "mode": "inference", "thread_config": "all-cores",
                   "compile_mode": "default", "dynamic_shapes": False, "batch_size_override": None,
                   "backend": "inductor", "variant": "", "suite": "torchbench", "machine": "h100"}
        columns.update(changes)
        machine = SimpleNamespace(fingerprint=columns.pop("machine"))
        return SimpleNamespace(**columns, machine=machine)

    base = stored()
    assert summary_axis_values(base, SummaryScope.PAGE) == {
        "device": "cuda", "dtype": "bfloat16", "mode": "inference", "thread_config": "all-cores"}
    for scope in SummaryScope:
        assert summary_group(base, scope)[-1] == ("machine", "h100")
        for same in ({"backend": "eager"}, {"suite": "timm_models"}, {"variant": "no_cudagraphs"}):
            assert summary_group(stored(**same), scope) == summary_group(base, scope), (scope, same)
        for other in ({"device": "cpu"}, {"dtype": "float32"}, {"mode": "training"}, {"thread_config": "1-threads"},
                      {"machine": "a100"}):
            assert summary_group(stored(**other), scope) != summary_group(base, scope), (scope, other)
    for within_a_page_group in ({"compile_mode": "max-autotune"}, {"dynamic_shapes": True},
                                {"batch_size_override": 4}):
        changed = stored(**within_a_page_group)
        assert summary_group(changed, SummaryScope.PAGE) == summary_group(base, SummaryScope.PAGE)
        for scope in (SummaryScope.REPORT, SummaryScope.CLI):
            assert summary_group(changed, scope) != summary_group(base, scope), (scope, within_a_page_group)
