"""The spool: uploads the service could not take now, kept as directories to post on the next `perfdash ingest
--url`, and a ``rejected/`` folder for those it refused (kept for a person to look at, never retried).

An entry is ``<root>/<UTC stamp>-<id>/`` with the result files, ``form.json`` (the upload's form fields) and
``state.json`` (how often the service answered a server error for it, and the last error). Entries are written as
``*.partial`` and renamed, so a crash mid-write never leaves half an upload to retry.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from perfdash.upload import Upload

FORM = "form.json"
STATE = "state.json"
REJECTED = "rejected"
REASON = "rejected.json"
LOCK = ".lock"
_PARTIAL = ".partial"


@dataclass(frozen=True, slots=True)
class Spooled:
    """An upload read back from the spool, with what earlier attempts learnt about it."""

    entry: Path
    upload: Upload
    server_errors: int
    last_error: str


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def save(root: Path, upload: Upload, *, server_errors: int = 0, last_error: str = "") -> Path:
    """Keep an upload for later. Raises OSError (with the partial directory removed) when the spool cannot be
    written."""
    target = root / f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    partial = target.with_name(target.name + _PARTIAL)
    try:
        partial.mkdir(parents=True)
        for name, data in upload.files.items():
            (partial / Path(name).name).write_bytes(data)
        (partial / FORM).write_text(json.dumps(dict(upload.form)), encoding="utf-8")
        _write_state(partial, server_errors, last_error)
        partial.rename(target)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return target


def _write_state(entry: Path, server_errors: int, last_error: str) -> None:
    state = {"server_errors": server_errors, "last_error": last_error, "updated": _now()}
    (entry / STATE).write_text(json.dumps(state), encoding="utf-8")


def entries(root: Path) -> list[Path]:
    """Complete entries, oldest first (the service then sees nights in order)."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name != REJECTED and not p.name.endswith(_PARTIAL)
                  and (p / FORM).exists())


def load(entry: Path) -> Spooled:
    """Raises OSError or ValueError when the entry cannot be read back (it is then set aside, not retried)."""
    form = json.loads((entry / FORM).read_text(encoding="utf-8"))
    state = json.loads((entry / STATE).read_text(encoding="utf-8")) if (entry / STATE).exists() else {}
    if not isinstance(form, dict) or not isinstance(state, dict):
        raise ValueError(f"{entry}: {FORM} or {STATE} is not a JSON object")
    files = {p.name: p.read_bytes() for p in sorted(entry.iterdir()) if p.is_file() and p.name not in (FORM, STATE)}
    return Spooled(entry, Upload(files=files, form={str(k): str(v) for k, v in form.items()}),
                   int(state.get("server_errors", 0)), str(state.get("last_error", "")))


def record_failure(entry: Path, server_errors: int, last_error: str) -> None:
    _write_state(entry, server_errors, last_error)


def reject(entry: Path, reason: str, status: int | None) -> Path:
    """Move a refused upload aside (``<root>/rejected/<entry>``) with why, so it is neither retried nor lost."""
    target = entry.parent / REJECTED / entry.name
    target.parent.mkdir(parents=True, exist_ok=True)
    (entry / REASON).write_text(json.dumps({"status": status, "reason": reason, "rejected": _now()}), encoding="utf-8")
    shutil.move(str(entry), target)
    return target


@contextlib.contextmanager
def drain_lock(root: Path) -> Iterator[bool]:
    """Whether this process may post the spool now. Several cells on one node share the spool volume: one of them
    drains it, the others leave it (flock works across containers on one host)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        handle = (root / LOCK).open("a")
    except OSError:
        # An unwritable spool can still be read and posted; nothing else can write to it either.
        yield True
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
