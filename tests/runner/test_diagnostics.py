"""Issue 42 item 5: where a model's wall time goes (the manifest's model_phases), and diagnostics after the timed loop
(the kernel profile, the code fingerprint) that raise, crash or run past their budget never cost the timed results.
Real workers, Inductor on tiny models whose kernel profile is booby-trapped (tests/runner/models.py: ProfileTrap)."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfdash.contract import read_accuracy_csv, read_performance_csv, read_samples
from perfdash.manifest import COMPILE_LATENCY_DEFINITION, Manifest, ModelPhases
from runner.api import RunReport, make_job, run_suite
from runner.options import RunOptions, validate
from runner.process import run_worker

DATA = Path(__file__).parent / "data"
BUDGET_S = 8.0  # a tiny model's profile takes well under a second; the hanging one never ends


@pytest.fixture(scope="module")
def trapped(tmp_path_factory: pytest.TempPathFactory) -> RunReport:
    out = tmp_path_factory.mktemp("diagnostics")
    return run_suite(RunOptions(suite="torchbench", models_file=DATA / "diagnostics.toml", backend="inductor",
                                repeat=3, timeout_s=240.0, diagnostic_budget_s=BUDGET_S, output_dir=out))


def test_a_failing_or_overrunning_kernel_profile_keeps_the_timed_results(trapped: RunReport) -> None:
    performance = {row.name: row for row in read_performance_csv(trapped.paths.performance)}
    assert set(performance) == {"profile_hangs", "profile_aborts", "profile_raises"}
    for row in performance.values():
        assert row.speedup > 0 and row.abs_latency > 0 and row.compilation_latency is not None
    samples = {s.name: s for s in read_samples(trapped.paths.samples)}
    assert all(len(samples[name].compiled_ms) == 3 for name in performance)
    assert all(not s.kernel_times for s in samples.values())  # no profile finished
    # The accuracy check the killed workers never reached ran in a worker of its own.
    assert {row.name: row.accuracy for row in read_accuracy_csv(trapped.paths.accuracy)} == dict.fromkeys(
        performance, "pass")
    assert Manifest.read(trapped.paths.manifest).model_errors == {}


def test_the_manifest_says_where_each_model_s_time_went(trapped: RunReport) -> None:
    manifest = Manifest.read(trapped.paths.manifest)
    assert manifest.compile_latency_definition == COMPILE_LATENCY_DEFINITION
    phases = manifest.model_phases
    assert set(phases) == {"profile_hangs", "profile_aborts", "profile_raises"}
    hangs, aborts, raises = phases["profile_hangs"], phases["profile_aborts"], phases["profile_raises"]
    assert "budget" in hangs.diagnostics_cut["kernel_profile"] and hangs.diagnostic_budget_s == BUDGET_S
    assert hangs.seconds["kernel_profile"] >= BUDGET_S - 1  # the parent's clock: the worker never reported it
    assert "SIGABRT" in aborts.diagnostics_cut["kernel_profile"]
    assert raises.diagnostics_cut["kernel_profile"].startswith("raised RuntimeError: the kernel profile raised")
    # The worker that survived its profile went on: fingerprint and the accuracy check's compiled run.
    assert {"load", "eager_validate", "eager_warmup", "compile", "memory", "measure", "kernel_profile", "fingerprint",
            "compiled_run", "import", "fork_and_exit"} <= set(raises.seconds)
    assert raises.wall_s is not None and raises.wall_s >= sum(
        v for k, v in raises.seconds.items() if k not in ("fork_and_exit", "compile_setup")) * 0.99
    assert raises.seconds["compile"] > 0 and raises.seconds["measure"] > 0
    # The compiled warm-up paid the compiler's import as a fresh process does, and says how much (its own figure).
    assert 0 < raises.seconds["compile_setup"] < raises.seconds["compile"]
    assert "fingerprint" not in raises.diagnostics_cut
    assert raises.wall_s < hangs.wall_s  # type: ignore[operator]


def test_model_phases_refuse_impossible_values() -> None:
    ModelPhases(seconds={"compile": 1.5}, wall_s=2.0)
    for bad in ({"seconds": {"compile": -1.0}}, {"seconds": {"Compile phase": 1.0}},
                {"seconds": {"compile": float("nan")}}, {"wall_s": -2.0}):
        with pytest.raises(ValueError):
            ModelPhases.model_validate(bad)


def test_a_fresh_interpreter_worker_is_cut_at_its_budget_too(tmp_path: Path) -> None:
    """The fallback without a fork server (runner.process.run_worker) enforces the same budget."""
    options = RunOptions(suite="torchbench", models_file=DATA / "diagnostics.toml", backend="inductor", repeat=2,
                         performance=True, only="profile_hangs", diagnostic_budget_s=BUDGET_S, output_dir=tmp_path)
    suite, [spec] = validate(options)
    outcome = run_worker(make_job(options, suite, spec), options.worker_env(), 240.0, tmp_path / "worker.log")
    assert outcome.over_budget and not outcome.timed_out and outcome.last_phase == "kernel_profile"
    assert outcome.wall_s < 200  # cut at its budget, long before the model's timeout
    kept = outcome.salvaged()
    assert kept is not None and kept.performance is not None and len(kept.performance.compiled_ms) == 2
    assert "budget" in kept.diagnostics_cut["kernel_profile"]
