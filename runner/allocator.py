"""``--allocator``: the C allocator and OpenMP runtime a CPU worker runs with, as recorded in the configuration.

The choice changes eager times by several per cent (bench/README.md, pt_parity.py), so it is part of the series:
its variables land in ``RunConfig.env``. Preloaded libraries are recorded by soname (``libjemalloc.so.2``), not by
path, so the same setting on two machines is the same series; the path each worker actually got is in the
manifest's ``environment``.

- ``dashboard`` (default): what PyTorch's CPU dashboard gives its harness (``test_inductor_set_cpu_affinity`` in
  PyTorch's .ci/pytorch/test.sh): jemalloc preloaded with its MALLOC_CONF and, on x86-64, Intel's OpenMP with
  KMP_AFFINITY/KMP_BLOCKTIME.
- ``glibc``: the C library's defaults, as PyTorch's harness gets them when run by hand.
- ``perfdash``: glibc with ``CPU_MALLOC_ENV``, the lowest worker-to-worker noise measured with glibc.

The choice is authoritative: whatever allocator settings the runner itself inherited (``docker/xeon-launch.sh``
preloads jemalloc into the runner's process too) are taken out of a worker's environment before the chosen ones
go in, so the recorded configuration is what the worker ran with.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ALLOCATORS: tuple[str, ...] = ("dashboard", "glibc", "perfdash")
DEFAULT_ALLOCATOR = "dashboard"

JEMALLOC = "libjemalloc.so.2"
INTEL_OPENMP = "libiomp5.so"
# As test_inductor_set_cpu_affinity writes it: no decay, so freed pages stay with the process between iterations.
DASHBOARD_MALLOC_CONF = ("oversize_threshold:1,background_thread:true,metadata_thp:auto,dirty_decay_ms:-1,"
                         "muzzy_decay_ms:-1")
DASHBOARD_KMP = {"KMP_AFFINITY": "granularity=fine,compact,1,0", "KMP_BLOCKTIME": "1"}

# glibc keeps what a step frees for the next one: no mmap for big blocks (each would be unmapped on free and faulted
# in again next iteration) and no trimming of the heap. Without these, how many pages each iteration faults in depends
# on the worker's allocation history, and eager resnet18 at batch 4 ran 83-99 ms from one worker to the next (speedup
# CV 4.7 % over ten workers; about 1 % with them, bench/README.md).
CPU_MALLOC_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(16 << 30), "MALLOC_TOP_PAD_": str(256 << 20)}

# Where a library's path may be given by hand, as docker/xeon-launch.sh reads them.
_PATH_VARIABLES = {JEMALLOC: "JEMALLOC_LIB", INTEL_OPENMP: "IOMP_LIB"}
_INSTALL_HINTS = {JEMALLOC: "Debian: apt-get install libjemalloc2",
                  INTEL_OPENMP: "pip install intel-openmp (the runner extra has it on x86-64)"}
# Inherited settings a worker never keeps: another allocator choice's variables, and preloads of allocators or
# OpenMP runtimes (anything else in LD_PRELOAD stays).
_ALLOCATOR_VARIABLES = ("MALLOC_CONF", "KMP_AFFINITY", "KMP_BLOCKTIME", *CPU_MALLOC_ENV)
_ALLOCATOR_LIBRARY_PREFIXES = ("libjemalloc", "libtcmalloc", "libiomp5")


class AllocatorUnavailable(RuntimeError):
    """A library the chosen allocator preloads is not on this machine."""


def allocator_env(allocator: str, device: str, machine: str | None = None, jemalloc: bool = True) -> dict[str, str]:
    """The recorded settings of ``allocator`` for a worker on ``device`` (GPU workers keep the defaults, as PyTorch's
    GPU dashboard does); ``machine`` is platform.machine() unless given; ``jemalloc=False`` for a backend that cannot
    run with it preloaded (runner.backends.BackendSpec.jemalloc): the dashboard's OpenMP settings only."""
    if device != "cpu" or allocator == "glibc":
        return {}
    if allocator == "perfdash":
        return dict(CPU_MALLOC_ENV)
    if allocator != "dashboard":
        raise ValueError(f"unknown allocator {allocator!r}; expected one of {', '.join(ALLOCATORS)}")
    x86 = (machine or platform.machine()) in ("x86_64", "AMD64")
    preload = ([JEMALLOC] if jemalloc else []) + ([INTEL_OPENMP] if x86 else [])  # Intel's OpenMP on x86, as test.sh
    env = {"MALLOC_CONF": DASHBOARD_MALLOC_CONF} if jemalloc else {}
    if preload:
        env["LD_PRELOAD"] = ":".join(preload)
    return {**env, **(DASHBOARD_KMP if x86 else {})}


