"""Posting result files to a perfdash service: retried with tenacity, spooled to a directory when the service stays
unreachable, and the spool retried first on the next invocation (DESIGN.md: "spooled + retried")."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

SPOOL_FORM = "form.json"
REJECTED = "rejected"


class Rejected(Exception):
    """The service refused the upload (4xx): retrying will not help."""

    def __init__(self, status: int, detail: object) -> None:
        self.status = status
        self.detail = detail
        super().__init__(f"HTTP {status}: {detail}")


@dataclass(frozen=True, slots=True)
class Upload:
    """One multipart upload: the files of one results directory and the metadata form fields."""

    files: Mapping[str, bytes]
    form: Mapping[str, str]


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, httpx.TransportError):
        return True
    return isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code >= 500


def post_upload(url: str, token: str, upload: Upload, *, attempts: int = 4, wait_max_s: float = 8.0,
                timeout_s: float = 60.0) -> dict:
    """POST to ``{url}/api/v1/runs``; retries connection errors and 5xx; raises :class:`Rejected` on 4xx."""

    @retry(retry=retry_if_exception(_transient), stop=stop_after_attempt(attempts),
           wait=wait_exponential(multiplier=0.5, max=wait_max_s), reraise=True)
    def attempt() -> dict:
        files = [("files", (name, data, "application/octet-stream")) for name, data in sorted(upload.files.items())]
        response = httpx.post(url.rstrip("/") + "/api/v1/runs", files=files, data=dict(upload.form),
                              headers={"Authorization": f"Bearer {token}"}, timeout=timeout_s)
        if 400 <= response.status_code < 500:
            try:
                detail = response.json().get("detail")
            except ValueError:
                detail = response.text
            raise Rejected(response.status_code, detail)
        response.raise_for_status()
        return response.json()

    return attempt()


def spool(spool_dir: Path, upload: Upload) -> Path:
    """Keep an upload for later: a directory with the files and the form fields."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    target = spool_dir / f"{stamp}-{uuid.uuid4().hex[:8]}"
    partial = target.with_name(target.name + ".partial")
    partial.mkdir(parents=True)
    for name, data in upload.files.items():
        (partial / Path(name).name).write_bytes(data)
    (partial / SPOOL_FORM).write_text(json.dumps(dict(upload.form)), encoding="utf-8")
    partial.rename(target)  # complete or absent: a crash mid-write never leaves a half upload to retry
    return target


def spooled(spool_dir: Path) -> list[Path]:
    if not spool_dir.is_dir():
        return []
    return sorted(p for p in spool_dir.iterdir() if p.is_dir() and (p / SPOOL_FORM).exists()
                  and not p.name.endswith(".partial") and p.name != REJECTED)


def load_spooled(entry: Path) -> Upload:
    form = json.loads((entry / SPOOL_FORM).read_text(encoding="utf-8"))
    files = {p.name: p.read_bytes() for p in sorted(entry.iterdir()) if p.name != SPOOL_FORM}
    return Upload(files=files, form=form)


def reject_spooled(entry: Path) -> Path:
    """Move an upload the service refused aside, so it is not retried forever but not lost either."""
    target = entry.parent / REJECTED / entry.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(entry), target)
    return target
