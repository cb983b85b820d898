"""perfdash/http_retry.py, the one retry policy of every HTTP client: what is retried, how long it waits."""

from __future__ import annotations

import ssl
import urllib.error

import httpx
import pytest

from perfdash.http_retry import (
    CertificateError,
    RetryPolicy,
    Transient,
    is_certificate_error,
    retry_after,
    status_failure,
    transient_status,
    transport_failure,
)


def test_which_statuses_are_retried() -> None:
    assert [s for s in (400, 401, 403, 404, 408, 409, 422, 429, 500, 502, 503, 504) if transient_status(s)] == [
        408, 429, 500, 502, 503, 504]
    assert status_failure(404, "gone") is None
    failure = status_failure(429, "slow down", "3")
    assert isinstance(failure, Transient) and failure.retry_after_s == 3.0 and failure.status == 429


def test_retry_after_reads_seconds_and_dates() -> None:
    assert retry_after("7") == 7.0 and retry_after(None) is None and retry_after("soon") is None
    assert retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0


def test_a_certificate_failure_is_never_transient() -> None:
    cert = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    try:
        raise httpx.ConnectError("handshake") from cert
    except httpx.ConnectError as exc:
        wrapped = exc
    assert is_certificate_error(wrapped) and is_certificate_error(urllib.error.URLError(cert))
    assert isinstance(transport_failure(wrapped, "POST /x"), CertificateError)
    refused = transport_failure(httpx.ConnectError("Connection refused"), "POST /x")
    assert isinstance(refused, Transient) and "Connection refused" in str(refused)


def test_the_policy_retries_transient_only_and_honours_retry_after() -> None:
    sleeps: list[float] = []
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise Transient("503", 503, retry_after_s=2.0 if len(calls) == 1 else None)
        return "ok"

    policy = RetryPolicy(attempts=4, max_wait_s=5.0)
    assert policy.call(flaky, sleep=sleeps.append) == "ok"
    assert sleeps[0] == 2.0 and 0 <= sleeps[1] <= 5.0 and len(calls) == 3

    def refused() -> str:
        calls.append(1)
        raise CertificateError("no")

    calls.clear()
    with pytest.raises(CertificateError):
        policy.call(refused, sleep=sleeps.append)
    assert len(calls) == 1

    def down() -> str:
        raise Transient("down", retry_after_s=3600.0)

    sleeps.clear()
    with pytest.raises(Transient, match="down"):
        policy.call(down, sleep=sleeps.append)
    assert sleeps == [5.0, 5.0, 5.0]  # capped; the last failure re-raised as it was
