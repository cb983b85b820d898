"""What Inductor generated for one model, as the result contract carries it (torch-free: the runner builds it, the
service reads it).

- ``CodeFingerprint``: a digest of the generated source of every graph, normalised so that what differs between two
  compilations of the same code (cache and temporary paths, content hashes in file names, object addresses, the
  process's AOT graph counter, addresses in object reprs) does not change it; the number of graphs and generated
  kernels, and each kernel's name with a short digest of its own normalised source (bounded: ``MAX_KERNELS``).
- ``KernelTime``: one kernel of the per-kernel profile (self time per step and its share of the step), bounded by
  ``MAX_KERNEL_TIMES``.
- the normalised source itself, compressed and capped (``pack_source``/``unpack_source``), from which the service
  shows the difference between two runs on request.

The shape of Inductor's output code this reads: every generated kernel is a module-level assignment
``name = async_compile.<kind>(...`` whose source ends at the next line that starts with a closing triple quote (the
C++ kernels of ``cpp_pybinding`` and the Triton kernels of ``triton`` alike; torch/_inductor/codegen/cpp.py and
codegen/triton.py of pytorch/pytorch at 5c4886908584029761b579af026dcfb627c84070, torch 2.14.1).
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_KERNELS = 200  # kernel names (with digests) kept per result; the count is kept whole
MAX_KERNEL_TIMES = 15  # kernels of the profile kept per result, by self time
MAX_SOURCE_CHARS = 40_000  # base64 characters of the compressed source kept per result (the diff's material)
KERNEL_DIGEST_CHARS = 16

_AOT_ID = re.compile(r"^# AOT ID: .*$", re.MULTILINE)  # a per-process counter of compiled graphs
# Constants' comments end with the tensor's id() (``_frozen_param1 = None  # device(...) (32,) (1,) 7f76802ead50``)
_ADDRESS = re.compile(r"^(\w+ = None  # .*\)) (?:0x)?[0-9a-f]{6,16}$", re.MULTILINE)
# Python object reprs in strings of the wrapper (``<function ... at 0x7fe5583e4860>`` in assert_tensor_metadata's
# message of a freezing pattern's match)
_REPR_ADDRESS = re.compile(r"(?<= at )0x[0-9a-f]{6,16}\b")
# Inductor's code-cache keys ('c' + 51 base32 characters) and hex digests (backend hashes, Triton cache keys)
_CACHE_KEY = re.compile(r"\b[a-z0-9]{52}\b")
_HEX_DIGEST = re.compile(r"\b[0-9a-f]{32,64}\b")
_TORCHINDUCTOR_TMP = re.compile(r"/[^\s'\"]*/torchinductor_[^\s/'\"]+")
_KERNEL_DEF = re.compile(r"^(\w+) = async_compile\.(\w+)\(", re.MULTILINE)
_KERNEL_END = re.compile(r"^(?:'''|\"\"\").*$", re.MULTILINE)  # the closing line, arguments after the quotes too
# Inductor's own C++ kernel profile (cpp.enable_kernel_profile, which perfdash's worker compiled with until 2026-11-29)
# names a kernel ``graph_<id>_<name>`` (torch/_inductor/codegen/cpp.py: RECORD_FUNCTION); files written then still do.
_PROFILE_PREFIX = re.compile(r"^graph_\d+_")


def normalise(source: str, roots: Iterable[str] = ()) -> str:
    """The output code with what differs between two compilations of the same code taken out. ``roots``: directories
    that appear in paths (cache dir, temporary dir, home), replaced by a placeholder, longest first."""
    text = _AOT_ID.sub("# AOT ID: <id>", source)
    text = _ADDRESS.sub(r"\1 <address>", text)
    text = _REPR_ADDRESS.sub("<address>", text)
    for index, root in enumerate(sorted({r.rstrip("/") for r in roots if r and r != "/"}, key=len, reverse=True)):
        text = text.replace(root, f"<root{index}>")
    text = _TORCHINDUCTOR_TMP.sub("<tmp>", text)
    text = _CACHE_KEY.sub("<key>", text)
    return _HEX_DIGEST.sub("<hash>", text)


def kernels_of(source: str) -> list[tuple[str, str]]:
    """(name, source) of each kernel generated in one graph's (normalised) output code, in order."""
    out = []
    for match in _KERNEL_DEF.finditer(source):
        end = _KERNEL_END.search(source, match.end())
        out.append((match.group(1), source[match.start():end.end() if end else len(source)]))
    return out


def _digest(text: str, chars: int = 64) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:chars]


def profile_kernel_name(name: str) -> str:
    """A profiler event's name as the fingerprint names the kernel (the C++ profile's graph prefix dropped)."""
    return _PROFILE_PREFIX.sub("", name)


