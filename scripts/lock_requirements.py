"""Write the lock files the images install from: pyproject.toml's requirements as PyPI resolves them today.

- ``docker/service.lock``: every package of the service image (perfdash's core and its ``service`` extra), pinned,
  with the sha256 of the file pip chose for Linux x86-64 and CPython 3.11 (the image's). docker/service.Dockerfile
  installs it with ``--require-hashes``; psycopg2 is its source archive, built against libpq in the image.
- ``docker/runner.lock``: pins for pip's constraints in the runner images (the core and the ``runner`` and
  ``backends`` extras), without torch, torchvision and everything they bring (the CUDA libraries, triton, numpy...):
  an image measures the torch it is given (docker/install-torch.sh pins that one). Not ``backends-cuda``: its
  TensorRT packages are stubs that fetch their wheels from pypi.nvidia.com at install, which only a GPU image's build
  reaches; its three packages are pinned exactly in pyproject.toml, and the CUDA image's step that installs them may
  fail without failing the image (docker/runner-cuda.Dockerfile).

Run it after changing a requirement in pyproject.toml (tests/deploy/test_docker.py fails until the locks satisfy
pyproject again), or to take newer releases:

    scripts/lock-requirements

It asks PyPI alone (not this machine's pip configuration or local wheels, whose files are not the ones an image
downloads), takes a few minutes, and needs libpq's pg_config (Debian's libpq-dev) to read psycopg2's metadata.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
SERVICE_EXTRAS = ("service",)
RUNNER_EXTRAS = ("runner", "backends")
TORCH = frozenset({"torch", "torchvision"})  # the torch under test: never pinned for a runner image
HEADER = ("# {name}: made by scripts/lock-requirements from pyproject.toml ({what}); do not edit by hand.\n"
          "# Regenerate after a requirement changes: scripts/lock-requirements\n")


def requirements_of(extras: Iterable[str]) -> list[str]:
    """The core's requirements and the extras', as the images name them (docker/requirements-of.py)."""
    done = subprocess.run([sys.executable, str(REPO / "docker" / "requirements-of.py"), str(REPO / "pyproject.toml"),
                           *extras], capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def resolve(requirements: list[str]) -> list[dict]:
    """pip's resolution of ``requirements`` from PyPI alone, as its installation report's items."""
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "", "PIP_CONSTRAINT": ""}
    with tempfile.TemporaryDirectory() as tmp:
        listed, report = Path(tmp) / "requirements.txt", Path(tmp) / "report.json"
        listed.write_text("\n".join(requirements) + "\n")
        subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                        "--report", str(report), "-r", str(listed)], env=env, check=True)
        return json.loads(report.read_text())["install"]


def _dependencies(item: dict) -> Iterator[str]:
    extras = {"", *(item.get("requested_extras") or ())}
    for text in item["metadata"].get("requires_dist") or ():
        requirement = Requirement(text)
        if requirement.marker is None or any(requirement.marker.evaluate({"extra": e}) for e in extras):
            yield canonicalize_name(requirement.name)


def _closure(by_name: dict[str, dict], roots: Iterable[str], stop: frozenset[str] = frozenset()) -> set[str]:
    todo, seen = list(roots), set()
    while todo:
        name = todo.pop()
        if name in seen or name in stop or name not in by_name:
            continue
        seen.add(name)
        todo.extend(_dependencies(by_name[name]))
    return seen


def ours(items: list[dict], requirements: list[str]) -> list[dict]:
    """The resolved packages perfdash's own requirements bring, less torch and everything torch brings: a runner
    image takes those as the torch under test has them (a pin of one of them, numpy or a CUDA library, would
    contradict that torch's own requirements), and the service has no torch."""
    by_name = {canonicalize_name(i["metadata"]["name"]): i for i in items}
    wanted = _closure(by_name, (canonicalize_name(Requirement(r).name) for r in requirements), stop=TORCH)
    return [by_name[name] for name in sorted(wanted - _closure(by_name, TORCH))]


def _pin(item: dict) -> str:
    return f"{canonicalize_name(item['metadata']['name'])}=={item['metadata']['version']}"


def write_service_lock(path: Path) -> None:
    requirements = requirements_of(SERVICE_EXTRAS)
    lines = []
    for item in ours(resolve(requirements), requirements):
        hashes = item["download_info"].get("archive_info", {}).get("hashes", {})
        lines.append(f"{_pin(item)} \\\n    --hash=sha256:{hashes['sha256']}")
    path.write_text(HEADER.format(name=path.name, what="core + " + ", ".join(SERVICE_EXTRAS)) + "\n".join(lines)
                    + "\n")


def write_runner_lock(path: Path) -> None:
    requirements = requirements_of(RUNNER_EXTRAS)
    pins = [_pin(item) for item in ours(resolve(requirements), requirements)]
    path.write_text(HEADER.format(name=path.name, what="core + " + ", ".join(RUNNER_EXTRAS)
                                  + "; constraints: torch and what it brings are the image's")
                    + "\n".join(pins) + "\n")


def main() -> int:
    write_service_lock(REPO / "docker" / "service.lock")
    write_runner_lock(REPO / "docker" / "runner.lock")
    return 0


if __name__ == "__main__":
    sys.exit(main())
