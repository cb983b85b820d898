"""A GitHub stand-in: an HTTP server on 127.0.0.1 that records every request and keeps issues and comments in memory.

It answers the REST endpoints perfdash uses (create/list issues, create/list/edit issue comments). ``fail_next``
queues responses to give instead of the real answer (a 502, a 403 rate limit with Retry-After or X-RateLimit-Reset),
so retries are tested against a real socket, not a mock; ``fail_after_next`` does the request first and then answers
the failure (GitHub created the issue, the answer was lost: a 502 from a proxy, a timeout). ``drop_labels`` makes
the stand-in ignore labels on create, as GitHub does silently for a token that cannot label.

Every issue and comment has an author (``user.login``): the login of the token that wrote it (``logins`` maps tokens
to logins; any other token is ``bot_login``), or the one a test names with ``add_issue``/``add_comment`` (a third
party writing perfdash's markers). ``GET /user`` answers the token's login; ``others_may_not_edit`` makes a PATCH of
someone else's comment a 403, as GitHub answers a token without write access to the repository.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class Canned:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=lambda: {"message": "stand-in failure"})
    applied: bool = False  # do the request, then answer this failure instead of the result
    method: str | None = None  # only for a request of this method (others pass by it)


@dataclass
class State:
    requests: list[Recorded] = field(default_factory=list)
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)  # id -> comment (with issue_number)
    failures: list[Canned] = field(default_factory=list)
    next_number: int = 1
    next_comment: int = 1000
    drop_labels: bool = False
    delay_s: float = 0.0  # each request answered this much later (a slow GitHub: posts that overlap)
    bot_login: str = "perfdash-bot"
    logins: dict[str, str] = field(default_factory=dict)  # token -> login
    others_may_not_edit: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


ISSUES = re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/issues$")
ISSUE_COMMENTS = re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/issues/(?P<number>\d+)/comments$")
COMMENT = re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/issues/comments/(?P<id>\d+)$")


def _handler(state: State, base: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:  # keep pytest output clean
            pass

        _silent = False

        def _reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            if self._silent:
                return
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _handle(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            if state.delay_s:
                time.sleep(state.delay_s)
            with state.lock:
                state.requests.append(Recorded(self.command, url.path, parse_qs(url.query), dict(self.headers), body))
                canned = next((c for c in state.failures if c.method in (None, self.command)), None)
                if canned is not None:
                    state.failures.remove(canned)
                if canned is not None and canned.applied:
                    self._silent = True
                    try:
                        self._route(url.path, parse_qs(url.query), body)
                    finally:
                        self._silent = False
                if canned is not None:
                    self._reply(canned.status, canned.body, canned.headers)
                    return
                self._route(url.path, parse_qs(url.query), body)

        def _login(self) -> str:
            token = self.headers.get("Authorization", "").removeprefix("Bearer ")
            return state.logins.get(token, state.bot_login)

        def _route(self, path: str, query: dict[str, list[str]], body: Any) -> None:
            if self.headers.get("Authorization", "") == "":
                self._reply(401, {"message": "Requires authentication"})
                return
            if path == "/user" and self.command == "GET":
                self._reply(200, {"login": self._login(), "id": 1})
            elif (m := ISSUES.match(path)) and self.command == "POST":
                number = state.next_number
                state.next_number += 1
                issue = {"number": number, "title": body["title"], "body": body.get("body", ""),
                         "labels": [] if state.drop_labels else [{"name": n} for n in body.get("labels", [])],
                         "state": "open", "user": {"login": self._login()},
                         "html_url": f"{base}/{m['repo']}/issues/{number}"}
                state.issues[number] = issue
                self._reply(201, issue)
            elif ISSUES.match(path) and self.command == "GET":
                label = (query.get("labels") or [""])[0]
                creator = (query.get("creator") or [""])[0]
                items = [i for i in state.issues.values()
                         if (not label or label in {lab["name"] for lab in i["labels"]})
                         and (not creator or i["user"]["login"].casefold() == creator.casefold())]
                if (query.get("direction") or [""])[0] == "desc":
                    items.reverse()
                self._reply(200, _page(items, query))
            elif (m := ISSUE_COMMENTS.match(path)) and self.command == "POST":
                number = int(m["number"])
                if number not in state.issues:
                    self._reply(404, {"message": "Not Found"})
                    return
                comment = {"id": state.next_comment, "body": body["body"], "issue_number": number,
                           "user": {"login": self._login()},
                           "html_url": f"{base}/{m['repo']}/issues/{number}#issuecomment-{state.next_comment}"}
                state.comments[state.next_comment] = comment
                state.next_comment += 1
                self._reply(201, comment)
            elif (m := ISSUE_COMMENTS.match(path)) and self.command == "GET":
                number = int(m["number"])
                self._reply(200, _page([c for c in state.comments.values() if c["issue_number"] == number], query))
            elif (m := COMMENT.match(path)) and self.command == "PATCH":
                comment = state.comments.get(int(m["id"]))
                if comment is None:
                    self._reply(404, {"message": "Not Found"})
                    return
                if state.others_may_not_edit and comment["user"]["login"] != self._login():
                    self._reply(403, {"message": "Resource not accessible by integration"})
                    return
                comment["body"] = body["body"]
                self._reply(200, comment)
            else:
                self._reply(404, {"message": "Not Found"})

        do_GET = do_POST = do_PATCH = _handle

    return Handler


def _page(items: list[dict[str, Any]], query: dict[str, list[str]]) -> list[dict[str, Any]]:
    per_page = int((query.get("per_page") or ["30"])[0])
    page = int((query.get("page") or ["1"])[0])
    return items[(page - 1) * per_page : page * per_page]


class GitHubStandIn:
    """``with GitHubStandIn() as gh: gh.url`` — the base URL to put in GITHUB_API_URL."""

    def __init__(self) -> None:
        self.state = State()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def __enter__(self) -> GitHubStandIn:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}"
        self._server.RequestHandlerClass = _handler(self.state, self.url)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # helpers for tests
    @staticmethod
    def canned(status: int, headers: dict[str, str] | None = None, message: str = "stand-in failure") -> Canned:
        return Canned(status, headers or {}, {"message": message})

    def fail_next(self, *canned: Canned) -> None:
        with self.state.lock:
            self.state.failures.extend(canned)

    def fail_after_next(self, *canned: Canned, method: str | None = None) -> None:
        """The next requests (of ``method``, if given) are done, and then answered with these failures (the answer
        lost on the way)."""
        with self.state.lock:
            self.state.failures.extend(Canned(c.status, c.headers, c.body, applied=True, method=method)
                                       for c in canned)

    def writes(self) -> list[Recorded]:
        return [r for r in self.state.requests if r.method in ("POST", "PATCH")]

    def add_issue(self, title: str = "perfdash nightly reports", body: str = "", author: str = "a-maintainer",
                  labels: tuple[str, ...] = ()) -> int:
        """An existing issue (the report tracking issue, or one a third party wrote), created without a request
        being recorded."""
        with self.state.lock:
            number = self.state.next_number
            self.state.next_number += 1
            self.state.issues[number] = {"number": number, "title": title, "body": body,
                                         "labels": [{"name": n} for n in labels], "state": "open",
                                         "user": {"login": author}, "html_url": f"{self.url}/o/r/issues/{number}"}
        return number

    def add_comment(self, issue_number: int, body: str, author: str = "someone-else") -> int:
        """A comment someone wrote on an issue, without a request being recorded."""
        with self.state.lock:
            comment_id = self.state.next_comment
            self.state.next_comment += 1
            self.state.comments[comment_id] = {"id": comment_id, "body": body, "issue_number": issue_number,
                                               "user": {"login": author},
                                               "html_url": f"{self.url}/o/r/issues/{issue_number}#{comment_id}"}
        return comment_id
