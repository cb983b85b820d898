"""The fork server: every worker is forked from one server per run that has imported torch and Dynamo (not Inductor's
compiler, which a fresh process imports in its first compile), each in a process group of its own; a server that dies
is replaced; one that cannot start leaves fresh interpreters."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from runner.api import make_job, run_suite
from runner.options import RunOptions, cuda_device_present, validate
from runner.process import ForkServer

DATA = Path(__file__).parent / "data"
TIMEOUT_S = 60.0


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _options(tmp_path: Path, log: Path, only: str | None = None, cold_start: bool = False,
             env: dict[str, str] | None = None) -> RunOptions:
    return RunOptions(suite="torchbench", models_file=DATA / "fork_server.toml", backend="aot_eager", repeat=2,
                      performance=True, timeout_s=TIMEOUT_S, output_dir=tmp_path / "out", cold_start=cold_start,
                      only=only, extra_env={"PERFDASH_TEST_PROCESS_LOG": str(log), **(env or {})})


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
        # Inductor's compiler is left to the worker's first compile, whose latency pays its import as a fresh
        # process of PyTorch's harness does (issue 42)
        assert worker["compiler_imported"] is False
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
    # An inherited Triton cache (the CUDA image keeps one on the node volume) must not survive a cold start.
    persistent_triton = tmp_path / "node-volume" / "triton"
    report = run_suite(_options(tmp_path, log, only="first", cold_start=True,
                                env={"TRITON_CACHE_DIR": str(persistent_triton)}))
    [outcome] = report.outcomes
    assert outcome.status == "pass"
    [worker] = _records(log)
    cache = str(worker["inductor_cache"])
    assert Path(cache).name.startswith("perfdash-inductor-") and cache != os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    assert Path(str(worker["triton_cache"])).parent == Path(cache)  # Triton's kernels go into the fresh one too
    assert not Path(cache).exists()  # removed once the model finished


def test_without_cold_start_the_inherited_triton_cache_stays(tmp_path: Path) -> None:
    """The counterpart: what the cold start replaces is really what a worker would otherwise use."""
    log = tmp_path / "processes.jsonl"
    persistent_triton = tmp_path / "node-volume" / "triton"
    report = run_suite(_options(tmp_path, log, only="first", env={"TRITON_CACHE_DIR": str(persistent_triton)}))
    assert [o.status for o in report.outcomes] == ["pass"]
    [worker] = _records(log)
    assert worker["triton_cache"] == str(persistent_triton)


PRELOAD = Path(__file__).parent / "preload"  # test-only modules a server under test imports


def _spied_server(tmp_path: Path, modules: list[str]) -> tuple[ForkServer, RunOptions, Path, Path]:
    """A fork server that imports the CUDA spy (tests/runner/preload) first, then ``modules``."""
    log, spy = tmp_path / "processes.jsonl", tmp_path / "cuda_calls.jsonl"
    pythonpath = os.pathsep.join([str(PRELOAD), *filter(None, [os.environ.get("PYTHONPATH")])])
    options = _options(tmp_path, log, only="first",
                       env={"PYTHONPATH": pythonpath, "PERFDASH_TEST_CUDA_SPY_LOG": str(spy)})
    server = ForkServer(env=options.worker_env(), preload=["perfdash_cuda_spy", *modules],
                        log_path=tmp_path / "server.log")
    return server, options, log, spy


def _server_calls(spy: Path, server_pid: int) -> list[str]:
    return [r["call"] for r in (_records(spy) if spy.exists() else []) if r["pid"] == server_pid]


def test_the_fork_server_never_initialises_cuda_before_forking(tmp_path: Path) -> None:
    """Everything a server imports for any suite and backend, then a worker forked and run: the server never called
    what initialises CUDA, and reported it uninitialised."""
    from runner.backends import BACKEND_SPECS
    from runner.suites import available_suites, get_suite

    modules = sorted({name for suite_name in available_suites() for suite in [get_suite(suite_name)]
                      for name in suite.preload(suite.models())}
                     | {name for spec in BACKEND_SPECS.values() for name in spec.preload})
    server, options, log, spy = _spied_server(tmp_path, modules)
    suite, [spec] = validate(options)
    with server:
        outcome = server.run(make_job(options, suite, spec), {}, TIMEOUT_S, tmp_path / "first.log")
        assert server.cuda_state["initialized"] is False
        if not cuda_device_present():  # no driver here at all; with a GPU, torch may map it without initialising
            assert server.cuda_state["driver_loaded"] is False
    assert outcome.result is not None and outcome.result.failure is None
    assert not server.failed_imports, server.failed_imports  # torchbenchmark included (scripts/setup.sh installs it)
    [worker] = _records(log)
    assert worker["ppid"] != os.getpid()  # forked by the server under test
    assert _server_calls(spy, int(worker["ppid"])) == []


def test_a_server_import_that_asks_for_the_gpu_is_caught(tmp_path: Path) -> None:
    """The check can fail: a library that calls torch.cuda.is_available() at import is seen in the server."""
    server, options, log, spy = _spied_server(tmp_path, ["perfdash_touches_cuda"])
    suite, [spec] = validate(options)
    with server:
        server.run(make_job(options, suite, spec), {}, TIMEOUT_S, tmp_path / "first.log")
    [worker] = _records(log)
    assert "torch._C._cuda_getDeviceCount" in _server_calls(spy, int(worker["ppid"]))


def test_a_server_that_initialised_cuda_is_refused_for_fresh_interpreters(tmp_path: Path,
                                                                            capfd: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "processes.jsonl"
    pythonpath = os.pathsep.join([str(PRELOAD), *filter(None, [os.environ.get("PYTHONPATH")])])
    options = _options(tmp_path, log, only="first", env={"PYTHONPATH": pythonpath})
    suite, [spec] = validate(options)
    with ForkServer(env=options.worker_env(), preload=["perfdash_marks_cuda_initialized"],
                    log_path=tmp_path / "server.log") as server:
        outcome = server.run(make_job(options, suite, spec), {}, TIMEOUT_S, tmp_path / "first.log")
    assert outcome.result is not None and outcome.result.failure is None
    assert "initialised CUDA" in capfd.readouterr().err
    [worker] = _records(log)
    assert worker["ppid"] == os.getpid()  # a fresh interpreter started by this process, not a forked worker


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
