"""A small GitHub REST client: issues and issue comments, with retries that honour GitHub's rate-limit headers.

Retries (tenacity) on transport errors, 5xx, 429, and 403 responses that are rate limits (``Retry-After`` or
``X-RateLimit-Remaining: 0``). The wait honours ``Retry-After`` (seconds) and ``X-RateLimit-Reset`` (epoch seconds),
capped by ``max_wait_s`` so a nightly job never sleeps for an hour; otherwise exponential backoff with jitter.

The token is sent only in the Authorization header; it never appears in log lines or exception messages (they carry
the method, the path and GitHub's own error message, with any echo of the token masked).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import SecretStr
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

logger = logging.getLogger(__name__)

API_VERSION = "2022-11-28"


class GitHubError(Exception):
    """A request GitHub refused or that kept failing; ``status`` is None for transport errors."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RetryableGitHubError(GitHubError):
    def __init__(self, message: str, status: int | None = None, wait_s: float | None = None) -> None:
        super().__init__(message, status)
        self.wait_s = wait_s  # what GitHub asked us to wait, when it said


@dataclass(frozen=True, slots=True)
class GitHubConfig:
    api_url: str
    token: SecretStr
    repository: str  # owner/name

    def __repr__(self) -> str:  # dataclass repr would be safe (SecretStr), but say so explicitly
        return f"GitHubConfig(api_url={self.api_url!r}, repository={self.repository!r}, token=***)"

    @classmethod
    def from_settings(cls, settings: Any) -> GitHubConfig | None:
        """None unless the settings name a token, a repository and the report issue (:func:`missing_settings`):
        there is no default repository or issue, so a deployment posts nowhere until it names its own."""
        if missing_settings(settings):
            return None
        token = settings.github_token
        return cls(api_url=settings.github_api_url.rstrip("/"), token=token, repository=settings.github_repository)


def missing_settings(settings: Any) -> list[str]:
    """The GitHub settings posting needs and ``settings`` lack, by their environment names."""
    token = settings.github_token
    needed = {"GITHUB_TOKEN": token is not None and bool(token.get_secret_value()),
              "GITHUB_REPOSITORY": bool(settings.github_repository),
              "PERFDASH_REPORT_ISSUE": settings.report_issue is not None}
    return [name for name, present in needed.items() if not present]


def refusal(settings: Any) -> str:
    """Why nothing is posted, in one line."""
    return (f"not posting to GitHub: {', '.join(missing_settings(settings))} not set (there is no default repository "
            "or issue: name this deployment's own, GITHUB_REPOSITORY=owner/name and PERFDASH_REPORT_ISSUE=number)")


@dataclass(frozen=True, slots=True)
class IssueRef:
    number: int
    html_url: str


@dataclass(frozen=True, slots=True)
class CommentRef:
    id: int
    html_url: str
    body: str = ""


def _rate_limit_wait(response: httpx.Response, now: float) -> float | None:
    retry_after = response.headers.get("Retry-After")
    if retry_after is not None:
        try:
            return max(0.0, float(retry_after))
        except ValueError:
            return None
    reset = response.headers.get("X-RateLimit-Reset")
    if reset is not None and response.headers.get("X-RateLimit-Remaining", "0") == "0":
        try:
            return max(0.0, float(reset) - now)
        except ValueError:
            return None
    return None


