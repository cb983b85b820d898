"""PyTorch mode: each step installs torch at the commit, then measures one model with ``perfdash run``.

torch is installed per commit into its own directory, ``CACHE/<sha>/site`` (``pip install --target``), and put first
on ``PYTHONPATH`` of the ``perfdash run`` that measures it. So the build cache is literally one directory per commit,
good and bad can be measured interleaved without reinstalling, and the environment perfdash itself runs in is never
changed. Strategies, tried in order for ``auto``:

- ``nightly``: the nightly wheel of the commit's date from PyTorch's nightly index; accepted only if the installed
  torch reports exactly this commit (``torch.version.git_version``), since a nightly is built from one commit a day;
- ``source``: ``git submodule update``, ``pip wheel`` of the checkout (kept in the cache), installed into the site dir;
- ``--install-cmd CMD``: any shell command, run in the checkout with ``PERFBISECT_SITE`` (install there),
  ``PERFBISECT_SHA`` and ``PERFBISECT_CACHE`` set.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from pathlib import Path

from perfbisect.commands import CommandOracle, CommandResult, PlacedCommand
from perfbisect.gitops import GitError, commit_info, git
from perfbisect.procedure import CRASH, MeasureFailed
from perfbisect.stats import Sample
from perfdash.axes import RunAxes, run_axis_values, run_flags
from perfdash.contract import ContractError, RunKey, read_accuracy_csv, read_performance_csv
from perfdash.metric_registry import BISECT_METRICS

NIGHTLY_INDEX = "https://download.pytorch.org/whl/nightly"
# The CUDA variant of nightly wheels when none is given: the CUDA image's own (docker/runner-cuda.Dockerfile's
# CUDA_VARIANT, which the image also exports as PERFDASH_CUDA_VARIANT; tests/deploy/test_docker.py keeps them equal).
DEFAULT_CUDA_VARIANT = "cu130"


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchTarget(RunAxes):
    """The one model and configuration a PyTorch-mode bisection measures: the configuration's axes (the fields of
    perfdash.axes.RunAxes, ``perfdash run``'s flags), the model and metric, and the measurement's own settings."""

    model: str
    metric: str = "speedup"
    repeat: int | None = None
    # perfdash run --processes: worker processes per result (issue 39: 3 cut the between-run noise of the speedup
    # from 4.45 to 2.74 %, bench/README.md); None: the flag is not passed (perfdash run's default, one)
    processes: int | None = None
    models_file: Path | None = None
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        if self.metric not in BISECT_METRICS:
            raise ValueError(f"metric {self.metric!r} is not one of {', '.join(BISECT_METRICS)}")
        if self.processes is not None and self.processes < 1:
            raise ValueError(f"processes must be >= 1, got {self.processes}")

    def key(self) -> RunKey:
        # The runner's own options name the result files: one definition of the variant naming, not two.
        from runner.options import RunOptions

        return RunOptions(**run_axis_values(self)).run_config().key()

    def run_args(self, output_dir: Path) -> list[str]:
        """The arguments after ``perfdash run``: the configuration's flags as perfdash.axes writes them, then the
        measurement's own."""
        args = [*run_flags(run_axis_values(self)), "--only", self.model,
                "--accuracy" if self.metric == "accuracy" else "--performance", "--output-dir", str(output_dir),
                "--no-progress"]
        for flag, value in (("--repeat", self.repeat), ("--processes", self.processes),
                            ("--models-file", self.models_file), ("--timeout", self.timeout_s)):
            if value is not None:
                args += [flag, str(value)]
        return args

    def read_metric(self, output_dir: Path) -> Sample:
        """The model's metric from the CSVs ``perfdash run`` wrote (read with the result contract)."""
        key = self.key()
        kind = "accuracy" if self.metric == "accuracy" else "performance"
        path = output_dir / key.filename(kind)
        if not path.exists():
            raise MeasureFailed(f"perfdash run wrote no {path.name}")
        try:
            if kind == "accuracy":
                rows = [r for r in read_accuracy_csv(path) if r.name == self.model]
                if rows:
                    return rows[-1].accuracy
            else:
                perf = [r for r in read_performance_csv(path) if r.name == self.model]
                if perf and perf[-1].is_failure:
                    raise MeasureFailed(f"{self.model} failed to run (failure row in {path.name})")
                if perf:
                    value = getattr(perf[-1], self.metric)
                    if value is None:
                        raise MeasureFailed(f"{path.name} has no {self.metric} for {self.model}")
                    return float(value)
        except ContractError as exc:
            raise MeasureFailed(f"unreadable result: {exc}") from None
        raise MeasureFailed(f"{path.name} has no row for {self.model}")


