"""--allocator: which allocator and OpenMP runtime CPU workers start with, that the choice is part of the recorded
configuration, and that a worker gets exactly the choice whatever the runner itself inherited."""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from runner import allocator
from runner.allocator import (
    CPU_MALLOC_ENV,
    DASHBOARD_MALLOC_CONF,
    AllocatorUnavailable,
    allocator_env,
    check,
    find_library,
    process_env,
)
from runner.cli import options_from_args, register
from runner.options import OptionsError, RunOptions, validate

ROOT = Path(__file__).resolve().parents[2]
X86 = platform.machine() == "x86_64"
# What docker/xeon-launch.sh leaves in the runner's own environment (and so in every process it starts).
LAUNCHED = {"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2:/opt/libfaketime.so:/usr/local/lib/libiomp5.so",
            "MALLOC_CONF": "background_thread:true", "KMP_AFFINITY": "compact", "KMP_BLOCKTIME": "1",
            "OMP_NUM_THREADS": "2", "PATH": "/usr/bin"}


def parse(*argv: str) -> RunOptions:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return options_from_args(parser.parse_args(["run", "--suite", "timm_models", *argv]))


def test_default_is_pytorchs_cpu_dashboard_recorded_by_soname() -> None:
    options = parse()
    assert options.allocator == "dashboard"
    env = options.run_config().env
    assert env["MALLOC_CONF"] == DASHBOARD_MALLOC_CONF and "dirty_decay_ms:-1" in env["MALLOC_CONF"]
    if X86:
        assert env["LD_PRELOAD"] == "libjemalloc.so.2:libiomp5.so"
        assert env["KMP_AFFINITY"] == "granularity=fine,compact,1,0" and env["KMP_BLOCKTIME"] == "1"
    assert env["TORCHINDUCTOR_FREEZING"] == "1"  # the rest of the CPU dashboard's settings stay
    assert not any(key in env for key in CPU_MALLOC_ENV)


def test_intel_openmp_only_on_x86() -> None:
    env = allocator_env("dashboard", "cpu", machine="aarch64")
    assert env["LD_PRELOAD"] == "libjemalloc.so.2" and "KMP_AFFINITY" not in env


def test_glibc_and_perfdash_choices_are_different_series() -> None:
    glibc = parse("--allocator", "glibc").run_config()
    tuned = parse("--allocator", "perfdash").run_config()
    dashboard = parse().run_config()
    assert not {"LD_PRELOAD", "MALLOC_CONF", "KMP_AFFINITY", *CPU_MALLOC_ENV} & set(glibc.env)
    assert {k: tuned.env[k] for k in CPU_MALLOC_ENV} == CPU_MALLOC_ENV and "LD_PRELOAD" not in tuned.env
    assert len({repr(sorted(c.env.items())) for c in (glibc, tuned, dashboard)}) == 3


def test_allocator_settings_are_for_cpu_workers_only() -> None:
    for choice in ("dashboard", "perfdash"):
        env = RunOptions(suite="timm_models", device="cuda", allocator=choice).worker_env()
        assert not {"LD_PRELOAD", "MALLOC_CONF", "KMP_AFFINITY", *CPU_MALLOC_ENV} & set(env)


def test_unknown_allocator_is_refused_before_any_model_runs() -> None:
    with pytest.raises(OptionsError, match="--allocator 'pytorch' is not one of dashboard, glibc, perfdash"):
        validate(RunOptions(suite="timm_models", allocator="pytorch"))
    with pytest.raises(SystemExit):
        parse("--allocator", "pytorch")


