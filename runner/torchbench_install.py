"""Get PyTorch's TorchBench (``torchbenchmark``, github.com/pytorch/benchmark) at the commit perfdash pins, and make it
importable in a Python environment with the requirements of the models perfdash runs.

TorchBench is not on PyPI (the ``torchbenchmark`` name there is an unrelated 2020 upload), so it comes from a source
named by one setting, ``PERFDASH_TORCHBENCH_SOURCE``:

- a git URL or a git checkout's directory (agents: the default, ``DEFAULT_SOURCE``), fetched at ``COMMIT``;
- a ``git archive`` of that commit, as a local file or an http(s) URL ending in ``.tar.gz``/``.tgz``/``.tar``
  (machines without GitHub: ``../shared/third_party/pytorch-benchmark-<commit>.tar.gz`` beside the clone is used when
  the setting is unset). The archive's own record of its commit (the pax header ``git archive`` writes) must be COMMIT.

The tree is unpacked once into ``$PERFDASH_CACHE_DIR/torchbench/<commit>/`` (images: a directory of their own), with
a marker naming the commit and source that the runner reads for the manifest (``MARKER``); a second setup finds it
and fetches nothing. The environment gets a ``.pth`` file pointing at the tree, as TorchBench is used from its root.

Then each model of the given lists runs its own ``install.py`` as TorchBench's installer runs it (cwd the model's
directory, the tree on PYTHONPATH), under pip constraints that pin every distribution already installed: the torch
under test, perfdash's transformers and timm are never replaced, a model's requirement only adds. Before them the
environment gets what TorchBench's models need of it as PyTorch's CI has it (``ENVIRONMENT_REQUIREMENTS``), which the
constraints then hold. TorchBench's root
``requirements.txt`` is not installed (it pins a transformers and timm of its own). A model whose ``install.py``
downloads input data (``INPUT_TARBALLS``) gets it only beside a git remote (an agent with network); from an archive
(file or URL) or a local checkout only its requirements are installed, and the runner reports the missing data
(runner/suites/torchbench.py).

Standard library only: the runner images run it before perfdash itself is installed.
Usage: ``python -m runner.torchbench_install [--source S] [--dest DIR] [--list FILE ...] [--data|--no-data]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import tomllib
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

# The one pin: pytorch/benchmark's commit every agent and image runs (2026-08-22). A change of it is an environment
# change of every torchbench series (the manifest's suite_versions carry it).
COMMIT = "0e83c440a51cd63464fee34724d01b7c814ce39b"
DEFAULT_SOURCE = "https://github.com/pytorch/benchmark"
SETTING = "PERFDASH_TORCHBENCH_SOURCE"
MARKER = ".perfdash-torchbench.json"
PTH_NAME = "perfdash-torchbench.pth"
STAMP_NAME = ".perfdash-torchbench-models.json"
# Where a machine without GitHub keeps the archive: ../shared/third_party/ beside the clone (this repository's root).
SHARED_ARCHIVE = Path("..") / "shared" / "third_party" / f"pytorch-benchmark-{COMMIT[:8]}.tar.gz"
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
# What the models' install.py files import from TorchBench's root requirements.txt (the rest of it, a transformers and
# timm of TorchBench's own among them, is not installed): patch (fastNLP_Bert); and, only where the input data is
# downloaded, utils/s3_utils.py's imports (boto3 alone takes pip minutes to resolve against the pins).
INSTALLER_MODULES = frozenset({"patch"})
DATA_INSTALLER_MODULES = frozenset({"boto3", "pyyaml", "requests"})
# What the models need of the environment itself, installed before them and held by the constraints in place of the
# installed version: a setuptools below 81, which still ships pkg_resources. fastNLP 0.6.0 (fastNLP_Bert, in PyTorch's
# CPU list) imports it on import; setuptools 81 removed it. PyTorch's CI images, where its expected-accuracy files are
# made, pin setuptools==78.1.1 (pytorch/pytorch .ci/docker/requirements-ci.txt); torch needs >=77.0.3. The one
# replacement the installer makes, so a change of this line is an environment change (the stamp carries it).
ENVIRONMENT_REQUIREMENTS = ("setuptools<81",)
# What a model's requirements bring that no benchmark imports and that harms every process where it is importable:
# wandb (pytorch_unet's requirements, for its training script). timm imports it whenever it is installed, which costs
# 0.8 s per import of timm on these 2 cores and patches the write() of whatever sys.stdout and sys.stderr are at that
# moment for good (a test's capture, closed later, then fails every write: a crash of the test process). Removed after
# the models' installs; a model that imports one at run time fails with its own ImportError, as a status row.
NOT_KEPT = ("wandb",)
# A model's install.py that fetches input data: utils.s3_utils.checkout_s3_data("INPUT_TARBALLS", "<name>.tar.gz"),
# unpacked under torchbenchmark/data/.data/, or checkout_s3_data("MODEL_PKLS", "<model>/<file>"), a file kept as it is
# under torchbenchmark/models/ (drq's obs.pkl, maml_omniglot's batch.pt, which functorch_maml_omniglot reads too).
_DATA_CALL = re.compile(r"checkout_s3_data\(\s*[\"'](?:INPUT_TARBALLS|MODEL_PKLS)[\"']\s*,\s*[\"']([^\"']+)[\"']")


class TorchBenchError(RuntimeError):
    """TorchBench cannot be fetched or installed; the message says from where and what to do."""


@dataclass(frozen=True, slots=True)
class Source:
    """Where TorchBench comes from: ``kind`` git (a URL or a checkout), archive (a file) or url (an archive to
    download)."""

    kind: str
    location: str

    @property
    def networked(self) -> bool:
        """A git remote (an agent with network): the models' input data is downloaded beside it. An archive, even by
        URL, is what a machine without GitHub uses (a mirror), and a checkout is local."""
        return self.kind == "git" and "://" in self.location and not self.location.startswith("file://")


def parse_source(text: str) -> Source:
    if text.startswith(("http://", "https://")) and text.endswith(_ARCHIVE_SUFFIXES):
        return Source("url", text)
    path = Path(text).expanduser()
    if "://" not in text and path.is_file():
        return Source("archive", str(path.resolve()))
    if "://" not in text and path.is_dir() and not (path / ".git").exists():
        raise TorchBenchError(f"{SETTING}={text}: a directory must be a git checkout of pytorch/benchmark (its commit "
                              f"is checked); give the archive of commit {COMMIT} instead")
    if "://" not in text and not path.exists() and not text.startswith("git@"):
        raise TorchBenchError(f"{SETTING}={text}: no such file or directory")
    return Source("git", str(path.resolve()) if path.is_dir() else text)


def default_source(repo_root: Path, environ: Mapping[str, str]) -> Source:
    """The setting when set; else the shared archive beside the clone when it exists (no GitHub here); else GitHub."""
    text = environ.get(SETTING, "").strip()
    if text:
        return parse_source(text)
    shared = (repo_root / SHARED_ARCHIVE).resolve()
    if shared.is_file():
        return Source("archive", str(shared))
    return Source("git", DEFAULT_SOURCE)


def default_tree(environ: Mapping[str, str]) -> Path:
    cache = Path(environ.get("PERFDASH_CACHE_DIR") or Path.home() / ".cache" / "perfdash")
    return cache / "torchbench" / COMMIT


def read_marker(tree: Path) -> dict[str, str] | None:
    try:
        data = json.loads((tree / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# ---- fetching ------------------------------------------------------------------------------------------------------


def _run(argv: Sequence[str]) -> None:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise TorchBenchError(f"{' '.join(argv)} failed ({done.returncode}): {(done.stderr or done.stdout)[-800:]}")


def _fetch_git(location: str, into: Path) -> None:
    """A shallow fetch of the one commit (GitHub serves a commit by id); a full clone where the server will not."""
    _run(["git", "init", "--quiet", str(into)])
    try:
        _run(["git", "-C", str(into), "fetch", "--quiet", "--depth", "1", location, COMMIT])
    except TorchBenchError:
        _run(["git", "-C", str(into), "fetch", "--quiet", location])
    _run(["git", "-C", str(into), "-c", "advice.detachedHead=false", "checkout", "--quiet", COMMIT])


def _unpack(archive: Path, into: Path) -> None:
    with tarfile.open(archive) as tar:
        recorded = tar.pax_headers.get("comment", "")
        if recorded != COMMIT:
            raise TorchBenchError(f"{archive}: a git archive of commit {recorded or '(none recorded)'}, not the "
                                  f"pinned {COMMIT}")
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
        else:  # Python before 3.11.4 (Debian bookworm's 3.11.2): refuse what the "data" filter would refuse
            for member in tar.getmembers():
                target = (into / member.name).resolve()
                if not target.is_relative_to(into.resolve()) or not (member.isfile() or member.isdir()
                                                                     or member.issym()):
                    raise TorchBenchError(f"{archive}: refusing member {member.name!r}")
                if member.issym() and not (target.parent / member.linkname).resolve().is_relative_to(into.resolve()):
                    raise TorchBenchError(f"{archive}: refusing link {member.name!r} -> {member.linkname!r}")
            tar.extractall(into)  # members checked above
    roots = [p for p in into.iterdir()]
    if len(roots) != 1 or not (roots[0] / "torchbenchmark").is_dir():
        raise TorchBenchError(f"{archive}: expected one top directory holding torchbenchmark/")
    for child in roots[0].iterdir():
        child.rename(into / child.name)
    roots[0].rmdir()


def fetch(source: Source, tree: Path) -> Path:
    """The tree at COMMIT under ``tree`` (fetched unless its marker already names COMMIT); returns it."""
    marker = read_marker(tree)
    if marker is not None and marker.get("commit") == COMMIT:
        return tree
    tree.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{tree.name}.", dir=tree.parent))
    try:
        if source.kind == "git":
            _fetch_git(source.location, staging)
        elif source.kind == "url":
            with tempfile.NamedTemporaryFile(suffix=".tar.gz", dir=tree.parent) as download:
                with urllib.request.urlopen(source.location, timeout=120) as response:
                    shutil.copyfileobj(response, download)
                download.flush()
                _unpack(Path(download.name), staging)
        else:
            _unpack(Path(source.location), staging)
        (staging / MARKER).write_text(json.dumps({"commit": COMMIT, "source": source.location}) + "\n",
                                      encoding="utf-8")
        shutil.rmtree(tree, ignore_errors=True)
        staging.rename(tree)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return tree


# ---- installing ----------------------------------------------------------------------------------------------------


def list_models(paths: Sequence[Path]) -> list[str]:
    """The model names of perfdash's suite lists (``[[model]]`` tables), in order, once each."""
    names: list[str] = []
    for path in paths:
        for entry in tomllib.loads(path.read_text(encoding="utf-8")).get("model", []):
            names.append(str(entry["name"]))
    return list(dict.fromkeys(names))


