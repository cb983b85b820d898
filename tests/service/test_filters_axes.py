"""The configuration filter and the stored configuration derive from perfdash.axes: a new axis shows up in both."""

from __future__ import annotations

import dataclasses

import pytest

from perfdash.axes import AXES, FILTER_AXES, configuration_columns, configuration_identity, run_flags
from perfdash.manifest import RunConfig
from service.ingest.keys import configuration_key
from service.models import Configuration
from service.queries.filters import ConfigFilter


def test_the_filter_has_a_field_per_filterable_axis_and_nothing_else_unexplained() -> None:
    fields = [f.name for f in dataclasses.fields(ConfigFilter)]
    assert fields == [a.name for a in FILTER_AXES] + ["machine", "configuration_id"]


def test_every_stored_axis_is_a_column_of_the_configuration() -> None:
    columns = set(Configuration.__table__.columns.keys())
    assert {a.column for a in AXES if a.column} <= columns
    # and every configuration column is an axis, the machine, the key or the id: none is written by hand elsewhere
    assert columns - {a.column for a in AXES} == {"id", "key", "machine_id"}
    assert set(configuration_columns(RunConfig(suite="timm_models", backend="inductor"))) == \
        {a.column for a in AXES if a.column}


def test_axes_added_later_enter_the_key_only_when_set() -> None:
    single = RunConfig(suite="timm_models", backend="inductor")
    assert "world_size" not in configuration_identity(single, "cpu-x")
    ddp = single.model_copy(update={"world_size": 2, "distributed_backend": "gloo"})
    assert configuration_identity(ddp, "cpu-x")["world_size"] == 2
    assert configuration_key(ddp, "cpu-x") != configuration_key(single, "cpu-x")


@pytest.mark.parametrize(("values", "expected"), [
    ({"suite": "timm_models", "backend": "inductor", "dtype": "float32", "compile_mode": "default"},
     ["--suite", "timm_models", "--backend", "inductor", "--dtype", "float32"]),
    ({"suite": "huggingface", "compile_mode": "max-autotune", "dynamic_shapes": True, "threads": None},
     ["--suite", "huggingface", "--compile-mode", "max-autotune", "--dynamic-shapes"]),
    ({"suite": "torchbench", "threads": 1, "batch_size": 4, "dynamic_shapes": False},
     ["--suite", "torchbench", "--threads", "1", "--batch-size", "4"]),
])
def test_run_flags(values, expected) -> None:
    assert run_flags(values) == expected
