"""The fork server: every worker is forked from one server per run that has imported torch and the compiler, each in
a process group of its own; a server that dies is replaced; one that cannot start leaves fresh interpreters."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from runner.api import make_job, run_suite
from runner.options import RunOptions, validate
from runner.process import ForkServer

DATA = Path(__file__).parent / "data"
TIMEOUT_S = 60.0


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _options(tmp_path: Path, log: Path, only: str | None = None, cold_start: bool = False) -> RunOptions:
    return RunOptions(suite="torchbench", models_file=DATA / "fork_server.toml", backend="aot_eager", repeat=2,
                      performance=True, timeout_s=TIMEOUT_S, output_dir=tmp_path / "out", cold_start=cold_start,
                      only=only, extra_env={"PERFDASH_TEST_PROCESS_LOG": str(log)})


def test_workers_are_forked_from_one_server_and_a_dead_server_is_replaced(tmp_path: Path) -> None:
    log = tmp_path / "processes.jsonl"
    report = run_suite(_options(tmp_path, log))
    assert {o.name: o.status for o in report.outcomes} == {
        "first": "pass", "kills_server": "infra_error", "second": "pass", "third": "pass"}
    killed = next(o for o in report.outcomes if o.name == "kills_server")
    assert killed.error is not None and "fork server exited" in killed.error
    first, second, third = _records(log)
    for worker in (first, second, third):
        assert worker["pgid"] == worker["pid"]  # its own process group: a timeout kills it and its children
        assert worker["ppid"] != os.getpid()  # forked by a server, not started by this process
        assert worker["compiler_imported"] is True  # the server imported Inductor before forking
        # The default allocator's MALLOC_CONF asks for jemalloc's background threads; the fork left them behind.
        assert worker["jemalloc_background_threads"] is True
    assert second["ppid"] == third["ppid"]  # one server for consecutive models
    assert first["ppid"] != second["ppid"]  # the killed server was replaced by a new one
    assert len({first["pid"], second["pid"], third["pid"]}) == 3
    assert report.server_start_s > 0


def test_a_server_that_cannot_start_leaves_fresh_interpreters(tmp_path: Path,
                                                               capfd: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "processes.jsonl"
    options = _options(tmp_path, log, only="first")
    suite, [spec] = validate(options)
    # No time to start: the server is given up on before it could have imported torch.
    with ForkServer(env=options.worker_env(), preload=[], log_path=tmp_path / "server.log",
                    start_timeout_s=0.0) as server:
        outcome = server.run(make_job(options, suite, spec), {}, TIMEOUT_S, tmp_path / "first.log")
        again = server.run(make_job(options, suite, spec), {}, TIMEOUT_S, tmp_path / "first.log")
    assert outcome.result is not None and outcome.result.failure is None
    assert again.result is not None and again.result.failure is None
    assert "fork server did not start" in capfd.readouterr().err
    [first, second] = _records(log)
    assert first["ppid"] == second["ppid"] == os.getpid()  # each started by this process as a fresh interpreter
    assert first["pgid"] == first["pid"]


def test_cold_start_gives_each_forked_worker_a_fresh_inductor_cache(tmp_path: Path) -> None:
    """Inductor reads its cache directory at each lookup, so a per-model setting reaches a worker forked from a server
    that imported Inductor with the run's environment."""
    log = tmp_path / "processes.jsonl"
    report = run_suite(_options(tmp_path, log, only="first", cold_start=True))
    [outcome] = report.outcomes
    assert outcome.status == "pass"
    [worker] = _records(log)
    cache = str(worker["inductor_cache"])
    assert Path(cache).name.startswith("perfdash-inductor-") and cache != os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    assert not Path(cache).exists()  # removed once the model finished


def test_a_server_that_died_between_models_is_restarted(tmp_path: Path) -> None:
    log = tmp_path / "processes.jsonl"
    options = _options(tmp_path, log, only="first")
    suite, [spec] = validate(options)
    with ForkServer(env=options.worker_env(), preload=[], log_path=tmp_path / "server.log") as server:
        first = server.run(make_job(options, suite, spec), {}, TIMEOUT_S, tmp_path / "first.log")
        [worker] = _records(log)
        os.kill(int(worker["ppid"]), signal.SIGKILL)  # the server, idle between two models
        second = server.run(make_job(options, suite, spec), {}, TIMEOUT_S, tmp_path / "first.log")
    assert first.result is not None and second.result is not None and second.result.failure is None
    before, after = _records(log)
    assert before["ppid"] != after["ppid"] != os.getpid()  # a new server, not the fallback