def input_data(tree: Path, model: str) -> list[str]:
    """The input data a model's install.py downloads (``INPUT_TARBALLS``, ``MODEL_PKLS``): what it cannot run
    without."""
    try:
        text = (tree / "torchbenchmark" / "models" / model / "install.py").read_text(encoding="utf-8")
    except OSError:
        return []
    return _DATA_CALL.findall(text)


def data_dir(tree: Path, tarball: str) -> Path:
    """Where TorchBench unpacks an input tarball (utils/s3_utils.py, decompress_s3_data)."""
    return tree / "torchbenchmark" / "data" / ".data" / tarball.removesuffix(".tar.gz")


def data_path(tree: Path, name: str) -> Path:
    """Where one of ``input_data``'s names lies once downloaded (utils/s3_utils.py, checkout_s3_data): a MODEL_PKLS
    file (``<model>/<file>``) under torchbenchmark/models/, an input tarball's unpacked directory."""
    if "/" in name:
        return tree / "torchbenchmark" / "models" / name
    return data_dir(tree, name)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(line: str) -> str:
    """The distribution a requirement line names, canonical (``setuptools<81`` -> ``setuptools``)."""
    return _canonical(re.split(r"[<>=!~\[; ]", line.strip(), maxsplit=1)[0])


def installed_pins() -> list[str]:
    """``name==version`` of every distribution of this environment: what a model's requirement may not replace."""
    pins = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            pins[_canonical(name)] = f"{name}=={dist.version}"
    return [pins[key] for key in sorted(pins)]


