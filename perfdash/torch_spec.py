"""Which torch a build or a run asks for, which one it got, and tonight's nightly.

A *torch spec* is what the Jenkins ``TORCH`` parameter, the runner images' ``TORCH_SPEC`` and ``perfdash run --torch``
take:

- ``nightly``: the newest nightly wheel, resolved once per build (``resolve``) into the exact version below;
- a release ``2.14.1``; a nightly date ``20261121`` (or ``2026-11-21``); an exact nightly ``2.15.0.dev20261121``;
- a PyTorch commit, 7 to 40 hex digits (built from source);
- any of the versions followed by ``@<commit>``: that version, and its ``torch.version.git_version`` must start so.

Standard library only, but for the index reads of ``resolve``: those are retried by perfdash's one HTTP retry policy
(perfdash.http_retry, tenacity; imported when the index is read), so one 5xx from PyTorch's index does not fail a
night's Plan stage, which installs tenacity beside the checkout before it resolves. ``check`` and ``parse`` stay
standard library only: the images run ``check`` (a copy of this file alone) after their last ``pip install``.
"""

from __future__ import annotations

import argparse
import html.parser
import http.client
import io
import json
import re
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Literal

PYTORCH_INDEX_ROOT = "https://download.pytorch.org/whl"
PYTHON_TAG = "cp311"  # the images' Python (requires-python is 3.11 only)

SpecKind = Literal["nightly", "release", "date", "nightly_version", "commit"]

_RELEASE = re.compile(r"\d+\.\d+\.\d+")
_DATE = re.compile(r"(\d{4})-?(\d{2})-?(\d{2})")
_NIGHTLY_VERSION = re.compile(r"(\d+\.\d+\.\d+)\.dev(\d{8})")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


class TorchSpecError(ValueError):
    """A spec that names no torch, a nightly that is not published, or a torch that is not the one asked for."""


@dataclass(frozen=True, slots=True)
class TorchSpec:
    text: str  # as asked
    kind: SpecKind
    version: str | None = None  # release or exact nightly version
    day: date | None = None  # nightly date
    commit: str | None = None  # commit (kind commit) or the commit a version must have been built from

    @property
    def install_spec(self) -> str:
        """What install-torch installs: the spec without its ``@commit`` (checked after the install)."""
        return self.text.split("@", 1)[0]


def parse(text: str) -> TorchSpec:
    text = text.strip()
    head, _, commit = text.partition("@")
    if commit and not _COMMIT.fullmatch(commit):
        raise TorchSpecError(f"torch spec {text!r}: {commit!r} after @ is not a commit sha")
    commit_or_none = commit or None
    if head == "nightly" and not commit:
        return TorchSpec(text, "nightly")
    if _RELEASE.fullmatch(head):
        return TorchSpec(text, "release", version=head, commit=commit_or_none)
    if match := _NIGHTLY_VERSION.fullmatch(head):
        return TorchSpec(text, "nightly_version", version=head, day=_day(match.group(2)), commit=commit_or_none)
    if (match := _DATE.fullmatch(head)) and not commit:
        return TorchSpec(text, "date", day=_day("".join(match.groups())))
    if _COMMIT.fullmatch(head) and not commit:
        return TorchSpec(text, "commit", commit=head)
    raise TorchSpecError(f"torch spec {text!r} is none of: nightly, a release (2.14.1), a nightly date (20261121), "
                         "a nightly version (2.15.0.dev20261121), a commit sha, or a version@commit")


def _day(digits: str) -> date:
    try:
        return datetime.strptime(digits.replace("-", ""), "%Y%m%d").date()
    except ValueError:
        raise TorchSpecError(f"{digits!r} is not a date") from None


def torchvision_for(release: str) -> str:
    """The torchvision release paired with a torch release: minor + 15 (torch 2.14.1 pairs with torchvision 0.29.1).
    docker/install-torch.sh states the same in bash (tests/contract/test_torch_spec.py compares them)."""
    major, minor, patch = release.split(".")
    if major != "2":
        raise TorchSpecError(f"no torchvision pairing known for torch {release}")
    return f"0.{int(minor) + 15}.{patch}"


def mismatch(spec: TorchSpec, version: str | None, git_version: str | None) -> str | None:
    """Why the torch (``version``, ``git_version``) is not the one ``spec`` asks for; None when it is."""
    got = f"torch {version or 'unknown'} (git {(git_version or 'unknown')[:12]})"
    base = (version or "").split("+", 1)[0]  # 2.13.0+cpu is the 2.13.0 release
    if spec.kind == "nightly":
        return f"'nightly' must be resolved to one version before anything runs; got {got}"
    if spec.kind in ("release", "nightly_version") and base != spec.version:
        return f"asked for torch {spec.text}, but {got} is installed"
    if spec.kind == "date" and spec.day is not None and not base.endswith(f".dev{spec.day:%Y%m%d}"):
        return f"asked for the torch nightly of {spec.day}, but {got} is installed"
    if spec.commit and not (git_version or "").startswith(spec.commit):
        return f"asked for torch built from {spec.commit}, but {got} is installed"
    return None


