"""A small GitHub REST client: issues and issue comments, retried by perfdash's one policy (perfdash.http_retry).

Retried: transport errors, 5xx, 429, and 403 responses that are rate limits (``Retry-After`` or
``X-RateLimit-Remaining: 0``). The wait honours ``Retry-After`` (seconds) and ``X-RateLimit-Reset`` (epoch seconds),
capped by ``max_wait_s`` so a nightly job never sleeps for an hour; otherwise exponential backoff with jitter.

Issues and comments are found again by a hidden marker in their body, and a marker's value can be predicted (change
point ids count up, the report's scope key is the same every night): anyone may write it. So only what the bot's own
login wrote is ever adopted, edited or commented on (:meth:`GitHubClient.bot_login`: ``GITHUB_BOT_LOGIN``, else
``GET /user`` with the token, asked once per client).

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
from tenacity import RetryCallState

from perfdash.http_retry import CertificateError, RetryPolicy, Transient, transport_failure

logger = logging.getLogger(__name__)

API_VERSION = "2022-11-28"


class GitHubError(Exception):
    """A request GitHub refused or that kept failing; ``status`` is None for transport errors."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RetryableGitHubError(GitHubError, Transient):
    """A failure the policy retries; ``retry_after_s`` is what GitHub asked us to wait, when it said."""

    def __init__(self, message: str, status: int | None = None, wait_s: float | None = None) -> None:
        Transient.__init__(self, message, status, wait_s)


class _LookupFailed(Exception):
    """A marker lookup that failed after its own retries: ends an ensure_* loop instead of retrying it again."""

    def __init__(self, error: GitHubError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True, slots=True)
class GitHubConfig:
    api_url: str
    token: SecretStr
    repository: str  # owner/name
    bot_login: str | None = None  # whose issues and comments are ours; None: asked with GET /user

    def __repr__(self) -> str:  # dataclass repr would be safe (SecretStr), but say so explicitly
        return (f"GitHubConfig(api_url={self.api_url!r}, repository={self.repository!r}, "
                f"bot_login={self.bot_login!r}, token=***)")

    @classmethod
    def from_settings(cls, settings: Any) -> GitHubConfig | None:
        """None unless the settings name a token, a repository and the report issue (:func:`missing_settings`):
        there is no default repository or issue, so a deployment posts nowhere until it names its own."""
        if missing_settings(settings):
            return None
        token = settings.github_token
        return cls(api_url=settings.github_api_url.rstrip("/"), token=token, repository=settings.github_repository,
                   bot_login=getattr(settings, "github_bot_login", None) or None)


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


def _author(item: Mapping[str, Any]) -> str:
    user = item.get("user")
    return str(user.get("login") or "") if isinstance(user, Mapping) else ""