def constraints() -> list[str]:
    """The installed pins, ENVIRONMENT_REQUIREMENTS in place of the pins of what they name."""
    required = {requirement_name(line): line for line in ENVIRONMENT_REQUIREMENTS}
    pins = [pin for pin in installed_pins() if requirement_name(pin) not in required]
    return pins + list(required.values())


@contextlib.contextmanager
def constraints_file() -> Iterator[Path]:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", prefix="torchbench-constraints-", delete=False) as out:
        out.write("# what this environment holds (ENVIRONMENT_REQUIREMENTS aside): TorchBench's model requirements may "
                  "add, never replace\n")
        out.write("\n".join(constraints()) + "\n")
    try:
        yield Path(out.name)
    finally:
        Path(out.name).unlink(missing_ok=True)


def install_pth(tree: Path) -> Path:
    """Make ``torchbenchmark`` importable: TorchBench runs from its root (its code imports the root's ``utils``)."""
    pth = Path(sysconfig.get_paths()["purelib"]) / PTH_NAME
    pth.write_text(f"{tree}\n", encoding="utf-8")
    return pth


def has_model(tree: Path, model: str) -> bool:
    """Whether this TorchBench tree holds the model, where PyTorch's torchbench.py looks for it (models/, then
    canary_models/): PyTorch's lists can name a model its TorchBench no longer holds."""
    return any((tree / "torchbenchmark" / kind / model).is_dir() for kind in ("models", "canary_models"))


