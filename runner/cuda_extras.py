"""``python -m runner.cuda_extras``: the CUDA extras (pyproject's ``backends-cuda``) must be built for the CUDA major
version of the torch wheel beside them. Run where the CUDA image is built (docker/runner-cuda.Dockerfile), after the
installs: a mismatch is one message naming the package and both versions, printed there and kept with the reasons
the backend cells cannot run (``--record``), and ``perfdash run --backend onnxruntime|tensorrt --device cuda``
refuses with it before any model (runner.backends.check), instead of every ONNX Runtime or TensorRT model of a night
failing on its own. Without ``--record`` a mismatch exits 1.

What each package says it was built for, read from its files without importing it (no GPU where images are built):

- torch: ``torch/version.py``'s ``cuda`` (perfdash.torch_spec; not runner.manifest, which imports runner.backends);
- onnxruntime-gpu: ``onnxruntime/capi/build_and_package_info.py``'s ``cuda_version`` (a CPU build has none);
- torch-tensorrt: ``torch_tensorrt/_version.py``'s ``__cuda_version__``;
- TensorRT's wheels: the ``-cuNN`` of their distribution names (``tensorrt-cu12``, ``tensorrt_cu13_libs`` ...).

Torch-free.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from perfdash.torch_spec import torch_version_file, version_field


@dataclass(frozen=True, slots=True)
class CudaBuild:
    """One installed package and the CUDA version it was built for (None: it does not say)."""

    package: str
    cuda: str | None


def _torch_cuda() -> str | None:
    """The CUDA version torch was built for, from ``torch/version.py`` (None: a CPU build, or no torch)."""
    return version_field(torch_version_file(), "cuda")


def major(version: str | None) -> str | None:
    """``"13.0"`` -> ``"13"``, ``"12"`` -> ``"12"``; anything else (None, ``"cu128"``) -> None: never guessed."""
    if not version:
        return None
    match = re.match(r"^\s*(\d+)(?:\.\d+)*\s*$", version)
    return match.group(1) if match else None


def mismatches(torch_cuda: str | None, builds: Iterable[CudaBuild]) -> list[str]:
    """One message per package whose CUDA major differs from torch's, or that is a CPU build (no CUDA at all) where
    a CUDA one is needed; empty when all agree. A torch without CUDA is itself the error."""
    torch_major = major(torch_cuda)
    if torch_major is None:
        return [f"torch is not a CUDA build (torch.version.cuda is {torch_cuda!r}); the CUDA image needs one"]
    errors: list[str] = []
    for build in builds:
        theirs = major(build.cuda)
        if theirs is None:
            errors.append(f"{build.package} states no CUDA version ({build.cuda!r}): a CPU build where torch is "
                          f"built for CUDA {torch_cuda}")
        elif theirs != torch_major:
            errors.append(f"{build.package} is built for CUDA {build.cuda}, torch for CUDA {torch_cuda}: install the "
                          f"{build.package} build for CUDA {torch_major}")
    return errors


def _module_file(module: str, relative: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations)), relative)
    return path if path.is_file() else None


def _assigned(path: Path | None, name: str) -> str | None:
    """The string a module file assigns to ``name`` (``name = '12.8'``, with or without a type annotation)."""
    if path is None:
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    match = re.search(rf"^{re.escape(name)}\s*(?::[^=]+)?=\s*['\"]([^'\"]*)['\"]", text, re.MULTILINE)
    return match.group(1) if match else None


def tensorrt_builds(distributions: Iterable[str]) -> list[CudaBuild]:
    """TensorRT's wheels name their CUDA major: ``tensorrt-cu12``, ``tensorrt_cu13_libs``, ``tensorrt-cu12-bindings``
    ..."""
    out: list[CudaBuild] = []
    for name in sorted(set(distributions)):
        match = re.match(r"^tensorrt[-_]cu(\d+)(?:[-_].*)?$", name.lower())
        if match:
            out.append(CudaBuild(package=name, cuda=match.group(1)))
    return out


def installed_builds(distributions: Mapping[str, str] | None = None) -> list[CudaBuild]:
    """The CUDA extras installed here (only those present: the check is of what the image holds)."""
    names = {d.metadata["Name"]: d.version for d in metadata.distributions()} if distributions is None \
        else dict(distributions)
    lowered = {name.lower().replace("_", "-") for name in names}
    builds: list[CudaBuild] = []
    if "onnxruntime-gpu" in lowered:
        info = _module_file("onnxruntime", "capi/build_and_package_info.py")
        builds.append(CudaBuild("onnxruntime-gpu", _assigned(info, "cuda_version")))
    if "torch-tensorrt" in lowered:
        builds.append(CudaBuild("torch-tensorrt", _assigned(_module_file("torch_tensorrt", "_version.py"),
                                                             "__cuda_version__")))
    return builds + tensorrt_builds(names)


# The extras each CUDA backend runs on (runner.backends): the ONNX Runtime build, and TensorRT's by either route.
_BACKEND_PACKAGES: dict[str, tuple[str, ...]] = {
    "onnxruntime": ("onnxruntime-gpu",),
    "tensorrt": ("torch-tensorrt", "onnxruntime-gpu", "tensorrt"),
}


def backend_mismatches(backend: str, torch_cuda: str | None, builds: Iterable[CudaBuild]) -> list[str]:
    """The mismatches of the extras ``backend`` runs on (TensorRT's wheels by their ``tensorrt-cuNN`` prefix)."""
    wanted = _BACKEND_PACKAGES.get(backend, ())
    relevant = [b for b in builds
                if b.package.lower() in wanted or ("tensorrt" in wanted and b.package.lower().startswith("tensorrt"))]
    return mismatches(torch_cuda, relevant) if relevant else []


def installed_mismatches(backend: str) -> list[str]:
    """What ``perfdash run --backend B --device cuda`` checks before any model (runner.backends.check)."""
    return backend_mismatches(backend, _torch_cuda(), installed_builds())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.cuda_extras", description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", type=Path, metavar="FILE",
                        help="on a mismatch, append the messages to FILE and exit 0 (the image is still built for "
                             "the Inductor cells; the backend cells refuse with the same message)")
    args = parser.parse_args(argv)
    torch_cuda = _torch_cuda()
    builds = installed_builds()
    errors = mismatches(torch_cuda, builds) if builds else []
    for build in builds:
        print(f"{build.package}: CUDA {build.cuda}")
    if not errors:
        print(f"runner.cuda_extras: {len(builds)} CUDA extra(s) match torch's CUDA {torch_cuda}")
        return 0
    text = f"runner.cuda_extras: the CUDA extras do not match torch (CUDA {torch_cuda}):\n" + \
        "".join(f"  - {error}\n" for error in errors)
    print(text, end="", file=sys.stderr)
    if args.record is None:
        return 1
    with args.record.open("a", encoding="utf-8") as record:
        record.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
