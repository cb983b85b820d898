#!/usr/bin/env python3
"""Build (once) and print a virtual environment holding one install profile of a docker image.

    python scripts/profile_venv.py runner|service     ->  prints the venv's path

The test suite runs in one environment with every extra, so it cannot see that the runner image (``.[runner]``
only) lacks what the service needs, or that the service image (``.[service]``, no torch) imports torch. These venvs
install exactly what each image installs (docker/*.Dockerfile): torch + torchvision, then ``pip install -e
".[runner]"``; or ``pip install -e ".[service]"``. Editable, as the images are, so the venv runs this clone's code
as it is now. It lives outside the clone, under $PERFDASH_CACHE_DIR/venvs/<profile>-<hash of the profile's
requirements, the Python version>, because the runner profile takes minutes and 5.5 GB to build (torch from local
wheels): a fresh clone (CI's) or an edit of pyproject.toml that changes no requirement reuses it, and only the
seconds-long editable install of the clone is redone when the venv last pointed at another clone. A lock makes
concurrent callers wait for one build; a marker file written last makes an interrupted build start over.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# What docker/runner-*.Dockerfile installs before the project (docker/install-torch.sh, from PyTorch's index there):
# here the development venv's torch (scripts/setup.sh), from local wheels. The runner extra itself pins no torch.
PROFILES: dict[str, tuple[tuple[str, ...], str]] = {
    "runner": (("torch==2.14.1", "torchvision==0.29.1"), ".[runner]"),
    "service": ((), ".[service]"),
}
COMPLETE = ".perfdash-profile-complete"


def cache_dir() -> Path:
    return Path(os.environ.get("PERFDASH_CACHE_DIR") or Path.home() / ".cache" / "perfdash") / "venvs"


def base_python() -> str:
    # The interpreter this venv (if any) was made from: a venv made from a venv's python would share nothing else.
    return getattr(sys, "_base_executable", None) or sys.executable


def requirements(profile: str) -> list[str]:
    """What the profile's install brings besides the project itself: pyproject.toml's core and extra requirements."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extra = PROFILES[profile][1].removeprefix(".[").removesuffix("]")
    return [*project["dependencies"], *project["optional-dependencies"][extra]]


def venv_path(profile: str) -> Path:
    key = hashlib.sha256()
    key.update(json.dumps(requirements(profile)).encode())
    key.update(sys.version.encode())
    key.update(repr(PROFILES[profile]).encode())
    return cache_dir() / f"{profile}-{key.hexdigest()[:12]}"


def _run(command: list[str], log: Path) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, check=False,
                              env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    if done.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-30:])
        raise SystemExit(f"profile venv: {' '.join(command)} failed ({done.returncode}); log {log}:\n{tail}")


def _prune_siblings(profile: str, keep: Path) -> None:
    """Builds of this profile for other requirements (pyproject changed since): 5.5 GB each."""
    for other in keep.parent.glob(f"{profile}-*"):
        if other != keep and other.is_dir():
            shutil.rmtree(other, ignore_errors=True)


def _install_project(venv: Path, profile: str, log: Path) -> None:
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, "--no-deps", "-e", str(REPO)], log)
    (venv / COMPLETE).write_text(json.dumps({"profile": profile, "repo": str(REPO)}))


def ensure(profile: str) -> Path:
    venv = venv_path(profile)
    venv.parent.mkdir(parents=True, exist_ok=True)
    log = venv.parent / f"{venv.name}.log"
    with (venv.parent / f"{venv.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            built_for = json.loads((venv / COMPLETE).read_text()).get("repo")
        except (OSError, ValueError):
            built_for = None
        if built_for == str(REPO):
            return venv
        if built_for is not None:  # built for another clone: point its editable install here
            print(f"profile venv: {venv} now runs {REPO}", file=sys.stderr)
            _install_project(venv, profile, log)
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        log.write_text("")
        print(f"profile venv: building {venv} (log {log})", file=sys.stderr)
        _run([base_python(), "-m", "venv", str(venv)], log)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        first, project = PROFILES[profile]
        if first:
            _run([*pip, *first], log)
        _run([*pip, "-e", f"{REPO}{project[1:]}"], log)
        (venv / COMPLETE).write_text(json.dumps({"profile": profile, "repo": str(REPO)}))
        _prune_siblings(profile, venv)
        return venv


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in PROFILES:
        print(f"usage: {Path(__file__).name} {'|'.join(PROFILES)}", file=sys.stderr)
        return 2
    print(ensure(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
