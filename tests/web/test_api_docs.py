"""The API's documentation where it is served: /docs (Swagger UI) and /redoc render in Chromium from the service's own
files, under their own Content-Security-Policy, with no request leaving 127.0.0.1 (the `page` fixture fails the
test on any console error, and a blocked script or style is one)."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
from playwright.sync_api import Page, expect


def _hosts_seen(page: Page) -> list[str]:
    hosts: list[str] = []
    # a blob: URL (ReDoc's search worker) is made by the page itself: its host is the page's
    page.on("request", lambda r: hosts.append(urlsplit(r.url.removeprefix("blob:")).hostname or r.url))
    return hosts


def test_swagger_ui_renders_the_operations_offline(empty, page: Page) -> None:
    hosts = _hosts_seen(page)
    page.goto(empty.url + "/docs")
    listed = page.get_by_role("button", name="GET /api/v1/runs List runs, newest first")
    expect(listed).to_be_visible(timeout=30_000)
    expect(page.get_by_role("heading", name="runs", exact=False).first).to_be_visible()
    listed.click()  # an operation opens with its parameters
    expect(page.locator(".opblock.is-open .parameters-container").first).to_be_visible()
    assert hosts and set(hosts) == {"127.0.0.1"}, hosts


def test_redoc_renders_the_operations_offline(empty, page: Page) -> None:
    hosts = _hosts_seen(page)
    page.goto(empty.url + "/redoc")
    expect(page.get_by_role("heading", name="List runs, newest first")).to_be_visible(timeout=30_000)
    expect(page.get_by_role("heading", name="perfdash", exact=False).first).to_be_visible()
    assert hosts and set(hosts) == {"127.0.0.1"}, hosts


def test_each_docs_page_has_its_own_policy_and_loads_only_the_service(empty) -> None:
    dashboard = httpx.get(empty.url + "/runs").headers["content-security-policy"]
    for path in ("/docs", "/redoc"):
        answer = httpx.get(empty.url + path)
        assert answer.status_code == 200
        policy = answer.headers["content-security-policy"]
        assert policy != dashboard and "default-src 'none'" in policy and "script-src 'self';" in policy
        assert "http" not in policy and "unsafe-eval" not in policy
        assert "cdn" not in answer.text and "https://" not in answer.text