# --------------------------------------------------------------------------------------------------------------------
# Install strategies: each turns (commit, checkout, site dir) into one shell command.

# PyTorch's `nightly` branch has one commit per nightly, "2025-01-02 nightly release (<sha of main>)": the local
# clone says, without any network, which commits of main have a wheel and for which date.
_NIGHTLY_SUBJECT = re.compile(r"^(\d{4}-\d{2}-\d{2}) nightly release \(([0-9a-f]{40})\)")


def nightly_commits(repo: Path, ref: str) -> dict[str, date]:
    """sha of main -> date of its nightly wheel, read from the nightly branch ``ref``; empty if there is none."""
    try:
        subjects = git(repo, "log", "--format=%s", ref).splitlines()
    except GitError:
        return {}
    out: dict[str, date] = {}
    for subject in subjects:
        match = _NIGHTLY_SUBJECT.match(subject)
        if match:
            out[match.group(2)] = date.fromisoformat(match.group(1))
    return out


def torch_version_base(src: Path) -> str:
    """``2.7.0a0`` in version.txt -> ``2.7.0`` (the nightlies are ``2.7.0.devYYYYMMDD``)."""
    text = (src / "version.txt").read_text(encoding="utf-8").strip()
    return text.split("a")[0].split("+")[0]


def nightly_command(version_base: str, commit_date: date, site: Path, device: str, sha: str,
                    python: str = sys.executable, cuda: str = DEFAULT_CUDA_VARIANT) -> str:
    """Install the nightly of the commit's date into ``site``, then fail unless it was built from ``sha``."""
    channel = "cpu" if device == "cpu" else cuda
    requirement = f"torch=={version_base}.dev{commit_date:%Y%m%d}"
    install = [python, "-m", "pip", "install", "--quiet", "--no-deps", "--pre", "--upgrade", "--target", str(site),
               "--index-url", f"{NIGHTLY_INDEX}/{channel}", requirement]
    check = [python, "-c", f"import sys, torch; sys.exit(torch.version.git_version != {sha!r})"]
    return f"{shlex.join(install)} && PYTHONPATH={shlex.quote(str(site))} {shlex.join(check)}"


def source_command(site: Path, wheel_dir: Path, python: str = sys.executable) -> str:
    """Build a wheel of the checkout (kept in the commit's cache) and install it into ``site``."""
    steps = [
        ["git", "submodule", "update", "--init", "--recursive", "--quiet"],
        [python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(wheel_dir), "."],
    ]
    install = (f"{shlex.join([python, '-m', 'pip', 'install', '--quiet', '--no-deps', '--upgrade', '--target'])} "
               f"{shlex.quote(str(site))} {shlex.quote(str(wheel_dir))}/torch-*.whl")
    return " && ".join(shlex.join(s) for s in steps) + " && " + install