class GitHubClient:
    """Issues and comments of one repository. Use as a context manager (it owns an httpx.Client)."""

    def __init__(self, config: GitHubConfig, *, max_attempts: int = 5, max_wait_s: float = 60.0,
                 timeout_s: float = 30.0, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self._policy = RetryPolicy(attempts=max_attempts, max_wait_s=max_wait_s, multiplier=1.0)
        self._sleep = sleep
        self._clock = clock
        self._login: str | None = config.bot_login
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

    def _once(self, method: str, path: str, json: Mapping[str, Any] | None,
              params: Mapping[str, Any] | None) -> httpx.Response:
        try:
            response = self._http.request(method, path, json=json, params=params)
        except httpx.TransportError as exc:
            failure = transport_failure(exc, f"{method} {path}")
            if isinstance(failure, CertificateError):
                raise GitHubError(self._mask(str(failure))) from None
            raise RetryableGitHubError(self._mask(str(failure))) from None
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

    def _retrying(self, what: str, function: Callable[[], Any]) -> Any:
        def log(state: RetryCallState) -> None:
            logger.warning("GitHub %s failed (attempt %d), retrying: %s", what, state.attempt_number,
                           state.outcome.exception() if state.outcome else "")

        return self._policy.call(function, sleep=self._sleep, before_sleep=log)

    def request(self, method: str, path: str, *, json: Mapping[str, Any] | None = None,
                params: Mapping[str, Any] | None = None) -> Any:
        response = self._retrying(f"{method} {path}", lambda: self._once(method, path, json, params))
        return response.json() if response.content else None

    # ---------------------------------------------------------------------------------------------------------------
    # Whose is it

    def bot_login(self) -> str:
        """The login the token writes as: the configured ``GITHUB_BOT_LOGIN``, else GitHub's answer to ``GET /user``
        (asked once per client). A GitHub App's installation token cannot ask: it names its login in the setting."""
        if self._login is None:
            try:
                data = self.request("GET", "/user")
            except GitHubError as exc:
                kind = RetryableGitHubError if isinstance(exc, Transient) else GitHubError  # an outage stays one
                raise kind(f"cannot tell which login this token posts as ({exc}); set GITHUB_BOT_LOGIN to it (a "
                           "GitHub App: its bot login, e.g. name[bot])", exc.status) from None
            login = str((data or {}).get("login") or "")
            if not login:
                raise GitHubError("GET /user named no login; set GITHUB_BOT_LOGIN")
            self._login = login
        return self._login

    def is_ours(self, item: Mapping[str, Any]) -> bool:
        """Whether the bot wrote this issue or comment (GitHub logins ignore case)."""
        return _author(item).casefold() == self.bot_login().casefold()

    # ---------------------------------------------------------------------------------------------------------------
    # Issues and comments

    @property
    def _repo(self) -> str:
        return f"/repos/{self.config.repository}"

    def _ensure(self, what: str, find: Callable[[], Any], create: Callable[[], Any]) -> Any:
        """What ``find`` finds, else what ``create`` makes: never two.

        A POST that failed may still have created its issue or comment (GitHub answered 502 after creating it, or
        the answer was lost), so the POST is never retried blindly: the policy retries the whole attempt, lookup
        first, and once more after the last failed create. A lookup that fails (after its own retries) ends it."""

        def lookup() -> Any:
            try:
                return find()
            except GitHubError as exc:
                raise _LookupFailed(exc) from None

        def attempt() -> Any:
            found = lookup()
            return found if found is not None else create()

        try:
            return self._retrying(what, attempt)
        except _LookupFailed as exc:
            raise exc.error from None
        except GitHubError:
            found = find()  # after the last failed create, too
            if found is not None:
                return found
            raise

    def ensure_issue(self, marker: str, title: str, body: str, labels: list[str] | None = None) -> IssueRef:
        """The bot's issue whose body holds ``marker``, created if there is none. The lookup does not filter by
        label (GitHub drops labels silently for a token that may not label); an issue by another login is never
        adopted, whatever marker it carries."""
        def create() -> IssueRef:
            data = self._once("POST", f"{self._repo}/issues", {"title": title, "body": body, "labels": labels or []},
                              None).json()
            return IssueRef(number=int(data["number"]), html_url=str(data.get("html_url", "")))

        return self._ensure(f"issue {marker}", lambda: self.find_issue(marker), create)

    def ensure_comment(self, issue_number: int, marker: str, body: str,
                       skip: frozenset[int] = frozenset()) -> CommentRef:
        """The bot's comment on ``issue_number`` whose body holds ``marker`` (not one of ``skip``), created if there
        is none (as ensure_issue)."""
        def create() -> CommentRef:
            data = self._once("POST", f"{self._repo}/issues/{issue_number}/comments", {"body": body}, None).json()
            return CommentRef(id=int(data["id"]), html_url=str(data.get("html_url", "")), body=body)

        return self._ensure(f"comment {marker} on issue {issue_number}",
                            lambda: self.find_comment(issue_number, marker, skip=skip), create)

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

    def find_comment(self, issue_number: int, marker: str, max_pages: int = 10,
                     skip: frozenset[int] = frozenset()) -> CommentRef | None:
        """The bot's comment whose body contains ``marker`` (a hidden HTML comment we put in every body), newest
        first; comments by anyone else are not looked at."""
        for page in range(1, max_pages + 1):
            data = self.request("GET", f"{self._repo}/issues/{issue_number}/comments",
                                params={"per_page": 100, "page": page})
            for item in reversed(data or []):
                if (marker in (item.get("body") or "") and int(item["id"]) not in skip and self.is_ours(item)):
                    return CommentRef(id=int(item["id"]), html_url=str(item.get("html_url", "")), body=item["body"])
            if not data or len(data) < 100:
                return None
        return None

    def find_issue(self, marker: str, label: str | None = None, max_pages: int = 10) -> IssueRef | None:
        """The bot's issue (open or closed; with ``label`` if given) whose body contains ``marker``, newest first: an
        issue an earlier attempt created is on the first page. Issues by anyone else are not looked at."""
        for page in range(1, max_pages + 1):
            params: dict[str, Any] = {"state": "all", "sort": "created", "direction": "desc", "per_page": 100,
                                      "page": page}
            if label:
                params["labels"] = label
            params["creator"] = self.bot_login()  # fewer pages; the author is checked below all the same
            data = self.request("GET", f"{self._repo}/issues", params=params)
            for item in data or []:
                if marker in (item.get("body") or "") and "pull_request" not in item and self.is_ours(item):
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
