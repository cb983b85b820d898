"""The weekly backend cells of the nightly pipeline: xeon runs onnxruntime and openvino, gpu runs onnxruntime and
tensorrt, each beside Inductor and each command accepted by the runner's checks for its device."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

NIGHTLY = Path(__file__).resolve().parents[2] / "Jenkinsfile"


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_weekly_run_adds_one_backend_cell_per_agent_label_and_backend(run_pipeline, extract_commands) -> None:
    record = run_pipeline(NIGHTLY, {"BACKENDS": True, "SUITES": "timm_models", "PARTITIONS": "1",
                                    "THREAD_CONFIGS": "socket"})
    runs = [args for script in record["sh"] for args in extract_commands(script) if args[:1] == ["run"]]
    cells = Counter((_flag(a, "--device"), _flag(a, "--backend")) for a in runs)
    inductor = sum(n for (_, backend), n in cells.items() if backend == "inductor")
    # the nightly cells are still there: xeon 2 dtypes, gpu 3 dtypes x 2 modes x with/without CUDA graphs
    assert inductor == 2 + 12
    assert {k: n for k, n in cells.items() if k[1] != "inductor"} == {
        ("cpu", "onnxruntime"): 1, ("cpu", "openvino"): 1, ("cuda", "onnxruntime"): 1, ("cuda", "tensorrt"): 1}
    for args in runs:
        if _flag(args, "--backend") != "inductor":
            assert (_flag(args, "--dtype"), _flag(args, "--mode")) == ("float32", "inference")
            assert _flag(args, "--backend") in _flag(args, "--output-dir")  # its own results directory
    outputs = [_flag(a, "--output-dir") for a in runs]
    assert len(set(outputs)) == len(outputs)


def test_backend_cells_run_only_weekly(run_pipeline, extract_commands) -> None:
    record = run_pipeline(NIGHTLY, {"SUITES": "timm_models", "PARTITIONS": "1"})
    runs = [args for script in record["sh"] for args in extract_commands(script) if args[:1] == ["run"]]
    assert {_flag(a, "--backend") for a in runs} == {"inductor"}
    crons = re.search(r"parameterizedCron\('''(.*?)'''\)", NIGHTLY.read_text(), re.S).group(1).split("\n")
    weekly = [line.strip() for line in crons if "%" in line]
    assert len(weekly) == 1 and "BACKENDS=true" in weekly[0].split("%")[1].split(";")


def test_xeon_backend_cell_commands_pass_the_runners_checks() -> None:
    """What a xeon backend cell runs is accepted by validate() on a CPU machine with the backends extra."""
    from runner.options import RunOptions, validate

    for backend in ("onnxruntime", "openvino"):
        _, models = validate(RunOptions(suite="timm_models", backend=backend, device="cpu", dtype="float32",
                                        mode="inference"))
        assert models