def torch_version_file() -> str:
    """The text of the importable torch's torch/version.py (empty without torch), found without importing torch."""
    import importlib.util

    found = importlib.util.find_spec("torch")
    if found is None or not found.submodule_search_locations:
        return ""
    try:
        return Path(next(iter(found.submodule_search_locations)), "version.py").read_text(encoding="utf-8")
    except OSError:
        return ""


def version_field(text: str, name: str) -> str | None:
    """One assignment of torch/version.py (``__version__``, ``git_version``, ``cuda``); None when absent."""
    match = re.search(rf"^{name}\s*(?::\s*\S+\s*)?=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    return match.group(1) if match else None


def installed_torch() -> tuple[str | None, str | None]:
    """(version, git commit) of the torch importable here."""
    return _version_fields(torch_version_file())


def _version_fields(text: str) -> tuple[str | None, str | None]:
    return version_field(text, "__version__"), version_field(text, "git_version")


# ---- the nightly index ---------------------------------------------------------------------------------------------


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs.extend(v for k, v in attrs if k == "href" and v)


# PyTorch's index (a CDN): five tries over up to a minute or so, then the Plan stage says why it stops.
INDEX_ATTEMPTS = 5
INDEX_MAX_WAIT_S = 30.0


def _open(request: str | urllib.request.Request, timeout: float = 60.0) -> http.client.HTTPResponse:
    """``urlopen``, retried as perfdash.http_retry says (connection errors, timeouts, 5xx, 429; never another 4xx or
    a certificate that does not verify); what still fails is a :class:`TorchSpecError` naming the URL. A ``file:``
    URL (an index on disk) is read once."""
    url = request.full_url if isinstance(request, urllib.request.Request) else request
    if url.startswith("file:"):
        return urllib.request.urlopen(request, timeout=timeout)
    from perfdash.http_retry import CertificateError, RetryPolicy, Transient, status_failure, transport_failure

    def once() -> http.client.HTTPResponse:
        try:
            return urllib.request.urlopen(request, timeout=timeout)
        except urllib.error.HTTPError as exc:
            text = f"{url}: HTTP {exc.code} {exc.reason}"
            raise status_failure(exc.code, text, exc.headers.get("Retry-After")) or TorchSpecError(text) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise transport_failure(exc, url) from None

    try:
        return RetryPolicy(attempts=INDEX_ATTEMPTS, max_wait_s=INDEX_MAX_WAIT_S).call(once)
    except (Transient, CertificateError) as exc:
        raise TorchSpecError(f"{exc} (after {INDEX_ATTEMPTS} tries)" if isinstance(exc, Transient) else str(exc)) \
            from None


def nightly_wheels(index: str, python_tag: str = PYTHON_TAG) -> dict[date, tuple[str, str]]:
    """date -> (version, wheel URL) of the Linux x86-64 torch nightlies on a PEP 503 index (``.../nightly/cpu``)."""
    page_url = index.rstrip("/") + "/torch/"
    # a file: index is a directory tree, its pages are index.html files (as pip reads them)
    with _open(page_url + "index.html" if page_url.startswith("file:") else page_url) as response:
        parser = _Links()
        parser.feed(response.read().decode("utf-8", errors="replace"))
    pattern = re.compile(rf"torch-(\d+\.\d+\.\d+\.dev(\d{{8}}))(?:\+[\w.]+)?-{python_tag}-{python_tag}-"
                         r"manylinux[\w.]*x86_64\.whl")
    out: dict[date, tuple[str, str]] = {}
    for href in parser.hrefs:
        match = pattern.fullmatch(urllib.parse.unquote(href.split("#", 1)[0].rsplit("/", 1)[-1]))
        if match:
            day = _day(match.group(2))
            out.setdefault(day, (match.group(1), urllib.parse.urljoin(page_url, href.split("#", 1)[0])))
    return out


class _RangeReader(io.RawIOBase):
    """A seekable view of a remote file through HTTP range requests: zipfile reads a wheel's directory and one
    member (a few hundred kB) instead of the whole wheel."""

    def __init__(self, url: str, size: int) -> None:
        super().__init__()
        self.url, self.size, self.pos = url, size, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]  # typeshed's takes any writable buffer
        if self.pos >= self.size or not len(buffer):
            return 0
        end = min(self.pos + len(buffer), self.size) - 1
        request = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end}"})
        with _open(request, timeout=120) as response:
            data = response.read()
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


