"""The spool: uploads the service could not take now, kept as directories to post on the next `perfdash ingest
--url`, and a ``rejected/`` folder for those it refused (kept for a person to look at, never retried).

An entry is ``<root>/<UTC stamp>-<id>/`` with the result files, ``form.json`` (the upload's form fields, the time
the upload was made among them) and ``state.json`` (how often the service answered a server error for it, and the
last error). Entries are written as ``*.partial`` and renamed, so a crash mid-write never leaves half an upload to
retry.

Whatever is in the spool is posted with the real token, so nobody but the user that runs the cells may write there:
the spool is a directory that user owns with mode 0700 (entries 0700, files 0600). :func:`private_root` refuses a
spool another user owns or may write to; a node volume left world-writable (mode 1777, sticky) by an older image
gets a private ``uid-<uid>/`` inside it instead. An entry whose owner or mode is wrong (planted, or written by
another user) is never posted: :func:`untrusted_reason` names why and it is set aside in ``untrusted/``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from perfdash.upload import Upload

FORM = "form.json"
STATE = "state.json"
REJECTED = "rejected"
UNTRUSTED = "untrusted"
REASON = "rejected.json"
LOCK = ".lock"
_PARTIAL = ".partial"
_ASIDE = (REJECTED, UNTRUSTED)


class SpoolUnsafe(OSError):
    """The spool directory is owned by another user or writable by others: nothing is read from or written to it."""


@dataclass(frozen=True, slots=True)
class Spooled:
    """An upload read back from the spool, with what earlier attempts learnt about it."""

    entry: Path
    upload: Upload
    server_errors: int
    last_error: str


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _mode(st: os.stat_result) -> str:
    return f"{stat.S_IMODE(st.st_mode):04o}"


def _writable_by_others(st: os.stat_result) -> bool:
    return bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def private_root(root: Path) -> Path:
    """The directory this user spools in: ``root`` itself (created 0700 if missing), or ``root/uid-<uid>`` when
    ``root`` is a shared sticky world-writable directory (an older image's volume). Raises SpoolUnsafe otherwise."""
    uid = os.geteuid()
    if not os.path.lexists(root):
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(root)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise SpoolUnsafe(f"the spool {root} is not a directory (a symbolic link or a file)")
    if st.st_uid == uid and not _writable_by_others(st):
        return root
    if st.st_mode & stat.S_ISVTX and st.st_mode & stat.S_IWOTH:
        # /tmp-like: others may create names here but not take ours; our own directory inside is private
        mine = root / f"uid-{uid}"
        if not os.path.lexists(mine):
            mine.mkdir(mode=0o700)
        inner = os.lstat(mine)
        if stat.S_ISDIR(inner.st_mode) and not stat.S_ISLNK(inner.st_mode) and inner.st_uid == uid \
                and not _writable_by_others(inner):
            return mine
        raise SpoolUnsafe(f"the spool {mine} is owned by uid {inner.st_uid} with mode {_mode(inner)}, not by this "
                          f"user (uid {uid}) with mode 0700: someone else made it; remove it")
    owner = "this user" if st.st_uid == uid else f"uid {st.st_uid}"
    raise SpoolUnsafe(f"the spool {root} is owned by {owner} with mode {_mode(st)}: it must be owned by this user "
                      f"(uid {uid}) and writable by nobody else (chown {uid} {root}; chmod 700 {root}), or set "
                      "PERFDASH_SPOOL_DIR to such a directory")


def untrusted_reason(entry: Path) -> str | None:
    """Why an entry may not be posted (its directory or a file in it: not this user's, writable by others, not a
    plain file or directory), or None."""
    uid = os.geteuid()
    for path in (entry, *sorted(entry.iterdir())):
        st = os.lstat(path)
        kind_ok = stat.S_ISDIR(st.st_mode) if path == entry else stat.S_ISREG(st.st_mode)
        if not kind_ok:
            return f"{path.name} is not a plain {'directory' if path == entry else 'file'}"
        if st.st_uid != uid:
            return f"{path.name} is owned by uid {st.st_uid}, not by this user (uid {uid})"
        if _writable_by_others(st):
            return f"{path.name} has mode {_mode(st)}: writable by others"
    return None


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def save(root: Path, upload: Upload, *, server_errors: int = 0, last_error: str = "") -> Path:
    """Keep an upload for later. Raises OSError (with the partial directory removed) when the spool cannot be
    written, SpoolUnsafe when it is not private."""
    root = private_root(root)
    target = root / f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    partial = target.with_name(target.name + _PARTIAL)
    try:
        partial.mkdir(mode=0o700)
        for name, data in upload.files.items():
            _write(partial / Path(name).name, data)
        _write(partial / FORM, json.dumps(dict(upload.form)).encode())
        _write_state(partial, server_errors, last_error)
        partial.rename(target)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return target


def _write_state(entry: Path, server_errors: int, last_error: str) -> None:
    state = {"server_errors": server_errors, "last_error": last_error, "updated": _now()}
    fresh = entry / (STATE + ".new")
    with contextlib.suppress(FileNotFoundError):
        fresh.unlink()
    _write(fresh, json.dumps(state).encode())
    fresh.replace(entry / STATE)


def entries(root: Path) -> list[Path]:
    """Complete entries, oldest first (the service then sees nights in order). Reads the private spool of
    ``root`` (:func:`private_root`); raises SpoolUnsafe when there is none."""
    if not os.path.lexists(root):
        return []
    root = private_root(root)
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and p.name not in _ASIDE
                  and not p.name.endswith(_PARTIAL) and (p / FORM).exists())


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


def reject(entry: Path, reason: str, status: int | None, folder: str = REJECTED) -> Path:
    """Move a refused upload aside (``<root>/rejected/<entry>``; an untrusted one to ``untrusted/``) with why, so
    it is neither retried nor lost."""
    target = entry.parent / folder / entry.name
    target.parent.mkdir(mode=0o700, exist_ok=True)
    shutil.move(str(entry), target)
    # written after the move: an untrusted entry's directory may not be ours to write in
    with contextlib.suppress(OSError):
        _write(target.parent / f"{entry.name}.{REASON}" if folder == UNTRUSTED else target / REASON,
               json.dumps({"status": status, "reason": reason, "rejected": _now()}).encode())
    return target


@contextlib.contextmanager
def drain_lock(root: Path) -> Iterator[bool]:
    """Whether this process may post the spool now. Several cells on one node share the spool volume: one of them
    drains it, the others leave it (flock works across containers on one host)."""
    try:
        fd = os.open(private_root(root) / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except SpoolUnsafe:
        raise
    except OSError:
        # An unwritable spool can still be read and posted; nothing else can write to it either.
        yield True
        return
    with os.fdopen(fd, "r+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
