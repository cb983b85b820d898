"""The GitHub client against the stand-in server: requests, retries, rate limits, and the token kept secret."""

from __future__ import annotations

import logging

import pytest
from pydantic import SecretStr

from service.github.client import GitHubClient, GitHubConfig, GitHubError

TOKEN = "ghp_secretTOKEN1234567890"


def _client(github, sleeps: list[float] | None = None, **kwargs) -> GitHubClient:
    config = GitHubConfig(api_url=github.url, token=SecretStr(TOKEN), repository="pytorch/pytorch")
    recorded = sleeps if sleeps is not None else []
    return GitHubClient(config, sleep=recorded.append, clock=lambda: 1_000_000.0, **kwargs)


def test_create_issue_and_comment(github) -> None:
    with _client(github) as client:
        issue = client.create_issue("speedup regression", "body <!-- perfdash:x -->", labels=["perfdash"])
        comment = client.create_comment(issue.number, "culprit: abc")
    assert issue.number == 1 and issue.html_url.endswith("/pytorch/pytorch/issues/1")
    assert comment.id >= 1000
    first, second = github.writes()
    assert (first.method, first.path) == ("POST", "/repos/pytorch/pytorch/issues")
    assert first.body == {"title": "speedup regression", "body": "body <!-- perfdash:x -->", "labels": ["perfdash"]}
    assert second.path == "/repos/pytorch/pytorch/issues/1/comments"
    assert first.headers["Authorization"] == f"Bearer {TOKEN}"
    assert first.headers["X-GitHub-Api-Version"] == "2022-11-28"


def test_find_by_marker(github) -> None:
    with _client(github) as client:
        issue = client.create_issue("a", "no marker", labels=["perfdash"])
        client.create_issue("b", "has <!-- perfdash:cp:7 -->", labels=["perfdash"])
        client.create_issue("c", "has <!-- perfdash:cp:7 --> but another label", labels=["other"])
        client.create_comment(issue.number, "first")
        client.create_comment(issue.number, "report <!-- perfdash:report:1 -->")
        found = client.find_issue("<!-- perfdash:cp:7 -->", label="perfdash")
        comment = client.find_comment(issue.number, "<!-- perfdash:report:1 -->")
        missing = client.find_comment(issue.number, "<!-- perfdash:report:2 -->")
    assert found is not None and found.number == 2
    assert comment is not None and "report" in comment.body
    assert missing is None


def test_update_comment(github) -> None:
    with _client(github) as client:
        issue = client.create_issue("t", "b")
        comment = client.create_comment(issue.number, "v1")
        client.update_comment(comment.id, "v2")
    assert github.state.comments[comment.id]["body"] == "v2"
    assert github.writes()[-1].method == "PATCH"


def test_retries_5xx_with_backoff(github) -> None:
    github.fail_next(github.canned(502), github.canned(503))
    sleeps: list[float] = []
    with _client(github, sleeps) as client:
        issue = client.create_issue("t", "b")
    assert issue.number == 1
    assert len(sleeps) == 2 and all(0 <= s <= 60 for s in sleeps)
    assert [r.method for r in github.state.requests] == ["POST", "POST", "POST"]


def test_honours_retry_after_on_rate_limit(github) -> None:
    github.fail_next(github.canned(403, {"Retry-After": "7"}, "You have exceeded a secondary rate limit"))
    sleeps: list[float] = []
    with _client(github, sleeps) as client:
        client.create_issue("t", "b")
    assert sleeps == [7.0]


def test_honours_x_ratelimit_reset(github) -> None:
    reset = str(1_000_000 + 42)  # the client's clock says 1,000,000
    github.fail_next(github.canned(403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset}, "API rate limit"))
    sleeps: list[float] = []
    with _client(github, sleeps) as client:
        client.create_issue("t", "b")
    assert sleeps == [42.0]


def test_wait_is_capped(github) -> None:
    github.fail_next(github.canned(429, {"Retry-After": "3600"}))
    sleeps: list[float] = []
    with _client(github, sleeps, max_wait_s=5) as client:
        client.create_issue("t", "b")
    assert sleeps == [5.0]


def test_permission_403_is_not_retried(github) -> None:
    github.fail_next(github.canned(403, message="Resource not accessible by integration"))
    sleeps: list[float] = []
    with _client(github, sleeps) as client, pytest.raises(GitHubError) as info:
        client.create_issue("t", "b")
    assert info.value.status == 403 and sleeps == []
    assert len(github.state.requests) == 1


