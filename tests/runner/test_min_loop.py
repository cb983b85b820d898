"""``perfdash run --min-loop-seconds S``: pyperf's minimum time, a tiny model's loop timed for S seconds instead of a
fixed 30 pairs (issue 39 item 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfdash.contract import read_samples
from perfdash.manifest import Manifest, RunConfig
from runner.api import make_job, run_suite
from runner.options import OptionsError, RunOptions, validate
from runner.protocol import MAX_TIMED_PAIRS, PHASE_MEASURE, Job, loop_continues

DATA = Path(__file__).parent / "data"
TIMEOUT_S = 300.0


def _options(out: Path, **extra: object) -> RunOptions:
    return RunOptions(suite="torchbench", models_file=DATA / "tiny_real.toml", only="tiny_mlp", backend="inductor",
                      performance=True, timeout_s=TIMEOUT_S, output_dir=out, **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize(("pairs", "elapsed_s", "repeat", "min_loop_s", "more"), [
    (0, 0.0, 30, 0.0, True),          # the repeat's pairs are always timed ...
    (29, 99.0, 30, 0.0, True),        # ... however long they take
    (30, 0.0, 30, 0.0, False),        # no minimum time: exactly repeat, as PyTorch's harness
    (30, 0.5, 30, 1.0, True),         # done with repeat but not with the minimum time
    (31, 1.0, 30, 1.0, False),        # the minimum time has passed
    (MAX_TIMED_PAIRS, 0.1, 30, 60.0, False),       # the cap on a tiny step's pairs
    (MAX_TIMED_PAIRS, 0.1, 3000, 60.0, True),      # a repeat above the cap is still timed in full
    (3000, 0.1, 3000, 60.0, False),
])
def test_the_loop_times_repeat_pairs_then_until_the_minimum_time(pairs: int, elapsed_s: float, repeat: int,
                                                                 min_loop_s: float, more: bool) -> None:
    assert loop_continues(pairs, elapsed_s, repeat, min_loop_s) is more


def test_each_worker_of_several_gets_its_share_of_the_minimum_time(tmp_path: Path) -> None:
    options = _options(tmp_path, processes=4, repeat=8, min_loop_s=2.0)
    suite, (spec,) = validate(options)
    job = make_job(options, suite, spec)
    assert job.min_loop_s == pytest.approx(0.5)
    assert Job.from_json(job.to_json()).min_loop_s == pytest.approx(0.5)  # it reaches the worker


@pytest.mark.parametrize(("extra", "message"), [
    ({"min_loop_s": -1.0}, r"--min-loop-seconds must be in \[0, --timeout \(300\)\), got -1"),
    ({"min_loop_s": 300.0}, r"--min-loop-seconds must be in \[0, --timeout \(300\)\), got 300"),
])
def test_a_minimum_time_that_cannot_work_is_refused_before_any_model(tmp_path: Path, extra: dict[str, object],
                                                                     message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        validate(_options(tmp_path, **extra))


def test_an_older_manifest_reads_as_exactly_repeat_pairs() -> None:
    config = RunConfig.model_validate({"suite": "torchbench", "backend": "inductor"})
    assert config.min_loop_s == 0.0
    with pytest.raises(ValueError):
        RunConfig.model_validate({"suite": "torchbench", "backend": "inductor", "min_loop_s": -0.5})


def test_a_real_worker_times_pairs_until_the_minimum_time(tmp_path: Path) -> None:
    report = run_suite(_options(tmp_path, repeat=3, min_loop_s=0.3))
    (samples,) = read_samples(report.paths.samples)
    # a tiny MLP's pair takes well under 0.1 s, so 3 pairs end long before 0.3 s: the loop went on, within the cap
    assert 3 < len(samples.eager_ms) == len(samples.compiled_ms) <= MAX_TIMED_PAIRS
    timed_s = (sum(samples.eager_ms) + sum(samples.compiled_ms)) / 1000
    loop_wall = Manifest.read(report.paths.manifest).model_phases["tiny_mlp"].seconds[PHASE_MEASURE]
    # it stopped at the minimum time (or the cap) and not long after: the pairs are most of the loop's wall
    assert loop_wall >= 0.3 or len(samples.eager_ms) == MAX_TIMED_PAIRS
    assert timed_s <= loop_wall
    assert Manifest.read(report.paths.manifest).config.min_loop_s == 0.3