def library_directories() -> list[Path]:
    """Where a preloaded library is looked for, in order: the environment's own lib (pip's intel-openmp, conda),
    /usr/local/lib (pip into the system Python, as the Xeon image does), then the system's library directories."""
    dirs = [Path(sys.prefix) / "lib", Path("/usr/local/lib")]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if multiarch:
        dirs += [Path("/usr/lib") / multiarch, Path("/lib") / multiarch]
    return [*dirs, Path("/usr/lib64"), Path("/usr/lib"), Path("/lib64"), Path("/lib")]


def find_library(soname: str, environ: Mapping[str, str] | None = None) -> Path:
    """The file to preload for ``soname``; AllocatorUnavailable names what to install when there is none."""
    environ = os.environ if environ is None else environ
    variable = _PATH_VARIABLES.get(soname)
    if variable and environ.get(variable):
        given = Path(environ[variable])
        if given.is_file():
            return given
        raise AllocatorUnavailable(f"{variable}={given} is not a file")
    for directory in library_directories():
        candidate = directory / soname
        if candidate.is_file():
            return candidate
    hint = _INSTALL_HINTS.get(soname, f"install {soname}")
    where = f" or set {variable}=PATH" if variable else ""
    raise AllocatorUnavailable(f"{soname} not found in {', '.join(map(str, library_directories()))}: {hint}{where}")


def resolve_preload(value: str, environ: Mapping[str, str] | None = None) -> str:
    """LD_PRELOAD with every bare soname of ``value`` replaced by the file found for it (paths stay as given)."""
    entries = [entry for entry in value.split(":") if entry]
    return ":".join(entry if "/" in entry else str(find_library(entry, environ)) for entry in entries)


def check(env: Mapping[str, str], environ: Mapping[str, str] | None = None) -> None:
    """Raise AllocatorUnavailable, before any model runs, if ``env`` preloads a library this machine lacks."""
    if env.get("LD_PRELOAD"):
        resolve_preload(env["LD_PRELOAD"], environ)


def _inherited_preload(value: str) -> str:
    keep = [entry for entry in value.split(":") if entry and not
            Path(entry).name.startswith(_ALLOCATOR_LIBRARY_PREFIXES)]
    return ":".join(keep)


def process_env(worker_env: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment a worker process starts with: ``base`` (this process's) without any inherited allocator
    settings, then ``worker_env`` with its preloads resolved to files (placed before what ``base`` preloads)."""
    base = os.environ if base is None else base
    env = {key: value for key, value in base.items() if key not in _ALLOCATOR_VARIABLES}
    inherited = _inherited_preload(env.pop("LD_PRELOAD", ""))
    chosen = resolve_preload(worker_env["LD_PRELOAD"], base) if worker_env.get("LD_PRELOAD") else ""
    env.update({key: value for key, value in worker_env.items() if key != "LD_PRELOAD"})
    preload = ":".join(part for part in (chosen, inherited) if part)
    if preload:
        env["LD_PRELOAD"] = preload
    return env


def _mallctl() -> Any:
    """jemalloc's control function when jemalloc is this process's allocator, else None."""
    mallctl = getattr(ctypes.CDLL(None), "mallctl", None)
    if mallctl is not None:
        mallctl.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return mallctl


def _read_flag(mallctl: Any, name: bytes) -> bool | None:
    value = ctypes.c_bool()
    size = ctypes.c_size_t(ctypes.sizeof(value))
    return value.value if mallctl(name, ctypes.byref(value), ctypes.byref(size), None, 0) == 0 else None


def jemalloc_background_threads() -> bool | None:
    """Whether jemalloc's background threads are on in this process; None when jemalloc is not its allocator."""
    mallctl = _mallctl()
    return None if mallctl is None else _read_flag(mallctl, b"background_thread")


def restart_jemalloc_threads() -> bool:
    """In a forked worker, turn jemalloc's background threads back on when its options ask for them; True if it did.

    A fork keeps only the forking thread, and jemalloc's fork handler switches ``background_thread`` off in the child.
    Without this, every worker the fork server forks would run a different allocator configuration from the one its
    MALLOC_CONF records (and PyTorch's CPU dashboard runs): on a 2-core VM the background thread takes 8-15 % of the
    core an OpenMP thread runs on, and eager lcnet_050 took 16.4 ms with it, 13.1 ms without (bench/README.md,
    "pt_parity.py", the lcnet_050 latency gap). A no-op without jemalloc.
    """
    mallctl = _mallctl()
    if mallctl is None or not _read_flag(mallctl, b"opt.background_thread"):
        return False
    enable = ctypes.c_bool(True)
    return mallctl(b"background_thread", None, None, ctypes.byref(enable), ctypes.sizeof(enable)) == 0