def install_model(tree: Path, model: str, env: Mapping[str, str], with_data: bool) -> str | None:
    """Run the model's own install.py (requirements, patches, data) as TorchBench does; without data, only its
    requirements.txt when its install.py would download input data. Returns why it failed, None when it did not."""
    directory = tree / "torchbenchmark" / "models" / model
    if not directory.is_dir():
        return f"TorchBench {COMMIT[:8]} has no model {model}"
    needs_data = bool(input_data(tree, model))
    if needs_data and not with_data:
        requirements = directory / "requirements.txt"
        if not requirements.is_file():
            return None
        argv = [sys.executable, "-m", "pip", "install", "--quiet", "-r", str(requirements)]
    elif (directory / "install.py").is_file():
        argv = [sys.executable, "install.py"]
    else:
        return None
    done = subprocess.run(argv, cwd=directory, env=dict(env), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return (done.stderr or done.stdout).strip()[-600:] or f"exit status {done.returncode}"
    return None


def installer_requirements(tree: Path, with_data: bool) -> list[str]:
    """The lines of TorchBench's root requirements.txt that its model installers import (INSTALLER_MODULES, and
    DATA_INSTALLER_MODULES when they download the input data)."""
    wanted = INSTALLER_MODULES | (DATA_INSTALLER_MODULES if with_data else frozenset())
    lines = (tree / "requirements.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if requirement_name(line) in wanted]


def install_models(tree: Path, models: Sequence[str], with_data: bool, environ: Mapping[str, str]) -> dict[str, str]:
    """Each model's installation under the constraints; model -> why it failed (the others are installed)."""
    failures: dict[str, str] = {}
    with constraints_file() as pins:
        existing = environ.get("PIP_CONSTRAINT", "").strip()
        env = {**environ, "PIP_CONSTRAINT": f"{existing} {pins}".strip(), "PYTHONPATH": str(tree),
               "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        tools = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                                *installer_requirements(tree, with_data)],
                               env=env, capture_output=True, text=True, check=False)
        if tools.returncode != 0:
            raise TorchBenchError(f"TorchBench's installer requirements: {tools.stderr.strip()[-600:]}")
        for model in models:
            print(f"torchbench: installing {model}", flush=True)
            why = install_model(tree, model, env, with_data)
            if why is not None:
                failures[model] = why
    remove_not_kept()
    return failures


def remove_not_kept() -> None:
    """Uninstall what NOT_KEPT names, where a model's requirements installed it."""
    present = [name for name in NOT_KEPT if _installed(name)]
    if present:
        print(f"torchbench: removing {', '.join(present)} (no benchmark imports it; NOT_KEPT says why)", flush=True)
        _run([sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", *present])


def _installed(name: str) -> bool:
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def _stamp(models: Sequence[str], with_data: bool) -> dict[str, object]:
    return {"commit": COMMIT, "models": list(models), "data": with_data,
            "requirements": list(ENVIRONMENT_REQUIREMENTS), "environment": installed_pins()}


def _read_stamp(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def install(source: Source, tree: Path, lists: Sequence[Path], with_data: bool,
            environ: Mapping[str, str]) -> dict[str, str]:
    """Fetch, make importable, install the listed models' requirements (skipped when this environment's stamp says
    the same commit, models and packages were installed before). Returns model -> why its install failed."""
    tree = fetch(source, tree)
    install_pth(tree)
    models = list_models(lists)
    stamp = Path(sys.prefix) / STAMP_NAME
    wanted = _stamp(models, with_data)
    before = _read_stamp(stamp)
    if before is not None and {k: before.get(k) for k in wanted} == wanted:
        print(f"torchbench: {COMMIT[:8]} and its {len(models)} models already installed here", flush=True)
        return dict(before.get("failures") or {})  # type: ignore[call-overload]
    failures = install_models(tree, models, with_data, environ)
    # With the packages as they are now, so an unchanged environment matches it next time (a model that failed
    # fails again under the same pins: its failure is kept and said again, not retried).
    stamp.write_text(json.dumps({**_stamp(models, with_data), "failures": failures}) + "\n", encoding="utf-8")
    return failures


def main(argv: Sequence[str] | None = None) -> int:
    repo_root = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(prog="python -m runner.torchbench_install", description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", help=f"git URL, checkout, archive or archive URL (default: ${SETTING}, else the "
                                         f"shared archive beside the clone, else {DEFAULT_SOURCE})")
    parser.add_argument("--dest", type=Path,
                        help="the tree's directory (default $PERFDASH_CACHE_DIR/torchbench/<commit>)")
    parser.add_argument("--list", dest="lists", type=Path, action="append", default=[],
                        help="a suite list whose models' requirements to install (repeatable)")
    parser.add_argument("--data", action=argparse.BooleanOptionalAction, default=None,
                        help="download the models' input data (default: when the source is a git remote)")
    args = parser.parse_args(argv)
    try:
        source = parse_source(args.source) if args.source else default_source(repo_root, os.environ)
        tree = args.dest or default_tree(os.environ)
        with_data = source.networked if args.data is None else args.data
        print(f"torchbench: {COMMIT} from {source.location} into {tree}", flush=True)
        failures = install(source, tree, args.lists, with_data, os.environ)
    except TorchBenchError as exc:
        print(f"torchbench: {exc}", file=sys.stderr)
        return 2
    for model, why in failures.items():
        # Not fatal: the model's row says it could not load; the others run.
        print(f"torchbench: {model} not installed: {why}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
