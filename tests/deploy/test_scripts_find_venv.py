"""The scripts a user runs by name (./scripts/gpu-smoke) run in the project's venv, from any directory and whatever
PATH holds, or say how to make it: started by a python3 shebang, gpu-smoke ran the system Python, and its CPU cell
failed (libiomp5.so not found: Intel's OpenMP is in the venv)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# No venv on it: only the system's own directories, as a fresh login shell has them.
BARE_PATH = "/usr/bin:/bin"


def _run_by_name(script: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PERFDASH_VENV", "PYTHONHOME")}
    # this checkout's code first (a worktree's venv may be installed from another checkout)
    env.update(PATH=BARE_PATH, PYTHONPATH=f"{REPO}{os.pathsep}{REPO / 'bisect'}")
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env,
                          check=False)


def _checkout_with(tmp_path: Path, venv: Path | None) -> Path:
    """A checkout's layout: scripts/ as in this one, and .venv linked to ``venv`` (none: no .venv)."""
    root = tmp_path / "checkout"
    shutil.copytree(REPO / "scripts", root / "scripts", symlinks=True)
    if venv is not None:
        (root / ".venv").symlink_to(venv)
    return root


def test_no_script_run_by_name_starts_the_system_python() -> None:
    for folder in ("scripts", "bench"):
        for path in sorted((REPO / folder).rglob("*")):
            if path.is_file() and os.access(path, os.X_OK):
                shebang = path.read_text(errors="replace").partition("\n")[0]
                assert "python" not in shebang, f"{path.relative_to(REPO)}: {shebang} (use scripts/venv-python)"


def test_gpu_smoke_by_name_reaches_the_venv_from_another_directory(tmp_path: Path) -> None:
    root = _checkout_with(tmp_path, Path(sys.prefix))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = _run_by_name(root / "scripts" / "gpu-smoke", "--help", cwd=elsewhere)
    # the usage comes from runner.smoke, whose imports (perfdash, pydantic) only the venv has
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("usage: gpu-smoke"), done.stdout
    assert "--cpu" in done.stdout


def test_without_the_venv_a_script_says_how_to_make_it(tmp_path: Path) -> None:
    root = _checkout_with(tmp_path, None)
    done = _run_by_name(root / "scripts" / "gpu-smoke", "--help", cwd=tmp_path)
    assert done.returncode == 127, done.stdout + done.stderr
    assert f"no Python environment at {root / '.venv'}" in done.stderr and "make setup" in done.stderr
