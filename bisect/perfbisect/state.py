"""The resumable state of one bisection: every sample and skip so far, in a JSON file outside the repository.

Saved (atomically) after every measurement, so a crash, a timeout of the whole job or Ctrl-C loses at most the
measurement that was running; ``--resume`` replays the search from the file, which asks for no measurement it already
has. The repository itself never holds bisection state.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfbisect.stats import Sample

STATE_VERSION = 2  # 2: samples per A/B (key purpose:A-sha:B-sha:side), measurement counts per commit


class StateMismatch(ValueError):
    """A state file that belongs to a different bisection than the one asked for."""


@dataclass(slots=True)
class BisectState:
    identity: dict[str, Any]  # what makes two runs the same bisection (repo, good, bad, commands, policy)
    samples: dict[str, list[Sample]] = field(default_factory=dict)  # A/B key and side -> its samples, in order
    counts: dict[str, int] = field(default_factory=dict)  # sha -> measurements taken (the next one's index)
    skipped: dict[str, str] = field(default_factory=dict)  # sha -> why (build failed, measurement failed)
    path: Path | None = None  # None: in memory only (the bench)

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        data = {"version": STATE_VERSION, "identity": self.identity, "samples": self.samples, "counts": self.counts,
                "skipped": self.skipped}
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)

    @classmethod
    def load(cls, path: Path, identity: dict[str, Any]) -> BisectState:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != STATE_VERSION:
            raise StateMismatch(f"{path}: state version {data.get('version')!r}, expected {STATE_VERSION}")
        if data["identity"] != identity:
            changed = sorted(k for k in set(identity) | set(data["identity"])
                             if identity.get(k) != data["identity"].get(k))
            raise StateMismatch(f"{path} is the state of a different bisection (differs in: {', '.join(changed)})")
        return cls(identity=identity, samples={k: list(v) for k, v in data["samples"].items()},
                   counts=dict(data.get("counts", {})), skipped=dict(data["skipped"]), path=path)

    @classmethod
    def open(cls, path: Path | None, identity: dict[str, Any], resume: bool) -> BisectState:
        """Resume from ``path`` when asked to and it exists; otherwise start empty (overwriting on first save)."""
        if resume and path is not None and path.exists():
            return cls.load(path, identity)
        return cls(identity=identity, path=path)