def wheel_git_version(url: str) -> str | None:
    """The git commit a torch wheel was built from (its torch/version.py), reading as little of it as possible."""
    if url.startswith("file:"):
        with zipfile.ZipFile(urllib.request.url2pathname(urllib.parse.urlparse(url).path)) as wheel:
            return _version_fields(wheel.read("torch/version.py").decode("utf-8"))[1]
    head = urllib.request.Request(url, method="HEAD")
    with _open(head, timeout=60) as response:
        size = int(response.headers.get("Content-Length", "0"))
        ranges = response.headers.get("Accept-Ranges", "") == "bytes"
    if ranges and size:
        with zipfile.ZipFile(io.BufferedReader(_RangeReader(url, size), buffer_size=1 << 18)) as wheel:
            return _version_fields(wheel.read("torch/version.py").decode("utf-8"))[1]
    with tempfile.TemporaryFile() as tmp, _open(url, timeout=600) as response:  # no ranges: the whole wheel
        while chunk := response.read(1 << 20):
            tmp.write(chunk)
        with zipfile.ZipFile(tmp) as wheel:
            return _version_fields(wheel.read("torch/version.py").decode("utf-8"))[1]


@dataclass(frozen=True, slots=True)
class Resolution:
    """One torch for a whole build: every cell on every agent installs ``spec``."""

    asked: str
    spec: str  # version@commit for a nightly, else the asked spec unchanged
    version: str | None
    git_commit: str | None
    day: str | None  # the nightly's date, ISO
    variants: tuple[str, ...]
    note: str  # what a person reading the build log should know (e.g. an older nightly was taken)


def resolve(text: str, variants: Sequence[str], index_root: str = PYTORCH_INDEX_ROOT, today: date | None = None,
            allow_older: bool = False, python_tag: str = PYTHON_TAG) -> Resolution:
    """The exact torch a build benchmarks. ``nightly`` (or a date) becomes the nightly of that date published for
    every variant (the CPU and CUDA wheels of one date are built from one commit); when tonight's is not published for
    all of them, the newest date that is, if ``allow_older``, said so in ``note`` -- otherwise an error naming what is
    missing. Other specs pass through."""
    spec = parse(text)
    variants = tuple(variants)
    if spec.kind not in ("nightly", "date"):
        return Resolution(text, spec.text, spec.version, spec.commit, spec.day.isoformat() if spec.day else None,
                          variants, "")
    want = spec.day or (today or datetime.now(UTC).date())
    per_variant = {v: nightly_wheels(f"{index_root.rstrip('/')}/nightly/{v}", python_tag) for v in variants}
    common = sorted(set.intersection(*(set(w) for w in per_variant.values())) if per_variant else set())
    missing = [v for v, wheels in per_variant.items() if want not in wheels]
    if not missing:
        day = want
        note = ""
    else:
        older = [d for d in common if d < want]
        what = f"the torch nightly of {want} is not published for {', '.join(missing)}"
        if spec.kind == "date" or not allow_older or not older:
            newest = f"; the newest date published for all of {', '.join(variants)} is {older[-1]}" if older else ""
            raise TorchSpecError(what + newest)
        day = older[-1]
        note = f"{what}: benchmarking the nightly of {day} instead"
    version, url = per_variant[variants[0]][day]
    versions = {per_variant[v][day][0] for v in variants}
    if len(versions) != 1:
        raise TorchSpecError(f"the nightlies of {day} disagree on the version: {sorted(versions)}")
    commit = wheel_git_version(url)
    if not commit:
        raise TorchSpecError(f"{url} has no git_version in torch/version.py")
    return Resolution(text, f"{version}@{commit}", version, commit, day.isoformat(), variants, note)


# ---- command line ------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perfdash.torch_spec", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    res = sub.add_parser("resolve", help="the exact torch a build benchmarks, as JSON")
    res.add_argument("spec")
    res.add_argument("--variant", action="append", required=True, help="wheel variant (cpu, cu130); repeatable")
    res.add_argument("--index-root", default=PYTORCH_INDEX_ROOT)
    res.add_argument("--allow-older", action="store_true",
                     help="take the newest nightly published for every variant when tonight's is not (said so)")
    res.add_argument("--today", type=date.fromisoformat, help="the build's date (default: today, UTC)")
    chk = sub.add_parser("check", help="exit 1 unless the importable torch is the one SPEC asks for")
    chk.add_argument("spec")
    args = parser.parse_args(argv)
    try:
        if args.command == "resolve":
            resolution = resolve(args.spec, args.variant, args.index_root, args.today, args.allow_older)
            if resolution.note:
                print(f"torch: {resolution.note}", file=sys.stderr)
            print(json.dumps(asdict(resolution)))
            return 0
        spec = parse(args.spec)
        version, git_version = installed_torch()
        why = mismatch(spec, version, git_version)
        if why:
            print(f"torch: {why}", file=sys.stderr)
            return 1
        print(f"torch {version} (git {git_version}) is what {spec.text} asks for")
        return 0
    except (TorchSpecError, OSError) as exc:
        print(f"torch: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
