"""perfdash's own per-model file (``*_samples.jsonl``): raw timings and the activation peak beside PyTorch's columns."""

from __future__ import annotations

import pytest

from perfdash.contract import ContractError, ModelSamples, parse_samples
from perfdash.manifest import MEMORY_DEFINITIONS, Manifest, RunConfig


def test_activation_peak_round_trips_and_older_lines_still_read() -> None:
    new = ModelSamples("resnet18", 4, (2.0, 2.1), (1.0, 1.1), eager_activation_peak_mem=0.0239,
                       dynamo_activation_peak_mem=0.0150)
    old = b'{"name": "lcnet_050", "batch_size": 8, "eager_ms": [3.0], "compiled_ms": [2.0]}'
    read = parse_samples(new.to_json().encode() + b"\n" + old + b"\n", "x_samples.jsonl")
    assert read[0] == new
    assert read[0].activation_ratio == pytest.approx(0.0239 / 0.0150)
    assert (read[1].eager_activation_peak_mem, read[1].dynamo_activation_peak_mem, read[1].activation_ratio) == \
        (None, None, None)


@pytest.mark.parametrize("value", ['"big"', "-0.5", "true"])
def test_a_bad_activation_peak_is_an_error_naming_the_line(value: str) -> None:
    line = ('{"name": "m", "batch_size": 1, "eager_ms": [1.0], "compiled_ms": [1.0], '
            f'"dynamo_activation_peak_mem": {value}}}')
    good = '{"name": "m", "batch_size": 1, "eager_ms": [1.0], "compiled_ms": [1.0]}'
    with pytest.raises(ContractError) as caught:
        parse_samples(f"{good}\n{line}\n".encode(), "x_samples.jsonl")
    assert (caught.value.file, caught.value.line) == ("x_samples.jsonl", 2)


def test_manifest_records_warmup_and_memory_definitions() -> None:
    manifest = Manifest(config=RunConfig(suite="timm_models", backend="inductor", warmup=5),
                        memory_definitions={"peak_memory": MEMORY_DEFINITIONS["cpu"]})
    again = Manifest.parse(manifest.model_dump_json().encode(), "m.json")
    assert again.config.warmup == 5 and again.memory_definitions == manifest.memory_definitions
    older = Manifest.parse(b'{"config": {"suite": "timm_models", "backend": "inductor"}}', "old.json")
    assert older.config.warmup is None and older.memory_definitions == {}
