"""The GPU settings of PyTorch's harness (runner.gpu_settings): TF32 and the reduced-precision SDPA math in every
timed CUDA run, Inductor's CUDA graphs in the headline CUDA series and off in its no_cudagraphs variant, all recorded
in the configuration's env; the accuracy check runs without them. No GPU here: the worker applies the settings from
its environment whatever the device, so a CPU run given the CUDA entries shows where they are in force."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfdash.axes import run_command, stored_axes
from perfdash.manifest import Manifest
from runner.api import run_suite
from runner.gpu_settings import CUDAGRAPHS, MATMUL_TF32, SDPA_REDUCED_PRECISION, in_force, timed_run_env
from runner.options import OptionsError, RunOptions, _check_cudagraphs, validate

DATA = Path(__file__).parent / "data"


def test_cuda_runs_record_the_harness_settings_and_cpu_runs_are_unchanged() -> None:
    cuda = RunOptions(suite="torchbench", device="cuda").run_config()
    assert cuda.env[MATMUL_TF32] == cuda.env[SDPA_REDUCED_PRECISION] == cuda.env[CUDAGRAPHS] == "1"
    assert cuda.key().filename("performance") == "inductor_torchbench_float32_inference_cuda_performance.csv"
    no_graphs = RunOptions(suite="torchbench", device="cuda", disable_cudagraphs=True).run_config()
    assert no_graphs.env[CUDAGRAPHS] == "0" and no_graphs.env[MATMUL_TF32] == "1"
    assert no_graphs.key().filename("performance") == \
        "inductor_no_cudagraphs_torchbench_float32_inference_cuda_performance.csv"
    autotuned = RunOptions(suite="timm_models", device="cuda", compile_mode="max-autotune", disable_cudagraphs=True)
    assert autotuned.variant == "max_autotune_no_cudagraphs"  # PyTorch CI's inductor_max_autotune_no_cudagraphs
    # other backends on CUDA: TF32 and SDPA (the eager side too), no Inductor setting
    assert timed_run_env("cuda", "aot_eager") == {MATMUL_TF32: "1", SDPA_REDUCED_PRECISION: "1"}
    cpu = RunOptions(suite="torchbench", device="cpu").run_config()
    assert not set(cpu.env) & {MATMUL_TF32, SDPA_REDUCED_PRECISION, CUDAGRAPHS}  # CPU series keep their keys
    assert in_force(no_graphs.env) == {"tf32": True, "sdpa_reduced": True, "cudagraphs": False}


def test_disable_cudagraphs_is_a_cuda_inductor_series(tmp_path: Path) -> None:
    with pytest.raises(OptionsError, match="only Inductor on CUDA"):
        validate(RunOptions(suite="torchbench", device="cpu", disable_cudagraphs=True,
                            models_file=DATA / "gpu_settings.toml", output_dir=tmp_path))
    with pytest.raises(OptionsError, match="only Inductor on CUDA"):
        _check_cudagraphs(RunOptions(suite="torchbench", device="cuda", backend="aot_eager", disable_cudagraphs=True))
    with pytest.raises(OptionsError, match="reduce-overhead"):
        _check_cudagraphs(RunOptions(suite="torchbench", device="cuda", compile_mode="reduce-overhead",
                                     disable_cudagraphs=True))
    _check_cudagraphs(RunOptions(suite="torchbench", device="cuda", disable_cudagraphs=True))


class _Stored:
    """A stored configuration's columns (service.models.Configuration), as the Model page and issues read them."""

    def __init__(self, **columns: object) -> None:
        self.__dict__.update(columns)


def test_the_repro_command_of_a_no_cudagraphs_series_disables_them() -> None:
    columns = dict(suite="huggingface", backend="inductor", variant="no_cudagraphs", compile_mode="default",
                   device="cuda", dtype="amp", mode="training", threads=None, thread_config="all-cores",
                   batch_size_override=None, dynamic_shapes=False, env={}, world_size=1, distributed_backend=None)
    command = run_command(stored_axes(_Stored(**columns)), "BertForMaskedLM")
    assert "--disable-cudagraphs" in command.split()
    headline = run_command(stored_axes(_Stored(**{**columns, "variant": ""})), "BertForMaskedLM")
    assert "--disable-cudagraphs" not in headline.split()


def test_timed_phases_run_with_the_harness_settings_and_the_accuracy_check_without(tmp_path: Path) -> None:
    log = tmp_path / "settings.jsonl"
    env = {**timed_run_env("cuda", "inductor"), "PERFDASH_TEST_SETTINGS_LOG": str(log)}
    options = RunOptions(suite="torchbench", models_file=DATA / "gpu_settings.toml", backend="aot_eager", repeat=2,
                         warmup=1, timeout_s=120.0, output_dir=tmp_path / "out", extra_env=env)
    report = run_suite(options)
    assert [o.status for o in report.outcomes] == ["pass"]
    calls = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    checked = [c for c in calls if c["deterministic"]]  # the accuracy check's eager runs
    timed = [c for c in calls if not c["deterministic"]]  # validation, warm-up, timed loop
    assert checked and timed
    assert all(not c["tf32"] and not c["sdpa_reduced"] for c in checked)
    assert all(c["tf32"] and c["sdpa_reduced"] for c in timed)
    # Inductor read TORCHINDUCTOR_CUDAGRAPHS when the fork server imported it with the run's environment.
    assert all(c["cudagraphs"] for c in calls)
    manifest = Manifest.read(report.paths.manifest)
    assert in_force(manifest.config.env) == {"tf32": True, "sdpa_reduced": True, "cudagraphs": True}


def test_a_bisection_of_a_no_cudagraphs_series_measures_that_series() -> None:
    """The service's request names the stored variant; the bisect tool's perfdash run measures the same series."""
    from perfbisect.service import BisectionJob

    from perfdash.cli import build_parser
    from runner.cli import options_from_args

    job = BisectionJob.from_json({"id": 3, "suite": "timm_models", "model": "m", "metric": "speedup",
                                  "backend": "inductor", "variant": "no_cudagraphs", "device": "cuda",
                                  "dtype": "amp", "mode": "training", "good_commit": "a1", "bad_commit": "b2"})
    args = job.target.run_args(Path("out"))
    assert "--disable-cudagraphs" in args
    options = options_from_args(build_parser().parse_args(["run", *args]))
    assert options.run_config().key().backend_variant == "inductor_no_cudagraphs" == job.target.key().backend_variant