def test_gives_up_after_max_attempts(github) -> None:
    github.fail_next(*[github.canned(500) for _ in range(3)])
    with _client(github, max_attempts=3) as client, pytest.raises(GitHubError) as info:
        client.create_issue("t", "b")
    assert info.value.status == 500
    assert len(github.state.requests) == 3


def test_token_never_in_errors_or_logs(github, caplog) -> None:
    # GitHub echoing the token back (a proxy error page, say) must not leak it through our messages.
    github.fail_next(github.canned(502, message=f"bad gateway for Bearer {TOKEN}"),
                     github.canned(401, message=f"Bad credentials {TOKEN}"))
    caplog.set_level(logging.DEBUG)
    with _client(github) as client, pytest.raises(GitHubError) as info:
        client.create_issue("t", "b")
    assert TOKEN not in str(info.value) and "***" in str(info.value)
    assert TOKEN not in caplog.text
    assert "retrying" in caplog.text
    assert TOKEN not in repr(client.config)


def test_unreachable_server_is_a_github_error() -> None:
    config = GitHubConfig(api_url="http://127.0.0.1:9", token=SecretStr(TOKEN), repository="o/r")
    with GitHubClient(config, max_attempts=2, sleep=lambda _s: None) as client, pytest.raises(GitHubError) as info:
        client.create_issue("t", "b")
    assert info.value.status is None and TOKEN not in str(info.value)


def test_config_from_settings() -> None:
    from service.settings import Settings

    assert GitHubConfig.from_settings(Settings(github_token=None, github_repository="o/r", report_issue=1)) is None
    # no default repository or issue: both must be named
    assert GitHubConfig.from_settings(Settings(github_token=TOKEN, github_repository="o/r")) is None
    assert GitHubConfig.from_settings(Settings(github_token=TOKEN, report_issue=1)) is None
    config = GitHubConfig.from_settings(Settings(github_token=TOKEN, github_repository="o/r", report_issue=1,
                                                 github_api_url="http://127.0.0.1:1/"))
    assert config is not None and config.api_url == "http://127.0.0.1:1" and config.repository == "o/r"


def test_a_squatted_marker_is_never_adopted(github) -> None:
    # A marker's value can be predicted: someone else writes an issue and a report comment carrying perfdash's.
    marker = "<!-- perfdash:issue:changepoint:7 -->"
    squat = github.add_issue("looks like ours", body=f"{marker}\nplease post here", author="mallory")
    report = github.add_issue("nightly reports", author="a-maintainer")
    comment = github.add_comment(report, "<!-- perfdash:report:n:g -->\nnot a report", author="mallory")
    with _client(github) as client:
        assert client.find_issue(marker) is None
        assert client.find_comment(report, "<!-- perfdash:report:n:g -->") is None
        issue = client.ensure_issue(marker, "ours", f"{marker}\nthe regression")
        posted = client.ensure_comment(report, "<!-- perfdash:report:n:g -->", "<!-- perfdash:report:n:g -->\nv1")
        # and once they are ours, they are found again
        assert client.ensure_issue(marker, "ours", marker).number == issue.number
    assert issue.number not in (squat, report)
    assert github.state.issues[issue.number]["user"]["login"] == "perfdash-bot"
    assert posted.id != comment and github.state.comments[comment]["body"].endswith("not a report")
    assert [w.method for w in github.writes()] == ["POST", "POST"]  # nothing of mallory's edited


def test_the_bot_login_is_asked_once_or_configured(github) -> None:
    github.state.logins[TOKEN] = "perfdash-app[bot]"
    github.add_issue("x", body="<!-- m1 -->", author="perfdash-app[bot]")
    github.add_issue("y", body="<!-- m2 -->", author="PERFDASH-APP[bot]")  # logins ignore case
    with _client(github) as client:
        assert client.find_issue("<!-- m1 -->") is not None and client.find_issue("<!-- m2 -->") is not None
    assert [r.path for r in github.state.requests].count("/user") == 1
    github.state.requests.clear()
    config = GitHubConfig(api_url=github.url, token=SecretStr(TOKEN), repository="o/r", bot_login="someone-else")
    with GitHubClient(config, sleep=lambda _s: None) as client:
        assert client.find_issue("<!-- m1 -->") is None  # the setting wins; GitHub is not asked
    assert "/user" not in [r.path for r in github.state.requests]


def test_unknown_login_fails_loudly(github) -> None:
    github.add_issue("x", body="<!-- m1 -->", author="perfdash-bot")
    github.fail_next(github.canned(403, message="Resource not accessible by integration"))
    with _client(github) as client, pytest.raises(GitHubError, match="GITHUB_BOT_LOGIN"):
        client.ensure_issue("<!-- m1 -->", "t", "<!-- m1 -->")
    assert github.writes() == []