def test_a_missing_library_is_named_with_what_to_install(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(allocator, "library_directories", lambda: [tmp_path])
    monkeypatch.delenv("JEMALLOC_LIB", raising=False)
    with pytest.raises(OptionsError) as err:
        validate(RunOptions(suite="timm_models"))
    message = str(err.value)
    assert "libjemalloc.so.2 not found in " + str(tmp_path) in message
    assert "apt-get install libjemalloc2" in message and "--allocator glibc" in message
    validate(RunOptions(suite="timm_models", allocator="glibc"))  # needs nothing
    check(RunOptions(suite="timm_models", device="cuda").worker_env())  # GPU workers preload nothing
    monkeypatch.setenv("JEMALLOC_LIB", str(tmp_path / "nowhere.so"))
    with pytest.raises(AllocatorUnavailable, match=r"JEMALLOC_LIB=.*nowhere.so is not a file"):
        find_library("libjemalloc.so.2")


def test_library_path_variables_and_search_order(monkeypatch, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for directory in (first, second):
        directory.mkdir()
        (directory / "libiomp5.so").write_bytes(b"")
    monkeypatch.setattr(allocator, "library_directories", lambda: [first, second])
    assert find_library("libiomp5.so", environ={}) == first / "libiomp5.so"
    given = tmp_path / "elsewhere.so"
    given.write_bytes(b"")
    assert find_library("libiomp5.so", environ={"IOMP_LIB": str(given)}) == given


def test_a_worker_never_keeps_the_allocator_it_inherited() -> None:
    env = process_env(allocator_env("glibc", "cpu"), base=LAUNCHED)
    assert env["LD_PRELOAD"] == "/opt/libfaketime.so"  # a preload that is not an allocator stays
    assert not {"MALLOC_CONF", "KMP_AFFINITY", "KMP_BLOCKTIME"} & set(env)
    assert env["OMP_NUM_THREADS"] == "2" and env["PATH"] == "/usr/bin"
    tuned = process_env(allocator_env("perfdash", "cpu"), base={**LAUNCHED, "LD_PRELOAD": LAUNCHED["LD_PRELOAD"]})
    assert {k: tuned[k] for k in CPU_MALLOC_ENV} == CPU_MALLOC_ENV and "MALLOC_CONF" not in tuned
    assert not any(key in process_env({}, base=tuned) for key in CPU_MALLOC_ENV)


@pytest.mark.skipif(not X86, reason="the dashboard preloads Intel's OpenMP on x86-64 only")
def test_dashboard_worker_really_runs_on_jemalloc_and_intel_openmp() -> None:
    """The environment process_env builds (the one every worker, fork server and DDP rank starts with) makes the
    dynamic linker map both libraries into a fresh interpreter, with the recorded variables set."""
    probe = ("import os, torch; maps = open('/proc/self/maps').read(); "
             "print('jemalloc' if 'libjemalloc.so.2' in maps else '-', 'iomp' if 'libiomp5.so' in maps else '-', "
             "os.environ['MALLOC_CONF'], torch.ones(64, 64).matmul(torch.ones(64, 64)).sum().item())")
    env = process_env(allocator_env("dashboard", "cpu"), base={"PATH": "/usr/bin:/bin"})
    assert Path(env["LD_PRELOAD"].split(":")[0]).name == "libjemalloc.so.2"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120,
                         check=True).stdout.split()
    assert out == ["jemalloc", "iomp", DASHBOARD_MALLOC_CONF, str(64.0 * 64 * 64)]
    glibc = process_env(allocator_env("glibc", "cpu"), base=env)
    out = subprocess.run([sys.executable, "-c", probe.replace("os.environ['MALLOC_CONF']", "'none'")], env=glibc,
                         capture_output=True, text=True, timeout=120, check=True).stdout.split()
    assert out[:2] == ["-", "-"]


# Forks like the fork server, then prints jemalloc's background-thread state: the server's, the child's as the fork
# leaves it, what restart_jemalloc_threads returned, and the child's after it.
FORK_PROBE = """
import os
from runner.allocator import jemalloc_background_threads as state, restart_jemalloc_threads
server = state()
read, write = os.pipe()
if os.fork() == 0:
    forked = state()
    restarted = restart_jemalloc_threads()
    os.write(write, f"{server} {forked} {restarted} {state()}".encode())
    os._exit(0)
os.wait()
print(os.read(read, 100).decode())
"""


def _fork_probe(env: dict[str, str]) -> list[str]:
    return subprocess.run([sys.executable, "-c", FORK_PROBE], env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120, check=True).stdout.split()


def test_a_forked_worker_gets_jemallocs_background_threads_back() -> None:
    """A fork leaves jemalloc's background threads behind (and jemalloc turns the option off in the child): a forked
    worker must turn them back on, or it runs another configuration than MALLOC_CONF records (and PyTorch's dashboard
    runs): 25 % faster eager for lcnet_050 on a 2-core VM (bench/README.md)."""
    dashboard = process_env(allocator_env("dashboard", "cpu"), base={"PATH": "/usr/bin:/bin"})
    assert _fork_probe(dashboard) == ["True", "False", "True", "True"]
    # Where MALLOC_CONF asks for no background threads, none are started.
    without = {**dashboard, "MALLOC_CONF": DASHBOARD_MALLOC_CONF.replace("background_thread:true",
                                                                         "background_thread:false")}
    assert _fork_probe(without) == ["False", "False", "False", "False"]
    # Not jemalloc: nothing to restart.
    glibc = process_env(allocator_env("glibc", "cpu"), base={"PATH": "/usr/bin:/bin"})
    assert _fork_probe(glibc) == ["None", "None", "False", "None"]


def test_openvino_gets_the_dashboard_without_jemalloc() -> None:
    # With jemalloc preloaded OpenVINO's compiled run aborts (tests/runner/test_backends.py runs it for real).
    env = RunOptions(suite="torchbench", backend="openvino").worker_env()
    assert "MALLOC_CONF" not in env and "libjemalloc" not in env.get("LD_PRELOAD", "")
    if X86:
        assert env["LD_PRELOAD"] == "libiomp5.so" and env["KMP_BLOCKTIME"] == "1"
    assert "libjemalloc.so.2" in RunOptions(suite="torchbench", backend="onnxruntime").worker_env()["LD_PRELOAD"]
