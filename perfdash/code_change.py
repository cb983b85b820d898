"""Did the compiler emit different code between the two runs a performance finding compares? (pure functions)

LLVM's LNT stopped reporting runtime changes when the compiled binary's hash is unchanged and lost much of its alert
noise; perfdash does the same with the fingerprint of what Inductor generated (perfdash.generated_code):

- code unchanged, and nothing else changed either (the torch build, the machine's software, suite versions): the
  finding is a **machine change** — the same code took a different time. It gets no regression issue, no
  confirmation, and counts on the configuration's "same code, different time" noise gauge. The torch build counts as
  a change because the generated code calls into torch's own kernels (aten, oneDNN, cuBLAS), which the fingerprint
  does not cover;
- code changed: the finding names the kernels added, removed, whose code changed, and that got slower in the
  per-kernel profile, largest first;
- either run without a fingerprint (older runs, other backends): unknown, and the finding is what it was.

The words below are this module's vocabulary (finding category, verdicts); they are meant to move into the shared
detection vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SAME_CODE_GAUGE = "same code, different time"  # the noise gauge's label (machine-change findings per configuration)
CODE_UNCHANGED = "unchanged"
CODE_CHANGED = "changed"
CODE_UNKNOWN = "unknown"
SLOWED_MIN = 0.10  # a kernel counts as slower when its self time per step grew by this share or more
MIN_KERNEL_US = 0.5  # below this per step a kernel's time is the profiler's resolution, not a change
MAX_LISTED = 8  # kernels named per list in a finding


@dataclass(frozen=True, slots=True)
class CodeSide:
    """One run's generated code for one model, as stored (service.models.GeneratedCode)."""

    digest: str
    kernels: Mapping[str, str]  # name -> digest of its source
    times: Mapping[str, float] = field(default_factory=dict)  # kernel -> self µs per step (profile)


@dataclass(frozen=True, slots=True)
class CodeChange:
    verdict: str  # CODE_UNCHANGED | CODE_CHANGED | CODE_UNKNOWN
    environment_changed: bool
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()  # same name, other code
    slowed: tuple[tuple[str, float, float], ...] = ()  # (kernel, before µs, after µs), largest growth first

    @property
    def machine_change(self) -> bool:
        return self.verdict == CODE_UNCHANGED and not self.environment_changed

    @property
    def named_kernels(self) -> tuple[str, ...]:
        """Every kernel the finding names, in the order it names them."""
        return tuple(dict.fromkeys((*self.changed, *self.added, *self.removed, *(k for k, _, _ in self.slowed))))

    def sentence(self) -> str:
        """What the finding says about the code, one line."""
        if self.verdict == CODE_UNKNOWN:
            return "Generated code: not recorded for both runs."
        if self.verdict == CODE_UNCHANGED:
            if self.machine_change:
                return "Generated code unchanged, environment unchanged: a machine change (same code, different time)."
            return "Generated code unchanged; the torch build or environment changed."
        parts = [f"{label} {', '.join(names)}" for label, names in
                 (("changed", self.changed), ("added", self.added), ("removed", self.removed)) if names]
        if self.slowed:
            parts.append("slowed " + ", ".join(f"{k} {old:.3g}->{new:.3g} us" for k, old, new in self.slowed))
        said = "; ".join(parts) if parts else "kernels the same, wrapper code differs"
        return f"Generated code changed: {said}."

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "environment_changed": self.environment_changed, "added": list(self.added),
                "removed": list(self.removed), "changed": list(self.changed),
                "slowed": [list(s) for s in self.slowed]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CodeChange:
        return cls(verdict=str(data["verdict"]), environment_changed=bool(data["environment_changed"]),
                   added=tuple(data.get("added") or ()), removed=tuple(data.get("removed") or ()),
                   changed=tuple(data.get("changed") or ()),
                   slowed=tuple((str(k), float(b), float(a)) for k, b, a in data.get("slowed") or ()))


def describe(stored: Mapping[str, Any] | None) -> str:
    """A finding's stored code change (``Finding.code_change``) in one line; a finding without one says so."""
    if not stored:
        return CodeChange(CODE_UNKNOWN, False).sentence()
    return CodeChange.from_json(stored).sentence()


def _by_time(names: set[str], times: Mapping[str, float]) -> tuple[str, ...]:
    return tuple(sorted(names, key=lambda k: (-times.get(k, 0.0), k))[:MAX_LISTED])


def slowed_kernels(before: Mapping[str, float], after: Mapping[str, float]) -> tuple[tuple[str, float, float], ...]:
    """Kernels in both profiles whose self time per step grew by SLOWED_MIN or more, largest growth (µs) first."""
    grown = [(k, before[k], after[k]) for k in before.keys() & after.keys()
             if after[k] >= MIN_KERNEL_US and after[k] >= before[k] * (1.0 + SLOWED_MIN)]
    return tuple(sorted(grown, key=lambda s: (-(s[2] - s[1]), s[0]))[:MAX_LISTED])


def compare_code(before: CodeSide | None, after: CodeSide | None, environment_changed: bool) -> CodeChange:
    """What changed in the generated code from ``before`` (the old level's last run) to ``after`` (the new's first)."""
    if before is None or after is None:
        return CodeChange(CODE_UNKNOWN, environment_changed)
    slowed = slowed_kernels(before.times, after.times)
    if before.digest == after.digest:
        return CodeChange(CODE_UNCHANGED, environment_changed, slowed=slowed)
    old, new = before.kernels, after.kernels
    return CodeChange(
        CODE_CHANGED, environment_changed,
        added=_by_time(set(new) - set(old), after.times),
        removed=_by_time(set(old) - set(new), before.times),
        changed=_by_time({k for k in old.keys() & new.keys() if old[k] != new[k]}, after.times),
        slowed=slowed)
