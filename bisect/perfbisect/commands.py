"""The oracle of a real repository: check a commit out, build it with ``--build``, measure it with ``--measure``.

Build results are cached per commit in ``CACHE/<sha>/``: the checkout (``src/``, where the build's products stay),
``build.json`` (built or not, and why) and ``build.log``. A commit that failed to build once is skipped at once on
every later run; one that built is not built again. Commands run through the shell with the checkout as the working
directory and these variables set: ``PERFBISECT_SHA``, ``PERFBISECT_REPEAT`` (measurement index, from 0),
``PERFBISECT_CACHE`` (the commit's cache directory, for artifacts a build wants to keep).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from perfbisect.gitops import checkout
from perfbisect.procedure import CRASH, MeasureFailed
from perfbisect.stats import NoValue, Sample, is_status, parse_output


@dataclass(frozen=True, slots=True)
class CommandResult:
    returncode: int | None  # None: timed out
    stdout: str
    stderr: str
    seconds: float


def _start(cmd: str, cwd: Path, env: Mapping[str, str], cpus: frozenset[int] | None = None
           ) -> subprocess.Popen[str]:
    """``cmd`` through the shell in its own process group (so a timeout kills the whole tree it started), on
    ``cpus`` only when given (everything it starts inherits them)."""
    return subprocess.Popen(cmd, shell=True, cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)


def _finish(proc: subprocess.Popen[str], started: float, timeout: float | None) -> CommandResult:
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        return CommandResult(proc.returncode, stdout, stderr, time.monotonic() - started)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        stdout, stderr = proc.communicate()
        return CommandResult(None, stdout, stderr, time.monotonic() - started)


def run_command(cmd: str, cwd: Path, env: Mapping[str, str], timeout: float | None) -> CommandResult:
    """Run ``cmd`` through the shell in its own process group, so a timeout kills the whole tree it started."""
    started = time.monotonic()
    proc = _start(cmd, cwd, env)
    try:
        return _finish(proc, started, timeout)
    except KeyboardInterrupt:
        # The command runs in its own session (so a timeout can kill its children): Ctrl-C must reach it by hand.
        _kill_group(proc)
        proc.communicate()
        raise


@dataclass(frozen=True, slots=True)
class PlacedCommand:
    """One side of a duet: the command, where it runs, and the CPUs it is held to."""

    cmd: str
    cwd: Path
    env: Mapping[str, str]
    cpus: frozenset[int]


def run_at_once(commands: Sequence[PlacedCommand], timeout: float | None) -> list[CommandResult]:
    """Start every command at once, each on its own CPUs, and wait for all (each with its own ``timeout``; a thread
    per command reads its pipes, so one side's output never blocks the other)."""
    started = time.monotonic()
    procs = [_start(c.cmd, c.cwd, c.env, c.cpus) for c in commands]
    with ThreadPoolExecutor(max_workers=len(procs)) as pool:
        futures = [pool.submit(_finish, proc, started, timeout) for proc in procs]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for proc in procs:  # Ctrl-C, or a reader that failed: no side outlives the duet
                _kill_group(proc)
            raise


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass  # already gone


@dataclass(slots=True)
class CommandOracle:
    repo: Path
    measure_cmd: str
    cache_dir: Path
    build_cmd: str | None = None
    build_timeout: float | None = None
    measure_timeout: float | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    log: Callable[[str], None] = field(default=lambda _msg: None)

    def commit_dir(self, sha: str) -> Path:
        return self.cache_dir / sha

    def source(self, sha: str) -> Path:
        return checkout(self.repo, sha, self.commit_dir(sha) / "src")

    def env(self, sha: str, repeat: int | None = None) -> dict[str, str]:
        env = {**os.environ, **self.extra_env, "PERFBISECT_SHA": sha, "PERFBISECT_CACHE": str(self.commit_dir(sha))}
        if repeat is not None:
            env["PERFBISECT_REPEAT"] = str(repeat)
        return env

    def build(self, sha: str) -> str | None:
        record_path = self.commit_dir(sha) / "build.json"
        src_exists = (self.commit_dir(sha) / "src" / ".git").exists()
        if record_path.exists():
            record = json.loads(record_path.read_text(encoding="utf-8"))
            if not record["ok"]:
                self.log(f"{sha[:10]}: build failed before (cached): {record['reason']}")
                return str(record["reason"])
            if src_exists:
                return None
        src = self.source(sha)
        if self.build_cmd is None:
            return None
        self.log(f"{sha[:10]}: building")
        result = run_command(self.build_cmd, src, self.env(sha), self.build_timeout)
        (self.commit_dir(sha) / "build.log").write_text(result.stdout + result.stderr, encoding="utf-8")
        if result.returncode is None:
            reason = f"build timed out after {self.build_timeout:g} s"
        elif result.returncode != 0:
            reason = f"build exited with {result.returncode}: {_last_line(result.stderr or result.stdout)}"
        else:
            reason = None
        self.record_build(sha, reason, result.seconds, self.build_cmd)
        return reason

    def record_build(self, sha: str, reason: str | None, seconds: float, command: str | None) -> None:
        record_path = self.commit_dir(sha) / "build.json"
        record_path.parent.mkdir(parents=True, exist_ok=True)
        record = {"ok": reason is None, "reason": reason, "seconds": round(seconds, 3), "command": command}
        tmp = record_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record), encoding="utf-8")
        tmp.replace(record_path)

    def placed(self, sha: str, index: int, cpus: frozenset[int] | None
               ) -> tuple[PlacedCommand, Callable[[CommandResult], Sample]]:
        """The measure command of ``sha``'s ``index``-th measurement, on ``cpus`` (all when None; the command reads
        them as ``PERFBISECT_CPUS``), and what reads its sample off its result."""
        env = self.env(sha, index)
        if cpus:
            env["PERFBISECT_CPUS"] = ",".join(map(str, sorted(cpus)))
        return PlacedCommand(self.measure_cmd, self.source(sha), env, cpus or frozenset()), self._sample

    def _sample(self, result: CommandResult) -> Sample:
        if result.returncode is None:
            raise MeasureFailed(f"timed out after {self.measure_timeout:g} s", status="timeout")
        try:
            value = parse_output(result.stdout)
        except NoValue as exc:
            raise MeasureFailed(f"exit {result.returncode}, {exc}: {_last_line(result.stderr)}", status=CRASH) from None
        if result.returncode != 0 and not is_status(value):
            # A number printed before a crash is not a measurement.
            raise MeasureFailed(f"exit {result.returncode}: {_last_line(result.stderr)}", status=CRASH)
        return value

    def measure(self, sha: str, index: int) -> Sample:
        command, read = self.placed(sha, index, None)
        return read(run_command(command.cmd, command.cwd, command.env, self.measure_timeout))

    def measure_duet(self, sides: Sequence[tuple[str, int, frozenset[int]]]) -> list[Sample | MeasureFailed]:
        """A duet: each (commit, its measurement index, its CPUs) measured at the same time as the others; a side
        that failed is its MeasureFailed, in its place."""
        prepared = [self.placed(sha, index, cpus) for sha, index, cpus in sides]
        results = run_at_once([command for command, _ in prepared], self.measure_timeout)
        samples: list[Sample | MeasureFailed] = []
        for (_, read), result in zip(prepared, results, strict=True):
            try:
                samples.append(read(result))
            except MeasureFailed as exc:
                samples.append(exc)
        return samples


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][-300:] if lines else ""
