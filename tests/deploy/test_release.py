"""Release hygiene: one version (perfdash/__init__.py, which the package metadata carries and `perfdash --version`
prints), a changelog entry for it, the license and the notices of what perfdash ships from others."""

from __future__ import annotations

import email.parser
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _built_metadata(tmp_path: Path) -> email.message.Message:
    """The metadata a wheel of this checkout carries, as setuptools builds it (PEP 517's prepare_metadata hook)."""
    code = ("import sys; from setuptools import build_meta; "
            "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          timeout=300, check=True)
    folder = tmp_path / done.stdout.strip().splitlines()[-1]
    return email.parser.Parser().parsestr((folder / "METADATA").read_text())


def _perfdash(*args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("perfdash")  # the console script of the environment running the tests
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "bisect")])}
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=120, env=env, check=False)


def test_perfdash_version_prints_the_version_the_package_metadata_carries(tmp_path: Path) -> None:
    metadata = _built_metadata(tmp_path)
    done = _perfdash("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"perfdash {metadata['Version']}\n"
    assert re.fullmatch(r"0\.\d+\.\d+", metadata["Version"]), "0.x while the schema and the API may still change"
    assert metadata["License-Expression"] == "BSD-3-Clause"
    assert sorted(metadata.get_all("License-File")) == ["LICENSE", "NOTICE"]


def test_the_changelog_has_an_entry_for_this_version() -> None:
    from perfdash import __version__

    text = (REPO / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d\d-\d\d))?$", text, re.MULTILINE)
    assert headings[0] == ("Unreleased", ""), "Keep a Changelog: the unreleased section comes first"
    assert headings[1][0] == __version__ and headings[1][1], "the newest release is this version, with its date"


def test_every_vendored_file_has_its_notice() -> None:
    assert (REPO / "LICENSE").read_text().startswith("BSD 3-Clause License")
    notice = (REPO / "NOTICE").read_text()
    vendored = [p for p in (REPO / "service" / "static" / "vendor").rglob("*") if p.is_file()]
    assert vendored
    for path in vendored:
        assert str(path.relative_to(REPO)) in notice, f"{path.relative_to(REPO)} is not in NOTICE"
    for derived in sorted((REPO / "runner" / "suites" / "data").glob("*.toml")):
        assert "pytorch/pytorch" in derived.read_text() or "PyTorch" in derived.read_text()
    assert "runner/suites/data/*.toml" in notice and "From PyTorch:" in notice
