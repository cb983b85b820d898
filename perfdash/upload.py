"""Posting one upload (the result files of one directory plus form fields) to a perfdash service, and what the
answer means for it: stored; refused (retrying cannot help: set it aside); not taken now (keep it, retry later); or
the server's TLS certificate did not verify (nothing was sent: neither an outage nor the upload's fault, so it is not
kept for later either: the URL or the CA bundle is wrong, or someone is in between).

Retried as perfdash.http_retry says (every HTTP client's one policy). Needs only httpx and tenacity (in the runner and
the service extras): the runner images post with it and never import the service.
"""

from __future__ import annotations

import enum
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx

from perfdash.http_retry import (
    CertificateError,
    RetryPolicy,
    Transient,
    retry_after,
    transient_status,
    transport_failure,
)

# The service, or a proxy in front of it, is not taking uploads now: the same body will do later.
UNAVAILABLE_STATUSES = frozenset({408, 429, 502, 503, 504})
# The credential is refused, not the body: keep the upload for when the token is fixed.
UNAUTHORIZED_STATUSES = frozenset({401, 403})


class UploadVerdict(enum.StrEnum):
    STORED = "stored"
    UNAVAILABLE = "unavailable"  # connection error, timeout, 408/429/502/503/504
    SERVER_ERROR = "server error"  # another 5xx: maybe this body, maybe a passing fault; counted per body
    UNAUTHORIZED = "unauthorized"  # 401/403
    REFUSED = "refused"  # another 4xx, or a body that got SERVER_ERROR more than the allowed number of times
    CERTIFICATE = "certificate not trusted"  # the server's TLS certificate did not verify: nothing was sent


@dataclass(frozen=True, slots=True)
class Upload:
    """One multipart upload: the files of one results directory and the metadata form fields."""

    files: Mapping[str, bytes]
    form: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Answer:
    """What posting an upload came to. ``server_errors`` counts the non-gateway 5xx answers this body has had in
    all (earlier attempts included), which is what turns a repeated 500 into a refusal."""

    verdict: UploadVerdict
    detail: str
    status: int | None = None
    body: dict | None = None
    server_errors: int = 0
    retry_after_s: float | None = None  # what the server asked for (Retry-After)

    @property
    def retryable(self) -> bool:
        return self.verdict in (UploadVerdict.UNAVAILABLE, UploadVerdict.SERVER_ERROR)


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = response.text.strip()
    if isinstance(detail, dict):  # the service's contract errors: "error" names the file, line and column
        detail = detail.get("error") or detail.get("message") or detail
    text = " ".join(str(detail).split())[:1000]
    return f"HTTP {response.status_code}: {text or response.reason_phrase}"


def _post_once(url: str, token: str, upload: Upload, timeout_s: float, server_errors: int,
               max_server_errors: int, verify: ssl.SSLContext | bool) -> Answer:
    files = [("files", (name, data, "application/octet-stream")) for name, data in sorted(upload.files.items())]
    try:
        response = httpx.post(url.rstrip("/") + "/api/v1/runs", files=files, data=dict(upload.form),
                              headers={"Authorization": f"Bearer {token}"}, timeout=timeout_s, verify=verify)
    except httpx.TransportError as exc:
        failure = transport_failure(exc, "no answer")
        verdict = UploadVerdict.CERTIFICATE if isinstance(failure, CertificateError) else UploadVerdict.UNAVAILABLE
        return Answer(verdict, str(failure).removeprefix("no answer: "), server_errors=server_errors)
    status = response.status_code
    if status < 300:
        return Answer(UploadVerdict.STORED, f"HTTP {status}", status, response.json(), server_errors)
    if status in UNAVAILABLE_STATUSES:
        return Answer(UploadVerdict.UNAVAILABLE, _detail(response), status, server_errors=server_errors,
                      retry_after_s=retry_after(response.headers.get("Retry-After")))
    if status in UNAUTHORIZED_STATUSES:
        return Answer(UploadVerdict.UNAUTHORIZED, _detail(response), status, server_errors=server_errors)
    if transient_status(status):  # another 5xx: retried, and counted against this body
        count = server_errors + 1
        if count > max_server_errors:
            return Answer(UploadVerdict.REFUSED, f"{_detail(response)} ({count} server errors for this upload)", status,
                          server_errors=count)
        return Answer(UploadVerdict.SERVER_ERROR, _detail(response), status, server_errors=count)
    return Answer(UploadVerdict.REFUSED, _detail(response), status, server_errors=server_errors)


class _NotTaken(Transient):
    """An answer the policy retries (perfdash.http_retry), carried to the end of the attempts."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer.detail, answer.status, answer.retry_after_s)
        self.answer = answer


def post_upload(url: str, token: str, upload: Upload, *, attempts: int = 4, server_errors: int = 0,
                max_server_errors: int = 3, wait_max_s: float = 8.0, timeout_s: float = 60.0,
                verify: ssl.SSLContext | bool = True, sleep: Callable[[float], None] = time.sleep) -> Answer:
    """POST to ``{url}/api/v1/runs`` up to ``attempts`` times while the answer is retryable. ``server_errors``: how
    many calls for this body ended in a 5xx before (from the spool); this call counts one more if it does, and one
    more than ``max_server_errors`` makes it REFUSED."""

    def attempt() -> Answer:
        # A server error counts once per call, however many attempts it took: a few seconds of 500s (a restart, a
        # passing fault) spool the upload; only a body that fails call after call is refused.
        answer = _post_once(url, token, upload, timeout_s, server_errors, max_server_errors, verify)
        if answer.retryable:
            raise _NotTaken(answer)
        return answer

    policy = RetryPolicy(attempts=attempts, max_wait_s=wait_max_s, multiplier=0.5)
    try:
        return policy.call(attempt, sleep=sleep)
    except _NotTaken as last:
        return last.answer
