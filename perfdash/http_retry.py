"""The one retry policy of every HTTP client perfdash runs: the upload client (perfdash.upload), the GitHub client
(service.github.client), the torch index (perfdash.torch_spec) and the bisect tool's service client
(perfbisect.service).

What is retried: connection errors and timeouts, 5xx, 429 and 408 (a request timeout: the server gave up waiting,
the same body will do later). Never another 4xx (the same request gets the same answer), and never a TLS certificate
failure: a certificate that does not verify is a wrong URL, a wrong CA bundle or an interception, which no number of
retries fixes and which must not look like an outage (a caller that spools on an outage would keep the upload and
exit "try later" for ever).

How long: the server's own ``Retry-After`` (seconds or an HTTP date; the GitHub client adds its rate-limit reset)
when it says, capped at ``max_wait_s`` so a nightly job never sleeps for an hour; otherwise exponential backoff with
jitter up to the same cap.

A client says what happened by raising :class:`Transient` (retried) or anything else (not retried);
:func:`transport_failure` turns a transport exception into the one or the other. Standard library and tenacity only:
``python -m perfdash.torch_spec resolve`` runs it where nothing else of perfdash's dependencies is installed.
"""

from __future__ import annotations

import email.utils
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from typing import Any, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

T = TypeVar("T")


class Transient(Exception):
    """A failure the same request may not meet again: retried. ``retry_after_s`` is what the server asked for."""

    def __init__(self, message: str, status: int | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


class CertificateError(Exception):
    """The server's TLS certificate did not verify: never retried, never an outage."""


def transient_status(status: int) -> bool:
    """An HTTP status worth asking again for."""
    return status >= 500 or status in (408, 429)


def status_failure(status: int, text: str, retry_after_header: str | None = None) -> Transient | None:
    """The :class:`Transient` to raise for an HTTP error answer worth asking again for (with what its
    ``Retry-After`` asked), or None: the caller's own error, not retried."""
    return Transient(text, status, retry_after(retry_after_header)) if transient_status(status) else None


def is_certificate_error(exc: BaseException) -> bool:
    """Whether ``exc`` or anything in its cause chain is a failed certificate verification (httpx and urllib wrap
    ssl's error in their own)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return True
        reason = getattr(current, "reason", None)  # urllib.error.URLError keeps it here
        if isinstance(reason, ssl.SSLCertVerificationError):
            return True
        current = current.__cause__ or current.__context__
    return False


def transport_failure(exc: BaseException, what: str) -> Exception:
    """The exception to raise for a request that got no answer: a :class:`CertificateError` for a certificate that
    did not verify, else a :class:`Transient` (a refused connection, a reset, a timeout)."""
    text = f"{what}: {type(exc).__name__}: {exc}" if str(exc) else f"{what}: {type(exc).__name__}"
    if is_certificate_error(exc):
        return CertificateError(f"{text} (the server's TLS certificate did not verify: check the URL and the CA "
                                "bundle; not retried)")
    return Transient(text)


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delay-seconds or an HTTP date; None when absent or unreadable."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``attempts`` tries in all; waits as the module says."""

    attempts: int = 5
    max_wait_s: float = 30.0
    multiplier: float = 0.5

    def wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        asked = exc.retry_after_s if isinstance(exc, Transient) else None
        if asked is not None:
            return min(self.max_wait_s, asked)
        return float(wait_random_exponential(multiplier=self.multiplier, max=self.max_wait_s)(state))

    def retrying(self, *, sleep: Callable[[float], None] = time.sleep,
                 before_sleep: Callable[[RetryCallState], None] | None = None) -> Retrying:
        """A tenacity ``Retrying`` that retries :class:`Transient` and re-raises the last failure as it was."""
        return Retrying(retry=retry_if_exception_type(Transient), stop=stop_after_attempt(max(1, self.attempts)),
                        wait=self.wait, sleep=sleep, reraise=True, before_sleep=before_sleep)

    def call(self, function: Callable[..., T], *args: Any, sleep: Callable[[float], None] = time.sleep,
             before_sleep: Callable[[RetryCallState], None] | None = None, **kwargs: Any) -> T:
        return self.retrying(sleep=sleep, before_sleep=before_sleep)(function, *args, **kwargs)

