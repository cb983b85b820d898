"""The bisect/ folder must never shadow the standard library's ``bisect`` (random and asyncio import it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_bisect_from_the_repo_root_is_the_standard_library():
    code = "import bisect, random, asyncio, statistics, perfbisect; print(bisect.__file__); print(perfbisect.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    stdlib, package = out.splitlines()
    assert not Path(stdlib).resolve().is_relative_to(ROOT)
    assert Path(package).resolve() == ROOT / "bisect" / "perfbisect" / "__init__.py"
    assert not (ROOT / "bisect" / "__init__.py").exists()


def test_the_bench_script_runs_despite_its_name():
    proc = subprocess.run([sys.executable, "bench/bisect.py", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "fixed-10" in proc.stdout