class GitHubClient:
    """Issues and comments of one repository. Use as a context manager (it owns an httpx.Client)."""

    def __init__(self, config: GitHubConfig, *, max_attempts: int = 5, max_wait_s: float = 60.0,
                 timeout_s: float = 30.0, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self._max_attempts = max_attempts
        self._max_wait_s = max_wait_s
        self._sleep = sleep
        self._clock = clock
        self._http = httpx.Client(
            base_url=config.api_url,
            timeout=timeout_s,
            headers={
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": "perfdash",
                "Authorization": f"Bearer {config.token.get_secret_value()}",
            },
        )

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ---------------------------------------------------------------------------------------------------------------
    # Requests

    def _mask(self, text: str) -> str:
        secret = self.config.token.get_secret_value()
        return text.replace(secret, "***") if secret else text

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        asked = exc.wait_s if isinstance(exc, RetryableGitHubError) else None
        backoff = wait_random_exponential(multiplier=1, max=self._max_wait_s)(state)
        return min(self._max_wait_s, asked) if asked is not None else backoff

    def _once(self, method: str, path: str, json: Mapping[str, Any] | None,
              params: Mapping[str, Any] | None) -> httpx.Response:
        try:
            response = self._http.request(method, path, json=json, params=params)
        except httpx.TransportError as exc:
            raise RetryableGitHubError(f"{method} {path}: {type(exc).__name__}: {self._mask(str(exc))}") from None
        status = response.status_code
        if response.is_success:
            return response
        message = self._mask(_error_message(response))
        text = f"{method} {path}: HTTP {status}: {message}"
        wait = _rate_limit_wait(response, self._clock())
        rate_limited = status == 429 or (status == 403 and (
            wait is not None or response.headers.get("X-RateLimit-Remaining") == "0"
            or "rate limit" in message.lower()))
        if status >= 500 or rate_limited:
            raise RetryableGitHubError(text, status, wait)
        raise GitHubError(text, status)

    def request(self, method: str, path: str, *, json: Mapping[str, Any] | None = None,
                params: Mapping[str, Any] | None = None) -> Any:
        retrying = Retrying(
            retry=retry_if_exception_type(RetryableGitHubError),
            stop=stop_after_attempt(self._max_attempts),
            wait=self._wait,
            sleep=self._sleep,
            reraise=True,
            before_sleep=lambda s: logger.warning("GitHub %s %s failed (attempt %d), retrying: %s", method, path,
                                                  s.attempt_number, s.outcome.exception() if s.outcome else ""),
        )
        response = retrying(self._once, method, path, json, params)
        return response.json() if response.content else None

    # ---------------------------------------------------------------------------------------------------------------
    # Issues and comments

    @property
    def _repo(self) -> str:
        return f"/repos/{self.config.repository}"

    def _retrying_wait(self, attempt: int, exc: RetryableGitHubError) -> None:
        backoff = min(self._max_wait_s, 2.0 ** (attempt - 1))
        self._sleep(min(self._max_wait_s, exc.wait_s) if exc.wait_s is not None else backoff)

    def ensure_issue(self, marker: str, title: str, body: str, labels: list[str] | None = None) -> IssueRef:
        """The issue whose body holds ``marker``, created if there is none: never two.

        A POST that failed may still have created the issue (GitHub answered 502 after creating it, or the answer
        was lost), so the POST is never retried blindly: before every create and after every failed one the issue
        is looked up by its marker, and only a lookup that finds nothing leads to a POST. The lookup does not
        filter by label (GitHub drops labels silently for a token that may not label)."""
        last: GitHubError | None = None
        for attempt in range(1, self._max_attempts + 1):
            found = self.find_issue(marker)
            if found is not None:
                return found
            try:
                data = self._once("POST", f"{self._repo}/issues",
                                  {"title": title, "body": body, "labels": labels or []}, None).json()
                return IssueRef(number=int(data["number"]), html_url=str(data.get("html_url", "")))
            except RetryableGitHubError as exc:
                last = exc
                logger.warning("GitHub issue %s not created (attempt %d), looking for it before retrying: %s",
                               marker, attempt, exc)
                if attempt < self._max_attempts:
                    self._retrying_wait(attempt, exc)
            except GitHubError as exc:
                last = exc
                break
        found = self.find_issue(marker)  # after the last failed create, too
        if found is not None:
            return found
        assert last is not None
        raise last

    def ensure_comment(self, issue_number: int, marker: str, body: str) -> CommentRef:
        """The comment on ``issue_number`` whose body holds ``marker``, created if there is none (as ensure_issue:
        looked up before every create and after every failed one)."""
        last: GitHubError | None = None
        for attempt in range(1, self._max_attempts + 1):
            found = self.find_comment(issue_number, marker)
            if found is not None:
                return found
            try:
                data = self._once("POST", f"{self._repo}/issues/{issue_number}/comments", {"body": body},
                                  None).json()
                return CommentRef(id=int(data["id"]), html_url=str(data.get("html_url", "")), body=body)
            except RetryableGitHubError as exc:
                last = exc
                if attempt < self._max_attempts:
                    self._retrying_wait(attempt, exc)
            except GitHubError as exc:
                last = exc
                break
        found = self.find_comment(issue_number, marker)
        if found is not None:
            return found
        assert last is not None
        raise last

    def create_issue(self, title: str, body: str, labels: list[str] | None = None) -> IssueRef:
        data = self.request("POST", f"{self._repo}/issues", json={"title": title, "body": body,
                                                                  "labels": labels or []})
        return IssueRef(number=int(data["number"]), html_url=str(data.get("html_url", "")))

    def create_comment(self, issue_number: int, body: str) -> CommentRef:
        data = self.request("POST", f"{self._repo}/issues/{issue_number}/comments", json={"body": body})
        return CommentRef(id=int(data["id"]), html_url=str(data.get("html_url", "")), body=body)

    def update_comment(self, comment_id: int, body: str) -> CommentRef:
        data = self.request("PATCH", f"{self._repo}/issues/comments/{comment_id}", json={"body": body})
        return CommentRef(id=int(data["id"]), html_url=str(data.get("html_url", "")), body=body)

    def find_comment(self, issue_number: int, marker: str, max_pages: int = 10) -> CommentRef | None:
        """The comment whose body contains ``marker`` (a hidden HTML comment we put in every body), newest first."""
        for page in range(1, max_pages + 1):
            data = self.request("GET", f"{self._repo}/issues/{issue_number}/comments",
                                params={"per_page": 100, "page": page})
            for item in reversed(data or []):
                if marker in (item.get("body") or ""):
                    return CommentRef(id=int(item["id"]), html_url=str(item.get("html_url", "")), body=item["body"])
            if not data or len(data) < 100:
                return None
        return None

    def find_issue(self, marker: str, label: str | None = None, max_pages: int = 10) -> IssueRef | None:
        """An issue (open or closed; with ``label`` if given) whose body contains ``marker``, newest first: an issue
        an earlier attempt created is on the first page."""
        for page in range(1, max_pages + 1):
            params: dict[str, Any] = {"state": "all", "sort": "created", "direction": "desc", "per_page": 100,
                                      "page": page}
            if label:
                params["labels"] = label
            data = self.request("GET", f"{self._repo}/issues", params=params)
            for item in data or []:
                if marker in (item.get("body") or "") and "pull_request" not in item:
                    return IssueRef(number=int(item["number"]), html_url=str(item.get("html_url", "")))
            if not data or len(data) < 100:
                return None
        return None


def _error_message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:200]
    return str(data.get("message", data))[:200] if isinstance(data, dict) else str(data)[:200]
