"""``perfdash run --processes K``: a model's performance measured in K real worker processes, pooled into one result."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from perfdash.contract import ModelSamples, read_accuracy_csv, read_performance_csv, read_samples
from perfdash.generated_code import CodeFingerprint
from perfdash.manifest import Manifest
from runner.api import RunReport, run_suite
from runner.execute import run_job
from runner.options import RunOptions
from runner.outcome import pool_processes
from runner.protocol import Job, Performance
from runner.suites.base import ModelSpec, Tolerance

DATA = Path(__file__).parent / "data"
# Long enough for a worker to import torch and compile a tiny model cold on a busy 2-core machine.
TIMEOUT_S = 300.0


def _options(out: Path, processes: int, repeat: int) -> RunOptions:
    # Inductor with a fresh cache per model: the first worker compiles cold, the later ones find its cache.
    return RunOptions(suite="torchbench", models_file=DATA / "tiny_real.toml", only="tiny_mlp", backend="inductor",
                      cold_start=True, repeat=repeat, processes=processes, timeout_s=TIMEOUT_S, output_dir=out)


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> RunReport:
    return run_suite(_options(tmp_path_factory.mktemp("three"), processes=3, repeat=7))


def test_three_processes_give_one_row_from_their_pooled_pairs(three: RunReport) -> None:
    (samples,) = read_samples(three.paths.samples)
    # 7 iterations split 3, 2, 2: as many pairs as one worker would time, each marked with its worker
    assert samples.process == (0, 0, 0, 1, 1, 2, 2)
    # each worker read what competed with its timed loop, kept under its own index
    assert [c.process for c in samples.contention] == [0, 1, 2]
    assert all(c.wall_s > 0 and c.involuntary_switches is not None for c in samples.contention)
    # ... and who else used the CPU beside it, through the worker protocol and the samples file (the others' share
    # needs a clock tick inside the loop, as the steal share does: a loop of a few milliseconds may have none)
    assert all(c.own_busy_threads is not None and (c.others_cpu_share is None) == (c.steal_share is None)
               for c in samples.contention)
    assert len(samples.eager_ms) == len(samples.compiled_ms) == 7
    (row,) = read_performance_csv(three.paths.performance)
    assert row.speedup == pytest.approx(statistics.median(samples.eager_ms) / statistics.median(samples.compiled_ms),
                                        rel=1e-3)
    assert row.abs_latency == pytest.approx(statistics.median(samples.compiled_ms), rel=1e-3)
    assert row.compilation_latency is not None and row.compilation_latency > 0
    # the first worker checked accuracy and fingerprinted the code; the later ones only timed
    assert [r.accuracy for r in read_accuracy_csv(three.paths.accuracy)] == ["pass"]
    assert samples.code is not None
    manifest = Manifest.read(three.paths.manifest)
    assert manifest.config.processes == 3 and manifest.config.repeat == 7
    assert manifest.model_errors == {}
    assert manifest.model_phases["tiny_mlp"].seconds["later_processes"] > 0


def test_the_later_workers_say_what_they_spent_per_phase(three: RunReport) -> None:
    seconds = Manifest.read(three.paths.manifest).model_phases["tiny_mlp"].seconds
    # the two later workers' phases, summed, beside the first worker's own
    for phase in ("import", "load", "eager_warmup", "compile", "memory", "measure", "fork_and_exit"):
        assert seconds[f"later_{phase}"] >= 0
    assert seconds["later_compile"] > 0 and seconds["later_measure"] > 0
    # they checked no accuracy and ran no diagnostics
    skipped = {"later_fp64_reference", "later_compiled_run", "later_kernel_profile", "later_fingerprint"}
    assert not skipped & set(seconds)
    whole = ("later_processes", "later_compile_setup")  # their wall, and a part of their compile
    parts = sum(v for k, v in seconds.items() if k.startswith("later_") and k not in whole)
    assert seconds["later_compile"] < parts <= seconds["later_processes"] * 1.001  # parts of their wall, no more


def _compile_job(warm_compile_pool: bool) -> Job:
    spec = ModelSpec(name="tiny_mlp", batch_size=4, builder="py:models.py:tiny_mlp", base_dir=str(DATA.parent))
    return Job(suite="torchbench", spec=spec, batch_size=4, device="cpu", dtype="float32", mode="inference",
               backend="inductor", compile_mode="default", dynamic_shapes=False, threads=None, repeat=1, warmup=1,
               accuracy=False, performance=True, tolerance=Tolerance(1e-3), diagnostics=False,
               warm_compile_pool=warm_compile_pool)


def test_only_a_worker_whose_compile_latency_counts_starts_the_compile_pool() -> None:
    """The later workers of --processes K compile without starting Inductor's compile-worker pool ahead, as the
    first does for its compile latency: on CPU Inductor builds its C++ kernels without the pool, which only took
    their cores (the pool's processes import torch) and its start's time."""
    from torch._inductor import async_compile

    async_compile.shutdown_compile_workers()  # whatever an earlier test in this process started
    try:
        assert run_job(_compile_job(warm_compile_pool=False), lambda phase: None).performance is not None
        assert not async_compile._pool_set
        assert run_job(_compile_job(warm_compile_pool=True), lambda phase: None).performance is not None
        assert async_compile._pool_set  # the first worker's start, as PyTorch's harness pays it
    finally:
        async_compile.shutdown_compile_workers()


def test_one_process_is_as_before(tmp_path: Path) -> None:
    report = run_suite(_options(tmp_path, processes=1, repeat=3))
    line = report.paths.samples.read_text().splitlines()[0]
    assert "process" not in json.loads(line)  # the samples file of one worker is the format it always was
    (samples,) = read_samples(report.paths.samples)
    assert samples.process == () and len(samples.eager_ms) == 3
    assert [c.process for c in samples.contention] == [0]  # one worker, one reading
    manifest = Manifest.read(report.paths.manifest)
    assert manifest.config.processes == 1
    assert "later_processes" not in manifest.model_phases["tiny_mlp"].seconds


def _performance(eager: tuple[float, ...], compile_s: float, peak: float) -> Performance:
    return Performance(eager_ms=eager, compiled_ms=tuple(v / 2 for v in eager), compilation_latency=compile_s,
                       eager_peak_mem=peak, dynamo_peak_mem=peak / 2,
                       code=CodeFingerprint(digest="d" * 64, graphs=1, kernels=1, kernel_digests=()))


def test_the_pool_takes_compile_latency_and_memory_from_the_first_worker() -> None:
    first = _performance((3.0, 3.1), compile_s=9.0, peak=2.0)
    pooled = pool_processes(first, [(1, _performance((4.0,), compile_s=0.5, peak=5.0)),
                                    (3, _performance((5.0, 5.5), compile_s=0.4, peak=6.0))])
    assert pooled.eager_ms == (3.0, 3.1, 4.0, 5.0, 5.5)
    assert pooled.compiled_ms == (1.5, 1.55, 2.0, 2.5, 2.75)
    assert pooled.process == (0, 0, 1, 3, 3)  # a worker that measured nothing (2) leaves no index
    assert (pooled.compilation_latency, pooled.eager_peak_mem, pooled.dynamo_peak_mem) == (9.0, 2.0, 1.0)
    assert pooled.code == first.code


def test_samples_keep_the_process_of_each_pair() -> None:
    samples = ModelSamples(name="m", batch_size=1, eager_ms=(1.0, 2.0), compiled_ms=(0.5, 1.0), process=(0, 1))
    assert ModelSamples.from_json(samples.to_json()) == samples
    with pytest.raises(ValueError, match="one non-negative worker index per pair"):
        ModelSamples(name="m", batch_size=1, eager_ms=(1.0, 2.0), compiled_ms=(0.5, 1.0), process=(0,))