@dataclass(slots=True)
class TorchOracle(CommandOracle):
    """A CommandOracle whose build installs torch at the commit and whose measurement is one ``perfdash run``."""

    target: TorchTarget | None = None
    strategy: str = "auto"  # auto | nightly | source | custom
    install_cmd: str | None = None
    run_cmd: Sequence[str] = (sys.executable, "-m", "perfdash.cli", "run")
    nightlies: dict[str, date] = field(default_factory=dict)  # commits with a nightly wheel (nightly_commits)
    cuda_variant: str = DEFAULT_CUDA_VARIANT  # the wheel variant of a cuda target's nightlies

    def site(self, sha: str) -> Path:
        return self.commit_dir(sha) / "site"

    def install_commands(self, sha: str, src: Path) -> list[tuple[str, str]]:
        """(strategy name, shell command) in the order to try them."""
        site = self.site(sha)
        if self.install_cmd is not None or self.strategy == "custom":
            if not self.install_cmd:
                raise ValueError("strategy custom needs --install-cmd")
            return [("custom", self.install_cmd)]
        out: list[tuple[str, str]] = []
        # With a nightly map, only the commits that have a wheel try one (at its exact date); without one, the
        # commit's own date is a guess that the git_version check after the install accepts or rejects.
        if self.strategy in ("auto", "nightly") and (sha in self.nightlies or not self.nightlies):
            day = self.nightlies.get(sha) or datetime.fromisoformat(commit_info(self.repo, sha).date).date()
            device = self.target.device if self.target else "cpu"
            out.append(("nightly", nightly_command(torch_version_base(src), day, site, device, sha,
                                                   cuda=self.cuda_variant)))
        if self.strategy in ("auto", "source"):
            out.append(("source", source_command(site, self.commit_dir(sha) / "wheel")))
        return out

    def build(self, sha: str) -> str | None:
        record = self.commit_dir(sha) / "build.json"
        if record.exists() or self.build_cmd is not None:
            return CommandOracle.build(self, sha)
        src = self.source(sha)
        failures = []
        self.site(sha).mkdir(parents=True, exist_ok=True)
        for name, command in self.install_commands(sha, src):
            self.log(f"{sha[:10]}: installing torch ({name})")
            oracle = replace(self, build_cmd=command)
            failure = CommandOracle.build(oracle, sha)
            if failure is None:
                return None
            failures.append(f"{name}: {failure}")
            record.unlink()  # let the next strategy try; all failures are recorded below
        reason = "; ".join(failures)
        self.record_build(sha, reason, 0.0, None)
        return reason

    def env(self, sha: str, repeat: int | None = None) -> dict[str, str]:
        env = CommandOracle.env(self, sha, repeat)
        env["PERFBISECT_SITE"] = str(self.site(sha))
        return env

    def placed(self, sha: str, index: int, cpus: frozenset[int] | None
               ) -> tuple[PlacedCommand, Callable[[CommandResult], Sample]]:
        """One ``perfdash run`` of the commit's torch; on ``cpus`` (a duet's half) with as many threads as CPUs."""
        if self.target is None:
            raise ValueError("TorchOracle needs a target")
        output_dir = self.commit_dir(sha) / "runs" / str(index)
        output_dir.mkdir(parents=True, exist_ok=True)
        env = self.env(sha, index)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.site(sha)), env.get("PYTHONPATH")) if p)
        # perfdash run checks that it measures the commit's torch (a runner image's own PERFDASH_TORCH_SPEC names the
        # image's torch, which the site shadows); a custom install command installs what it likes: no check.
        if self.install_cmd is None and self.strategy != "custom":
            env["PERFDASH_TORCH_SPEC"] = sha
        else:
            env.pop("PERFDASH_TORCH_SPEC", None)
        # a duet's half runs as many threads as it has CPUs, unless the series names its own (the CLI checks it fits)
        threads = ["--threads", str(len(cpus))] if cpus and self.target.threads is None else []
        command = shlex.join([*self.run_cmd, *self.target.run_args(output_dir), *threads])
        target = self.target

        def read(result: CommandResult) -> Sample:
            (output_dir / "run.log").write_text(result.stdout + result.stderr, encoding="utf-8")
            if result.returncode is None:
                raise MeasureFailed(f"perfdash run timed out after {self.measure_timeout:g} s", status="timeout")
            try:
                return target.read_metric(output_dir)
            except MeasureFailed as exc:
                tail = (result.stderr.strip().splitlines() or [""])[-1][-300:]
                raise MeasureFailed(f"{exc} (exit {result.returncode}: {tail})", status=CRASH) from None

        # perfdash run must not pick the checkout's own torch/ folder up as a package: run it from the cache dir.
        return PlacedCommand(command, self.commit_dir(sha), env, cpus or frozenset()), read
