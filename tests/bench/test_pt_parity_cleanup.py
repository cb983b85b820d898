"""A side that bench.pt_parity runs dies with the bench, even when the bench is killed outright (SIGKILL, the OOM
killer): a left-over side keeps a core and gigabytes busy through the next measurement (issue 42). PyTorch's harness
arms nothing of its own, so the bench arms it (runner.lifeline.dies_with_this_process), through ``nice``'s exec."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
# Where PyTorch's harness would be, a script that only reports its pid and waits: only the process handling is tested.
WAITING_HARNESS = "import os, pathlib, time\npathlib.Path(os.environ['SIDE_PID_FILE']).write_text(str(os.getpid()))\n" \
                  "time.sleep(300)\n"


def _bench_running_one_side(harness: Path, pid_file: Path, work: Path) -> str:
    return textwrap.dedent(f"""
        from pathlib import Path
        from bench import pt_parity
        args = pt_parity.build_parser().parse_args(
            ["--pytorch-dir", "{harness}", "--pytorch-env", "SIDE_PID_FILE={pid_file}", "--timeout", "600"])
        pt_parity.run_one(args, "pytorch", pt_parity.Model("timm_models", "lcnet_050", 4), "performance", 1,
                          Path("{work}"))
        """)


def _wait_for_pid(pid_file: Path, bench: subprocess.Popen[bytes], timeout_s: float = 60.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert bench.poll() is None, "the bench ended before its side started"
        if pid_file.exists() and pid_file.read_text():
            return int(pid_file.read_text())
        time.sleep(0.1)
    raise AssertionError(f"the side did not start within {timeout_s} s")


def _gone(pid: int, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def test_a_side_dies_with_the_bench_killed_outright(tmp_path: Path) -> None:
    harness = tmp_path / "dynamo"
    harness.mkdir()
    (harness / "common.py").write_text("")
    (harness / "timm_models.py").write_text(WAITING_HARNESS)
    pid_file = tmp_path / "side.pid"
    bench = subprocess.Popen([sys.executable, "-c", _bench_running_one_side(harness, pid_file, tmp_path / "work")],
                             cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    side = _wait_for_pid(pid_file, bench)
    try:
        assert psutil.Process(side).ppid() == bench.pid  # the harness itself, `nice` exec'd into it
        bench.send_signal(signal.SIGKILL)
        bench.wait(timeout=30)
        assert _gone(side), "PyTorch's side outlived the bench that was SIGKILLed"
    finally:
        try:
            os.kill(side, signal.SIGKILL)
        except ProcessLookupError:
            pass
