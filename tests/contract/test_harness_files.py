"""perfdash.harness_files and perfdash.pytorch_json on hand-made names and records."""

from __future__ import annotations

import json

import pytest

from perfdash.contract import ContractError
from perfdash.harness_files import Role, classify
from perfdash.pytorch_json import KeyHints, looks_like_records, parse_records

STEM = "inductor_no_cudagraphs_torchbench_amp_training_cuda"


@pytest.mark.parametrize(("name", "role"), [
    (f"{STEM}_performance.csv", Role.RESULT_CSV),
    (f"{STEM}_accuracy.csv", Role.RESULT_CSV),
    (f"{STEM}_performance.json", Role.BENCHMARK_JSON),
    (f"{STEM}_manifest.json", Role.MANIFEST),
    (f"{STEM}_samples.jsonl", Role.SAMPLES),
    (f"{STEM}_performance_compilation_metrics.csv", Role.COMPANION),
    (f"{STEM}_performance_compilation_metrics.json", Role.COMPANION),
    ("speedup_inductor_compilation_metrics.csv", Role.COMPANION),
    (f"{STEM}_performance_stats.csv", Role.COMPANION),
    (f"{STEM}_performance_graph_breaks_deduped.csv", Role.COMPANION),
    ("geomean.csv", Role.COMPANION),
    ("lookup.csv", Role.COMPANION),
    ("gh_executive_summary.txt", Role.COMPANION),
    ("speedup_inductor.json", Role.BENCHMARK_JSON),
])
def test_roles(name: str, role: Role) -> None:
    assert classify(name).role is role


def test_a_variant_keeps_its_stem() -> None:
    item = classify(f"dir/{STEM}_accuracy.csv")
    assert (item.stem, item.kind) == (STEM, "accuracy")


@pytest.mark.parametrize("name", ["speedup_inductor.csv", "accuracy_aot_eager.csv", "inductor.csv"])
def test_hand_run_names_ask_for_the_flags(name: str) -> None:
    with pytest.raises(ContractError, match="--suite S --backend B --dtype D --mode M"):
        classify(name)


def _record(name: str, metric: str, value, **benchmark) -> str:
    body = {"name": metric, "extra_info": {"benchmark_values": [value]}} if isinstance(value, str) \
        else {"name": metric, "benchmark_values": [value]}
    return json.dumps({"benchmark": {"name": "TorchInductor", "mode": benchmark.get("mode", "inference"),
                                     "dtype": benchmark.get("dtype", "float32"),
                                     "extra_info": {"device": "cpu", "batch_size": 4}},
                       "model": {"name": name, "type": "OSS model", "backend": "inductor",
                                 "origins": [benchmark.get("suite", "timm_models")]},
                       "metric": body})


def test_records_of_two_runs_in_one_file_are_refused() -> None:
    data = "\n".join([_record("a", "speedup", 1.2), _record("b", "speedup", 1.1, dtype="bfloat16")]).encode()
    with pytest.raises(ContractError, match="records of several runs in one file: dtype bfloat16, float32"):
        parse_records(data, "x.json")


def test_records_must_agree_with_the_name() -> None:
    data = _record("a", "speedup", 1.2).encode()
    with pytest.raises(ContractError, match="records say suite timm_models, the name or flags say huggingface"):
        parse_records(data, "x.json", KeyHints(suite="huggingface"))


def test_a_repeated_metric_keeps_the_last_and_is_reported() -> None:
    data = "\n".join([_record("a", "accuracy", "pass"), _record("a", "accuracy", "fail_accuracy")]).encode()
    parsed = parse_records(data, "x_accuracy.json")
    assert [r.accuracy for r in parsed.accuracy] == ["fail_accuracy"]
    assert [r.message for r in parsed.repeats] == [
        "x_accuracy.json: model 'a' is written 2 times; kept the last (line 2: fail_accuracy), dropped line 1 (pass)"]


def test_what_counts_as_records() -> None:
    assert looks_like_records(_record("a", "speedup", 1.0).encode())
    assert not looks_like_records(b'{"python": "3.11"}')
    assert not looks_like_records(b"[1, 2]")
