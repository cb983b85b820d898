"""The run manifest: facts about the machine, the libraries and the Jenkins build, gathered without importing torch."""

from __future__ import annotations

import os
import platform
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, date, datetime
from importlib import metadata
from pathlib import Path

from perfdash.manifest import (
    ACTIVATION_PEAK_DEFINITION,
    COMPILE_LATENCY_DEFINITION,
    MEMORY_DEFINITIONS,
    BackendInfo,
    JenkinsInfo,
    MachineInfo,
    Manifest,
    RunConfig,
)
from perfdash.torch_spec import torch_version_file, version_field
from runner.allocator import process_env
from runner.backends import BACKEND_SPECS, package_versions, settings
from runner.suites import Suite


def cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown"
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else "unknown"


def cpu_vector_isa(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The widest x86 vector extension /proc/cpuinfo lists (AMX, AVX-512, AVX2), or "unknown": benches name the
    machine they measured on with it, since Inductor's CPU kernels (and their speed) depend on it."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown"
    match = re.search(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
    flags = set(match.group(1).split()) if match else set()
    for flag, name in (("amx_tile", "AMX"), ("avx512f", "AVX-512"), ("avx2", "AVX2")):
        if flag in flags:
            return name
    return "unknown"


def gpu_info() -> tuple[str | None, str | None]:
    """(GPU name, driver version) from nvidia-smi, or (None, None)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    first = out.strip().splitlines()[0] if out.strip() else ""
    name, _, driver = first.partition(",")
    return (name.strip() or None), (driver.strip() or None)


def torch_build() -> tuple[str | None, str | None, str | None]:
    """(version, git commit, CUDA version) of the installed torch, read from torch/version.py."""
    text = torch_version_file()
    return version_field(text, "__version__"), version_field(text, "git_version"), version_field(text, "cuda")


def machine_info(device: str) -> MachineInfo:
    gpu_name = driver = cuda = None
    if device == "cuda":
        gpu_name, driver = gpu_info()
        cuda = torch_build()[2]
    return MachineInfo(host=socket.gethostname(), device=device, cpu_model=cpu_model(),
                       cpu_count=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
                       gpu_name=gpu_name, gpu_driver=driver, cuda_version=cuda)


def jenkins_info() -> JenkinsInfo:
    return JenkinsInfo(build_url=os.environ.get("BUILD_URL"), job_name=os.environ.get("JOB_NAME"),
                       build_number=os.environ.get("BUILD_NUMBER"))


def suite_versions(suite: Suite) -> dict[str, str]:
    versions = dict(suite.versions())
    for package in ("torchvision",):
        try:
            versions.setdefault(package, metadata.version(package))
        except metadata.PackageNotFoundError:
            pass
    return versions


# Settings of the process environment that change timings without being part of the configuration.
_ENVIRONMENT_VARIABLES = ("LD_PRELOAD", "MALLOC_CONF", "OMP_NUM_THREADS", "KMP_AFFINITY", "KMP_BLOCKTIME")


def software_environment(worker_environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What detection compares night to night to name an environment shift: kernel, CPU microcode, perfdash's
    version and the allocator/threading variables the workers start with (only those present; ``worker_environ``,
    this process's environment unless given), with the path of each preloaded library."""
    environ = os.environ if worker_environ is None else worker_environ
    out = {"kernel": platform.release()}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        cpuinfo = ""
    match = re.search(r"^microcode\s*:\s*(\S+)", cpuinfo, re.MULTILINE)
    if match:
        out["microcode"] = match.group(1)
    try:
        out["perfdash"] = metadata.version("perfdash")
    except metadata.PackageNotFoundError:
        pass
    out.update({name: environ[name] for name in _ENVIRONMENT_VARIABLES if environ.get(name)})
    return out


def backend_info(config: RunConfig, quantize: str | None) -> BackendInfo | None:
    if config.backend not in BACKEND_SPECS:
        return None
    return BackendInfo(name=config.backend, packages=package_versions(config.backend),
                       settings=settings(config.backend, config.device, config.dtype, quantize))


def new_manifest(config: RunConfig, suite: Suite, quantize: str | None = None,
                 torch_requested: str | None = None, night: date | None = None) -> Manifest:
    version, commit, _ = torch_build()
    backend = backend_info(config, quantize)
    # The backend's packages also go with the suite's versions: the service shows those, and a new onnxruntime
    # moves every series of the backend at once (an environment change, as a new transformers is).
    versions = {**suite_versions(suite), **(backend.packages if backend else {})}
    return Manifest(config=config, machine=machine_info(config.device), torch_version=version,
                    torch_git_commit=commit, torch_requested=torch_requested, suite_versions=versions,
                    jenkins=jenkins_info(),
                    command=shlex.join(sys.argv), start_time=datetime.now(UTC), night=night, backend=backend,
                    environment=software_environment(process_env(config.env)),
                    memory_definitions={"peak_memory": MEMORY_DEFINITIONS[config.device],
                                        "activation_peak": ACTIVATION_PEAK_DEFINITION},
                    compile_latency_definition=COMPILE_LATENCY_DEFINITION)


def load_or_create(path: Path, config: RunConfig, suite: Suite, quantize: str | None = None,
                   torch_requested: str | None = None, night: date | None = None) -> Manifest:
    """Resuming keeps the first start time and the errors already recorded; a new config starts afresh."""
    fresh = new_manifest(config, suite, quantize, torch_requested, night)
    if path.exists():
        try:
            old = Manifest.read(path)
        except ValueError:
            return fresh
        if old.config == config:
            update: dict[str, object] = {"start_time": old.start_time, "model_errors": dict(old.model_errors),
                                         "model_phases": dict(old.model_phases)}
            if fresh.backend is not None and old.backend is not None:
                update["backend"] = fresh.backend.model_copy(update={"models": dict(old.backend.models)})
            return fresh.model_copy(update=update)
    return fresh
