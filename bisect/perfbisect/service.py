"""Client of the service's bisection requests (``/api/v1/bisections``): fetch one, post its result back.

Bisect talks to the service over HTTP only. Transient failures (connection errors, timeouts, 5xx, 429) are retried
by perfdash's one HTTP retry policy (perfdash.http_retry): a bisection that took hours must not lose its result to
one restart of the service. Another 4xx, or a certificate that does not verify, fails at once.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from perfbisect.pytorch import TorchTarget
from perfdash.axes import variant_disables_cudagraphs
from perfdash.bisection import Direction, parse_threads
from perfdash.http_retry import CertificateError, RetryPolicy, Transient, status_failure, transport_failure
from perfdash.metric_registry import Better, better_of


class ServiceError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class BisectionJob:
    id: int
    status: str
    good_commit: str
    bad_commit: str
    target: TorchTarget
    direction: Direction
    threshold_pct: float
    raw: dict[str, Any]
    series_noise_cv: float | None = None  # the series' own between-run noise (robust CV), when the service has one
    series_noise_runs: int = 0

    @classmethod
    def from_json(cls, data: dict[str, Any], models_file: Path | None = None) -> BisectionJob:
        try:
            metric = data["metric"]
            # an axis the request leaves empty keeps its default (perfdash.axes, through TorchTarget's fields)
            named = {name: data[name] for name in ("backend", "compile_mode", "device", "dtype", "mode")
                     if data.get(name)}
            target = TorchTarget(
                suite=data["suite"], model=data["model"], metric=metric, **named,
                threads=parse_threads(data.get("threads")), batch_size=data.get("batch_size") or None,
                dynamic_shapes="dynamic" in (data.get("variant") or ""),
                disable_cudagraphs=variant_disables_cudagraphs(str(data.get("variant") or "")),
                models_file=models_file)
            direction = Better(data["direction"]) if data.get("direction") else better_of(metric)
            noise = data.get("series_noise_cv")  # an older service sends none: the A/Bs learn the noise alone
            return cls(id=int(data["id"]), status=str(data.get("status", "pending")),
                       good_commit=str(data["good_commit"]), bad_commit=str(data["bad_commit"]), target=target,
                       direction=direction, threshold_pct=float(data.get("threshold_pct") or 5.0), raw=data,
                       series_noise_cv=None if noise is None else float(noise),
                       series_noise_runs=int(data.get("series_noise_runs") or 0) if noise is not None else 0)
        except (KeyError, TypeError, ValueError) as exc:
            raise ServiceError(f"malformed bisection request: {exc!r}") from None


class ServiceClient:
    def __init__(self, url: str, token: str | None, timeout: float = 30.0, attempts: int = 5,
                 transport: httpx.BaseTransport | None = None, verify: ssl.SSLContext | bool = True) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.Client(base_url=url.rstrip("/") + "/api/v1", headers=headers, timeout=timeout,
                                    transport=transport, verify=verify)
        self._policy = RetryPolicy(attempts=attempts, max_wait_s=30.0)

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        def once() -> Any:
            try:
                response = self._client.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                raise transport_failure(exc, f"{method} {path}") from None
            if response.is_success:
                return response.json()
            text = f"{method} {path}: HTTP {response.status_code}: {response.text[:300]}"
            raise status_failure(response.status_code, text, response.headers.get("Retry-After")) or ServiceError(text)

        try:
            return self._policy.call(once)
        except (Transient, CertificateError) as exc:
            raise ServiceError(str(exc)) from None

    def fetch(self, request_id: int, models_file: Path | None = None) -> BisectionJob:
        return BisectionJob.from_json(self._call("GET", f"/bisections/{request_id}"), models_file)

    def post_result(self, request_id: int, result: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", f"/bisections/{request_id}/result", json=result)
