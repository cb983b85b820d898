"""``perfdash scale``: real DDP ranks (gloo) on this CPU, tiny real models, one core per rank."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import pytest

from perfdash.cli import main
from perfdash.contract import read_accuracy_csv, read_performance_csv, read_samples
from perfdash.manifest import Manifest
from perfdash.resultfiles import collect
from runner.distributed import cpu_slices, rank_environment
from runner.options import OptionsError
from runner.scale import SUMMARY_FILE, ScaleOptions, ScalingPoint, check, run_scaling, scaling_factor, with_scaling

DATA = Path(__file__).parent / "data"
STEM = "{backend}_torchbench_float32_training_cpu"


def _options(tmp_path: Path, model: str, backend: str = "eager", timeout_s: float = 300.0) -> ScaleOptions:
    return ScaleOptions(suite="torchbench", model=model, nproc=2, output_dir=tmp_path, backend=backend,
                        models_file=DATA / "ddp.toml", repeat=4, warmup=2, timeout_s=timeout_s, cores_per_rank=1)


def test_world_sizes_1_and_2_are_runs_that_ingest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "scale"
    code = main(["scale", "--suite", "torchbench", "--models-file", str(DATA / "ddp.toml"), "--model", "tiny_cnn",
                 "--nproc", "2", "--repeat", "5", "--warmup", "2", "--timeout", "300", "--output-dir", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "tiny_cnn: inductor float32 training on cpu, DDP, 1 core(s) per rank" in printed
    stem = STEM.format(backend="inductor")
    points = [ScalingPoint(**json.loads(line)) for line in (out / SUMMARY_FILE).read_text().splitlines()]
    assert [(p.world_size, p.status) for p in points] == [(1, "pass"), (2, "pass")]
    for point in points:
        run = out / f"world_size_{point.world_size}"
        manifest = Manifest.read(run / f"{stem}_manifest.json")
        assert (manifest.config.world_size, manifest.config.distributed_backend) == (point.world_size, "gloo")
        assert manifest.config.threads == 1 and manifest.model_errors == {}
        [row] = read_performance_csv(run / f"{stem}_performance.csv")
        [samples] = read_samples(run / f"{stem}_samples.jsonl")
        assert row.batch_size == samples.batch_size == 4  # per rank, as PyTorch's CSV
        assert row.stats.calls_captured and row.stats.calls_captured > 0  # the DDP-wrapped model was compiled
        # the global throughput is the world's batch over the median of its step samples, and matches the latency
        assert samples.eager_throughput == pytest.approx(4 * point.world_size * 1000 / statistics.median(
            samples.eager_ms))
        assert samples.compiled_throughput == pytest.approx(4 * point.world_size * 1000 / row.abs_latency, rel=1e-5)
        assert point.compiled_throughput == samples.compiled_throughput
        assert not (run / f"{stem}_accuracy.csv").exists()  # nothing failed, nothing checked
        assert point.launch_s and point.init_process_group_s is not None and point.first_step_s
    one, two = points
    assert two.eager_scaling == pytest.approx(two.eager_throughput / (2 * one.eager_throughput))  # type: ignore[operator]
    assert one.compiled_scaling == pytest.approx(1.0)
    # both world sizes are ordinary runs: `perfdash ingest` takes the whole directory as it is
    assert sorted(p.name for p in collect([str(out)])) == ["world_size_1", "world_size_2"]
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'p.db'}")
    assert main(["ingest", str(out)]) == 0
    stored = [line for line in capsys.readouterr().out.splitlines() if " stored: " in line]
    assert len(stored) == 2 and all("torchbench inductor, 1 models" in line for line in stored), stored
    # ... and the Training page's scaling chart draws them with the factors the command printed
    from service.db import make_engine, make_session_factory
    from service.queries.training import training_view

    engine = make_engine(f"sqlite:///{tmp_path / 'p.db'}")
    try:
        with make_session_factory(engine)() as session:
            [experiment] = training_view(session, "tiny_cnn").scaling
    finally:
        engine.dispose()
    assert [p.world_size for p in experiment.points] == [1, 2]
    assert experiment.points[1].compiled_scaling == pytest.approx(two.compiled_scaling)
    assert experiment.points[1].eager_throughput == pytest.approx(two.eager_throughput)


def test_a_rank_that_raises_ends_its_world_size_as_a_status_row(tmp_path: Path) -> None:
    start = time.perf_counter()
    report = run_scaling(_options(tmp_path, "raises_on_rank1_of_2"))
    # rank 0 waits in the all-reduce for a peer that is gone: the launcher ends it, not gloo's 30-minute timeout
    assert time.perf_counter() - start < 120
    one, two = report.points
    assert one.status == "pass" and one.eager_throughput
    assert two.status == "eager_fail_to_run" and two.eager_scaling is None
    run = tmp_path / "world_size_2"
    stem = STEM.format(backend="eager")
    [acc] = read_accuracy_csv(run / f"{stem}_accuracy.csv")
    assert (acc.name, acc.accuracy) == ("raises_on_rank1_of_2", "eager_fail_to_run")
    assert (run / f"{stem}_performance.csv").read_text().splitlines()[1] == "cpu,raises_on_rank1_of_2,0,0.0,0.0"
    error = Manifest.read(run / f"{stem}_manifest.json").model_errors["raises_on_rank1_of_2"]
    assert "world size 2" in error and "rank 1" in error and "injected failure" in error
    assert (run / "logs" / stem / "raises_on_rank1_of_2" / "rank0.log").exists()


def test_a_hanging_rank_times_out_and_the_next_world_size_runs(tmp_path: Path) -> None:
    report = run_scaling(_options(tmp_path, "hangs_on_rank0_of_1", timeout_s=40.0))
    one, two = report.points
    assert one.status == "timeout" and one.wall_s is not None and one.wall_s < 60
    assert "timed out in phase eager_warmup" in (one.error or "")
    assert two.status == "pass" and two.eager_throughput and two.compiled_throughput
    assert two.eager_scaling is None  # no world size 1 to scale from
    [acc] = read_accuracy_csv(tmp_path / "world_size_1" / f"{STEM.format(backend='eager')}_accuracy.csv")
    assert acc.accuracy == "timeout"
    # run again: both world sizes are read back from their files, nothing is launched or written twice
    again = run_scaling(_options(tmp_path, "hangs_on_rank0_of_1", timeout_s=40.0))
    assert [(p.status, p.launch_s) for p in again.points] == [("timeout", None), ("pass", None)]
    assert len(read_performance_csv(tmp_path / "world_size_2" / f"{STEM.format(backend='eager')}_performance.csv")) \
        == 1


def test_cpu_slices_and_torchrun_variables() -> None:
    assert cpu_slices([3, 0, 2, 1], 2, 2) == [(0, 1), (2, 3)]
    assert cpu_slices([0, 1], 1, 1) == [(0,)]
    with pytest.raises(ValueError, match="need 3 cores"):
        cpu_slices([0, 1], 3, 1)
    env = rank_environment(1, 2, 29500, (1,))
    assert {k: env[k] for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")} == {
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}
    assert env["OMP_NUM_THREADS"] == "1"


def test_scaling_factor() -> None:
    assert scaling_factor(180.0, 2, 100.0) == pytest.approx(0.9)
    assert scaling_factor(None, 2, 100.0) is None and scaling_factor(180.0, 2, None) is None

    def point(world_size: int, eager: float | None) -> ScalingPoint:
        return ScalingPoint(model="m", world_size=world_size, status="pass", directory="d", batch_size=1,
                            eager_throughput=eager, compiled_throughput=eager)

    scaled = with_scaling([point(1, 100.0), point(2, 150.0), point(3, None)])
    assert [p.eager_scaling for p in scaled] == [pytest.approx(1.0), pytest.approx(0.75), None]


def test_options_that_cannot_run_are_refused(tmp_path: Path) -> None:
    with pytest.raises(OptionsError, match="--nproc"):
        check(ScaleOptions(suite="torchbench", model="m", nproc=0))
    with pytest.raises(OptionsError, match="cores"):
        check(ScaleOptions(suite="torchbench", model="m", nproc=1, cores_per_rank=100_000))
    with pytest.raises(OptionsError, match="cannot train"):
        check(ScaleOptions(suite="torchbench", model="m", nproc=1, backend="onnxruntime"))
