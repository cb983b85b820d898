"""`make test` runs pytest in one process (`-p no:xdist`) or on xdist workers: both command lines, taken from the
Makefile, must start and collect with tests/conftest.py (a hook only xdist defines once broke the serial run)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _parallel_flags() -> list[list[str]]:
    """Each PYTEST_PARALLEL the Makefile can set, PYTEST_WORKERS at 2 where it is named."""
    found = re.findall(r"^PYTEST_PARALLEL := (.*)$", (ROOT / "Makefile").read_text(), re.M)
    return [line.replace("$(PYTEST_WORKERS)", "2").split() for line in found]


def test_the_makefile_has_a_serial_and_a_parallel_mode() -> None:
    modes = _parallel_flags()
    assert ["-p", "no:xdist"] in modes
    assert any("-n" in flags for flags in modes)


@pytest.mark.parametrize("flags", _parallel_flags(), ids=lambda flags: " ".join(flags))
def test_pytest_collects_in_each_mode(flags: list[str]) -> None:
    target = "tests/deploy/test_readme.py"
    done = subprocess.run([sys.executable, "-m", "pytest", *flags, "--collect-only", "-q", target],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "INTERNALERROR" not in done.stdout + done.stderr