@dataclass(frozen=True, slots=True)
class CodeFingerprint:
    digest: str  # sha256 of the sorted digests of each graph's normalised source
    graphs: int
    kernels: int  # generated kernels in all graphs (``kernel_digests`` holds at most MAX_KERNELS of them)
    kernel_digests: tuple[tuple[str, str], ...]  # (name, digest of its normalised source); a repeated name gets #2

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[0-9a-f]{64}", self.digest):
            raise ValueError("code digest must be 64 hex characters")
        if self.graphs < 0 or self.kernels < 0 or len(self.kernel_digests) > MAX_KERNELS:
            raise ValueError("code counts must be non-negative and the kernel list bounded")

    @property
    def kernel_map(self) -> dict[str, str]:
        return dict(self.kernel_digests)

    def to_json(self) -> dict[str, Any]:
        return {"digest": self.digest, "graphs": self.graphs, "kernels": self.kernels,
                "kernel_digests": [list(pair) for pair in self.kernel_digests]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CodeFingerprint:
        return cls(digest=str(data["digest"]), graphs=int(data["graphs"]), kernels=int(data["kernels"]),
                   kernel_digests=tuple((str(n), str(d)) for n, d in data.get("kernel_digests") or ()))


def fingerprint(normalised_graphs: Sequence[str]) -> CodeFingerprint:
    """The fingerprint of a model's graphs (each already ``normalise``d). The digest does not depend on the order in
    which the graphs were compiled."""
    digests: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    count = 0
    for graph in normalised_graphs:
        for name, body in kernels_of(graph):
            count += 1
            seen[name] = seen.get(name, 0) + 1
            if len(digests) < MAX_KERNELS:
                unique = name if seen[name] == 1 else f"{name}#{seen[name]}"
                digests.append((unique, _digest(body, KERNEL_DIGEST_CHARS)))
    whole = _digest("\n".join(sorted(_digest(g) for g in normalised_graphs)))
    return CodeFingerprint(digest=whole, graphs=len(normalised_graphs), kernels=count, kernel_digests=tuple(digests))


@dataclass(frozen=True, slots=True)
class KernelTime:
    name: str  # as the fingerprint names it (profile_kernel_name), or a library kernel's (aten::mm, sgemm_...)
    self_us: float  # self time per step, microseconds
    share: float  # of the step's wall time under the profiler
    calls: float  # per step

    def __post_init__(self) -> None:
        for value in (self.self_us, self.share, self.calls):
            if not math.isfinite(value) or value < 0:
                raise ValueError("kernel times must be finite and non-negative")

    def to_json(self) -> list[Any]:
        return [self.name, round(self.self_us, 3), round(self.share, 5), round(self.calls, 3)]

    @classmethod
    def from_json(cls, data: Sequence[Any]) -> KernelTime:
        name, self_us, share, calls = data
        return cls(str(name), float(self_us), float(share), float(calls))


# Profiler events of the compiled step that are torch.compile's own Python wrappers, not kernels (their self time is
# the wrapper's overhead, which moves with the machine's load, not with the generated kernels).
FRAMEWORK_EVENTS = ("## ", "Torch-Compiled Region", "TorchDynamo", "AOTDispatcher", "Pregraph bytecode",
                    "CompiledFunction", "ProfilerStep")  # the last: the profiler's own step marks (ProfilerStep*)


def top_kernels(self_us_total: Mapping[str, tuple[float, int]], steps: int, step_us: float,
                limit: int = MAX_KERNEL_TIMES) -> tuple[KernelTime, ...]:
    """The ``limit`` kernels with the most self time: ``self_us_total`` maps an event name to (self µs, calls) summed
    over ``steps`` profiled steps of ``step_us`` wall µs each. Names of one kernel (C++ profile prefixes) merge;
    torch.compile's wrapper events (FRAMEWORK_EVENTS) are not kernels and are left out."""
    merged: dict[str, list[float]] = {}
    for name, (self_us, calls) in self_us_total.items():
        if name.startswith(FRAMEWORK_EVENTS):
            continue
        entry = merged.setdefault(profile_kernel_name(name), [0.0, 0.0])
        entry[0] += self_us
        entry[1] += calls
    ranked = sorted(merged.items(), key=lambda item: (-item[1][0], item[0]))[:limit]
    return tuple(KernelTime(name, total / steps, (total / steps) / step_us if step_us > 0 else 0.0, calls / steps)
                 for name, (total, calls) in ranked if total > 0)


def pack_source(normalised_graphs: Sequence[str], limit: int = MAX_SOURCE_CHARS) -> str:
    """The graphs' normalised source, zlib-compressed and base64-encoded, cut (at a line) until it fits ``limit``."""
    text = "\n".join(normalised_graphs)
    while True:
        packed = base64.b64encode(zlib.compress(text.encode(), 9)).decode("ascii")
        if len(packed) <= limit or not text:
            return packed
        text = text[: text.rfind("\n", 0, len(text) * 3 // 4) + 1] + "# ... cut to fit perfdash's cap\n"


def unpack_source(packed: str) -> str:
    return zlib.decompress(base64.b64decode(packed)).decode()
