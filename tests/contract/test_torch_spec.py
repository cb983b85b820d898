"""perfdash/torch_spec.py: what a torch spec asks for, the check against the importable torch, tonight's nightly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from datetime import date
from pathlib import Path

import pytest

from perfdash import torch_spec
from perfdash.torch_spec import TorchSpecError, mismatch, parse, resolve

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("text", "kind", "version", "commit"), [
    ("nightly", "nightly", None, None),
    ("2.14.1", "release", "2.14.1", None),
    ("2.14.1@5c48869", "release", "2.14.1", "5c48869"),
    ("20261121", "date", None, None),
    ("2026-11-21", "date", None, None),
    ("2.15.0.dev20261121", "nightly_version", "2.15.0.dev20261121", None),
    ("2.15.0.dev20261121@" + "a" * 40, "nightly_version", "2.15.0.dev20261121", "a" * 40),
    ("abc1234", "commit", None, "abc1234"),
])
def test_specs_parse(text: str, kind: str, version: str | None, commit: str | None) -> None:
    spec = parse(text)
    assert (spec.kind, spec.version, spec.commit) == (kind, version, commit)
    assert spec.install_spec == text.split("@")[0]


@pytest.mark.parametrize("text", ["latest", "2.14", "nightly@abc1234", "2.14.1@xyz", "20261341", ""])
def test_nonsense_is_refused(text: str) -> None:
    with pytest.raises(TorchSpecError):
        parse(text)


def test_mismatch_names_both_sides() -> None:
    assert mismatch(parse("2.13.0"), "2.13.0+cpu", "a" * 40) is None  # the CPU build of the release is the release
    assert mismatch(parse("20261121"), "2.15.0.dev20261121+cu130", "b" * 40) is None
    assert mismatch(parse("2.15.0.dev20261121@bbbbbbb"), "2.15.0.dev20261121+cpu", "b" * 40) is None
    why = mismatch(parse("2.13.0"), "2.14.1+cu130", "5c4886908584029761b579af026dcfb627c84070")
    assert why is not None and "2.13.0" in why and "2.14.1+cu130" in why and "5c4886908584" in why
    assert "built from ccccccc" in mismatch(parse("2.15.0.dev20261121@ccccccc"), "2.15.0.dev20261121", "b" * 40)
    assert "nightly of 2026-11-22" in mismatch(parse("20261122"), "2.15.0.dev20261121", "b" * 40)
    assert mismatch(parse("nightly"), "2.14.1", "x") is not None  # must be resolved first
    assert mismatch(parse("2.14.1"), None, None) is not None  # no torch at all


# ---- tonight's nightly, on an index of PyTorch's shape ------------------------------------------------------------


def _wheel(directory: Path, version: str, variant: str, commit: str) -> str:
    name = f"torch-{version}+{variant}-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(directory / name, "w") as wheel:
        wheel.writestr("torch/version.py", f"__version__ = '{version}+{variant}'\ngit_version = '{commit}'\n")
    return name


def _index(root: Path, published: dict[str, dict[str, str]]) -> str:
    """root/nightly/<variant>/torch/index.html listing the wheels {variant: {date: commit}} (PEP 503, %2B-quoted)."""
    for variant, days in published.items():
        directory = root / "nightly" / variant / "torch"
        directory.mkdir(parents=True)
        links = [_wheel(directory, f"2.15.0.dev{day}", variant, commit) for day, commit in days.items()]
        # a wheel of another Python and a torchvision-like name are ignored
        links += ["torch-2.15.0.dev20261125+cpu-cp312-cp312-manylinux_2_28_x86_64.whl"]
        directory.joinpath("index.html").write_text("".join(f'<a href="{link.replace("+", "%2B")}#sha256=00">{link}</a>'
                                                            for link in links))
    return root.as_uri()


def test_nightly_resolves_to_tonights_version_and_commit(tmp_path: Path) -> None:
    root = _index(tmp_path, {"cpu": {"20261124": "4" * 40, "20261125": "5" * 40},
                             "cu130": {"20261124": "4" * 40, "20261125": "5" * 40}})
    found = resolve("nightly", ["cpu", "cu130"], root, today=date(2026, 11, 25))
    assert (found.spec, found.version, found.git_commit, found.day, found.note) == (
        "2.15.0.dev20261125@" + "5" * 40, "2.15.0.dev20261125", "5" * 40, "2026-11-25", "")


def test_an_unpublished_night_is_said_or_stops(tmp_path: Path) -> None:
    # Tonight's CPU wheel is out, its CUDA wheel not yet: the night's torch is the same for every cell or none.
    root = _index(tmp_path, {"cpu": {"20261124": "4" * 40, "20261125": "5" * 40}, "cu130": {"20261124": "4" * 40}})
    with pytest.raises(TorchSpecError, match=r"2026-11-25 is not published for cu130; the newest .* is 2026-11-24"):
        resolve("nightly", ["cpu", "cu130"], root, today=date(2026, 11, 25))
    older = resolve("nightly", ["cpu", "cu130"], root, today=date(2026, 11, 25), allow_older=True)
    assert older.spec == "2.15.0.dev20261124@" + "4" * 40
    assert "benchmarking the nightly of 2026-11-24 instead" in older.note
    # The CPU cells alone can have tonight's.
    assert resolve("nightly", ["cpu"], root, today=date(2026, 11, 25)).version == "2.15.0.dev20261125"
    # A date asked for explicitly is never swapped for another.
    with pytest.raises(TorchSpecError):
        resolve("20261125", ["cpu", "cu130"], root, allow_older=True)
    assert resolve("2.14.1", ["cpu"], root).spec == "2.14.1"  # a release passes through, nothing is read


def test_resolve_command_prints_json_and_says_why_it_stops(tmp_path: Path) -> None:
    root = _index(tmp_path, {"cpu": {"20261125": "5" * 40}})
    command = [sys.executable, "-m", "perfdash.torch_spec", "resolve", "nightly", "--variant", "cpu",
               "--index-root", root]
    done = subprocess.run([*command, "--today", "2026-11-25"], capture_output=True, text=True, cwd=REPO, check=True)
    assert json.loads(done.stdout)["spec"] == "2.15.0.dev20261125@" + "5" * 40
    missing = subprocess.run([*command, "--today", "2026-11-26"], capture_output=True, text=True, cwd=REPO)
    assert missing.returncode == 2
    assert "torch: the torch nightly of 2026-11-26 is not published for cpu" in missing.stderr


def test_check_command_against_this_environments_torch() -> None:
    version, commit = torch_spec.installed_torch()
    assert version and commit  # the dev venv has torch
    asked = f"{version.split('+')[0]}@{commit[:10]}"
    ok = subprocess.run([sys.executable, "-m", "perfdash.torch_spec", "check", asked], capture_output=True, text=True,
                        cwd=REPO)
    assert ok.returncode == 0, ok.stderr
    other = subprocess.run([sys.executable, "-m", "perfdash.torch_spec", "check", "2.13.0"], capture_output=True,
                           text=True, cwd=REPO)
    assert other.returncode == 1 and "asked for torch 2.13.0" in other.stderr and version in other.stderr


@pytest.mark.parametrize("release", ["2.13.0", "2.14.1", "2.9.0"])
def test_install_torch_pairs_torchvision_as_the_contract_does(release: str, tmp_path: Path) -> None:
    log = tmp_path / "pip.log"
    pip = tmp_path / "pip"
    pip.write_text(f'#!/usr/bin/env bash\necho "$*" >> {log}\n')
    pip.chmod(0o755)
    subprocess.run(["bash", str(REPO / "docker" / "install-torch.sh"), release, "cpu"], check=True, timeout=60,
                   env={**os.environ, "PIP": str(pip), "INSTALL_TORCH_VERIFY": "0"})
    assert f"torchvision=={torch_spec.torchvision_for(release)}" in log.read_text().split()
    with pytest.raises(TorchSpecError):
        torch_spec.torchvision_for("3.0.0")


# ---- the index over HTTP: retried as perfdash.http_retry says -------------------------------------------------------


@pytest.fixture
def http_index(tmp_path: Path):
    """serve(published, failures) -> (index root URL, requests): the index of ``_index`` served on 127.0.0.1 by a
    real HTTP server that first answers the statuses in ``failures`` (e.g. [503]), then the files; ``404`` in
    failures as the string "always" answers every request 404."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    servers = []

    def serve(published: dict[str, dict[str, str]], failures: list[int] | str) -> tuple[str, list[str]]:
        root = tmp_path / "served"
        _index(root, published)
        requests: list[str] = []
        queue = failures if isinstance(failures, list) else []

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:
                pass

            def _fail(self) -> bool:
                requests.append(f"{self.command} {self.path}")
                if failures == "always":
                    self.send_error(404)
                    return True
                if queue:
                    self.send_response(queue.pop(0))
                    self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return True
                return False

            def do_GET(self) -> None:
                if not self._fail():
                    super().do_GET()

            def do_HEAD(self) -> None:
                if not self._fail():
                    super().do_HEAD()

        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", requests

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_5xx_from_the_index_is_retried(http_index) -> None:
    url, requests = http_index({"cpu": {"20261125": "5" * 40}}, [503, 502])
    found = resolve("nightly", ["cpu"], url, today=date(2026, 11, 25))
    assert found.spec == "2.15.0.dev20261125@" + "5" * 40
    assert requests[:3] == ["GET /nightly/cpu/torch/"] * 3  # two failures, then the page


def test_a_404_from_the_index_fails_at_once(http_index) -> None:
    url, requests = http_index({"cpu": {"20261125": "5" * 40}}, "always")
    with pytest.raises(TorchSpecError, match=r"/nightly/cpu/torch/: HTTP 404"):
        resolve("nightly", ["cpu"], url, today=date(2026, 11, 25))
    assert requests == ["GET /nightly/cpu/torch/"]


def test_resolve_command_retries_and_says_why_it_stops(http_index) -> None:
    url, requests = http_index({"cpu": {"20261125": "5" * 40}}, [503] * 5)
    done = subprocess.run([sys.executable, "-m", "perfdash.torch_spec", "resolve", "nightly", "--variant", "cpu",
                           "--index-root", url, "--today", "2026-11-25"], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "HTTP 503" in done.stderr and "after 5 tries" in done.stderr
    assert len(requests) == 5
