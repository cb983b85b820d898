"""runner/torchbench_install.py: one setting names where TorchBench comes from, the commit is pinned, the archive's own
record of its commit is checked, and the unpacked tree is kept so a second setup fetches nothing."""

from __future__ import annotations

import functools
import http.server
import io
import tarfile
import threading
from pathlib import Path

import pytest

from runner import torchbench_install as tbi

REPO = Path(__file__).resolve().parents[2]
ARCHIVE = REPO / tbi.SHARED_ARCHIVE


def _archive() -> Path:
    if not ARCHIVE.is_file():
        pytest.skip(f"no TorchBench archive at {ARCHIVE}")
    return ARCHIVE


def test_the_source_is_the_setting_else_the_shared_archive_beside_the_clone_else_github(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    clone.mkdir()
    assert tbi.default_source(clone, {}) == tbi.Source("git", "https://github.com/pytorch/benchmark")
    shared = tmp_path / "shared" / "third_party" / f"pytorch-benchmark-{tbi.COMMIT[:8]}.tar.gz"
    shared.parent.mkdir(parents=True)
    shared.write_bytes(b"")
    assert tbi.default_source(clone, {}) == tbi.Source("archive", str(shared))
    mirror = "https://mirror.internal/benchmark.git"
    assert tbi.default_source(clone, {tbi.SETTING: mirror}) == tbi.Source("git", mirror)
    assert tbi.default_source(clone, {tbi.SETTING: "http://127.0.0.1:1/tb.tar.gz"}).kind == "url"


def test_only_a_git_remote_brings_the_input_data(tmp_path: Path) -> None:
    (tmp_path / "checkout" / ".git").mkdir(parents=True)
    assert tbi.parse_source("https://github.com/pytorch/benchmark").networked
    assert not tbi.parse_source("http://mirror/pytorch-benchmark.tar.gz").networked  # an offline mirror
    assert not tbi.parse_source(str(tmp_path / "checkout")).networked
    with pytest.raises(tbi.TorchBenchError, match="must be a git checkout"):
        tbi.parse_source(str(tmp_path))
    with pytest.raises(tbi.TorchBenchError, match="no such file"):
        tbi.parse_source(str(tmp_path / "missing.tar.gz"))


def test_the_archive_is_unpacked_once_with_its_commit(tmp_path: Path) -> None:
    tree = tbi.fetch(tbi.Source("archive", str(_archive())), tmp_path / "tb" / tbi.COMMIT)
    assert (tree / "torchbenchmark" / "models" / "BERT_pytorch" / "__init__.py").is_file()
    assert tbi.read_marker(tree) == {"commit": tbi.COMMIT, "source": str(ARCHIVE)}
    (tree / "torchbenchmark" / "kept").write_text("a second fetch leaves the tree as it is")
    assert tbi.fetch(tbi.Source("archive", "/no/such/archive.tar.gz"), tree) == tree
    assert (tree / "torchbenchmark" / "kept").is_file()


def test_an_archive_of_another_commit_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.tar.gz"
    with tarfile.open(other, "w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": "1" * 40}) as tar:
        info = tarfile.TarInfo("pytorch-benchmark/torchbenchmark/__init__.py")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(tbi.TorchBenchError, match=f"of commit {'1' * 40}, not the pinned {tbi.COMMIT}"):
        tbi.fetch(tbi.Source("archive", str(other)), tmp_path / "tree")
    assert not (tmp_path / "tree").exists()


def test_an_archive_by_url_as_the_images_get_it_without_github(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    (served / ARCHIVE.name).symlink_to(_archive())
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{ARCHIVE.name}"
        tree = tbi.fetch(tbi.parse_source(url), tmp_path / "tree")
    finally:
        server.shutdown()
    assert tbi.read_marker(tree) == {"commit": tbi.COMMIT, "source": url}


def test_the_models_requirements_are_pinned_to_what_is_installed() -> None:
    pins = tbi.installed_pins()
    from importlib import metadata

    assert f"torch=={metadata.version('torch')}" in pins and f"numpy=={metadata.version('numpy')}" in pins
    lists = [REPO / "runner" / "suites" / "data" / "torchbench.toml"]
    assert tbi.list_models(lists)[:2] == ["alexnet", "BERT_pytorch"]


def test_the_environment_setup_made_has_no_package_the_installer_removes() -> None:
    """pytorch_unet's requirements bring wandb; timm imports it when present, and on import it patches the write() of
    the sys.stdout/sys.stderr of that moment for good (a test's capture, closed later, then crashed the test run)."""
    import subprocess
    import sys

    if not (Path(sys.prefix) / tbi.STAMP_NAME).is_file():
        pytest.skip("setup did not install TorchBench's models into this environment")
    assert [name for name in tbi.NOT_KEPT if tbi._installed(name)] == []
    imported = subprocess.run([sys.executable, "-c", "import sys, timm; print(sorted(set(sys.modules) & {'wandb'}))"],
                              capture_output=True, text=True, check=True).stdout.strip()
    assert imported == "[]"


def test_the_environment_requirements_replace_the_pins_of_what_they_name() -> None:
    """setuptools is pinned below 81 (pkg_resources, fastNLP_Bert), not at the version installed; the rest as is."""
    from importlib import metadata

    held = tbi.constraints()
    assert f"torch=={metadata.version('torch')}" in held
    assert "setuptools<81" in tbi.ENVIRONMENT_REQUIREMENTS and "setuptools<81" in held
    assert [line for line in held if tbi.requirement_name(line) == "setuptools"] == ["setuptools<81"]
    assert tbi.requirement_name("Foo_Bar.baz[extra]>=1; python_version>'3'") == "foo-bar-baz"


def test_the_environment_setup_made_meets_what_torchbench_models_need_of_it() -> None:
    """After setup, the environment holds ENVIRONMENT_REQUIREMENTS (pkg_resources imports: fastNLP_Bert loads), and
    no installed distribution's own requirement on what they name is broken by them (torch needs setuptools>=77.0.3)."""
    import subprocess
    import sys
    from importlib import metadata

    from packaging.requirements import Requirement

    if not (Path(sys.prefix) / tbi.STAMP_NAME).is_file():
        pytest.skip("setup did not install TorchBench's models into this environment")
    names = {tbi.requirement_name(line): Requirement(line) for line in tbi.ENVIRONMENT_REQUIREMENTS}
    for name, wanted in names.items():
        assert wanted.specifier.contains(metadata.version(name), prereleases=True), (name, metadata.version(name))
    for dist in metadata.distributions():
        for text in dist.requires or ():
            requirement = Requirement(text)
            if tbi.requirement_name(requirement.name) in names and (
                    requirement.marker is None or requirement.marker.evaluate({"extra": ""})):
                version = metadata.version(requirement.name)
                assert requirement.specifier.contains(version, prereleases=True), (dist.metadata["Name"], text)
    subprocess.run([sys.executable, "-W", "ignore", "-c", "import pkg_resources"], check=True)
