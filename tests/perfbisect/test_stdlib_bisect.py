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


def test_no_bench_script_shadows_a_standard_module_or_a_package_of_ours():
    """Run as a script, a bench's folder comes first on sys.path: a bench named like a standard module (bisect) or one
    of the repository's packages (service) would be imported in its place."""
    ours = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()} | {"perfbisect"}
    clashes = [p.name for p in (ROOT / "bench").glob("*.py")
               if p.stem in sys.stdlib_module_names or p.stem in ours]
    assert clashes == []


def test_the_bisect_bench_runs_as_its_docstring_says():
    proc = subprocess.run([sys.executable, "-m", "bench.bisect_accuracy", "--help"], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert "fixed-10" in proc.stdout
