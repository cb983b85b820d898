"""The CUDA image's extras are checked against the torch wheel's CUDA major version (runner.cuda_extras), with a
clear error on a mismatch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from runner.cuda_extras import (
    CudaBuild,
    _assigned,
    backend_mismatches,
    installed_builds,
    major,
    mismatches,
    tensorrt_builds,
)


def test_matching_builds_pass() -> None:
    builds = [CudaBuild("onnxruntime-gpu", "13.0"), CudaBuild("torch-tensorrt", "13.0"),
              CudaBuild("tensorrt-cu13", "13")]
    assert mismatches("13.0", builds) == []
    assert mismatches("12.8", [CudaBuild("onnxruntime-gpu", "12.2")]) == []  # same major, other minor


def test_a_mismatch_names_the_package_both_versions_and_the_fix() -> None:
    [error] = mismatches("13.0", [CudaBuild("onnxruntime-gpu", "12.8"), CudaBuild("torch-tensorrt", "13.0")])
    assert "onnxruntime-gpu is built for CUDA 12.8, torch for CUDA 13.0" in error and "CUDA 13" in error
    [cpu_build] = mismatches("13.0", [CudaBuild("onnxruntime-gpu", None)])
    assert "states no CUDA version" in cpu_build
    [no_cuda_torch] = mismatches(None, [])
    assert "not a CUDA build" in no_cuda_torch


def test_versions_and_tensorrt_wheel_names() -> None:
    assert [major(v) for v in ("13.0", "12", " 12.8.1 ", "cu128", "", None)] == ["13", "12", "12", None, None, None]
    names = ["tensorrt-cu12", "tensorrt_cu12_libs", "tensorrt", "torch", "TensorRT-cu13-bindings"]
    assert tensorrt_builds(names) == [CudaBuild("TensorRT-cu13-bindings", "13"), CudaBuild("tensorrt-cu12", "12"),
                                      CudaBuild("tensorrt_cu12_libs", "12")]


def test_what_a_package_file_assigns(tmp_path: Path) -> None:
    info = tmp_path / "build_and_package_info.py"
    info.write_text("package_name = 'onnxruntime-gpu'\n__version__ = '1.31.1'\ncuda_version = '12.8'\n")
    assert _assigned(info, "cuda_version") == "12.8"
    version = tmp_path / "_version.py"
    version.write_text('__version__: str = "2.14.0"\n__cuda_version__: str = "13.0"\n')
    assert _assigned(version, "__cuda_version__") == "13.0"
    assert _assigned(version, "__tensorrt_version__") is None


def test_a_cpu_onnxruntime_under_the_gpu_name_is_caught() -> None:
    """This machine's onnxruntime is the CPU build: its package info states no CUDA version, which the check reads
    from the installed file itself."""
    [build] = installed_builds({"onnxruntime-gpu": "1.31.1"})
    assert build == CudaBuild("onnxruntime-gpu", None)
    assert mismatches("13.0", [build])


def test_the_command_passes_where_no_cuda_extra_is_installed(tmp_path: Path) -> None:
    record = tmp_path / "backends-unavailable"
    done = subprocess.run([sys.executable, "-m", "runner.cuda_extras", "--record", str(record)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "match torch's CUDA" in done.stdout and not record.exists()


def test_each_cuda_backend_is_checked_against_the_extras_it_runs_on() -> None:
    builds = [CudaBuild("onnxruntime-gpu", "13.0"), CudaBuild("torch-tensorrt", "12.8"),
              CudaBuild("tensorrt-cu12", "12")]
    assert backend_mismatches("onnxruntime", "13.0", builds) == []  # its own extra matches
    errors = backend_mismatches("tensorrt", "13.0", builds)
    assert len(errors) == 2 and all("CUDA 12" in e for e in errors)  # torch-tensorrt and TensorRT's wheel
    assert backend_mismatches("openvino", "13.0", builds) == []
    assert backend_mismatches("onnxruntime", "13.0", [CudaBuild("onnxruntime-gpu", "12.2")])
