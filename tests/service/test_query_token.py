"""A token in the URL (`?token=`) is refused with a 400 that says to use the header, and never lands in the access
log: `perfdash serve` as it runs, its log read back."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from service.api.query_token import masked_query

REPO = Path(__file__).resolve().parents[2]
TOKEN = "query-string-token-0123456789"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_mask() -> None:
    assert masked_query(b"suite=timm_models&limit=5") is None
    assert masked_query(b"suite=x&TOKEN=abc&Access_Token=d%20e") == b"suite=x&TOKEN=***&Access_Token=***"


def test_a_token_in_the_query_string_is_refused_and_not_logged(tmp_path: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PERFDASH_", "DATABASE_URL"))}
    env.update(PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "bisect")]),
               DATABASE_URL=f"sqlite:///{tmp_path / 'service.db'}",
               PERFDASH_TOKENS=f'[{{"name": "admin", "scopes": ["admin"], "token": "{TOKEN}"}}]')
    log_path = tmp_path / "server.log"
    url = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "perfdash.cli", "serve", "--host", "127.0.0.1", "--port",
                                    str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 90
            while True:
                assert process.poll() is None, log_path.read_text()
                try:
                    if httpx.get(url + "/healthz/live", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    assert time.monotonic() < deadline, log_path.read_text()
                    time.sleep(0.3)
            for path, params in (("/api/v1/audit", {"token": TOKEN}), ("/api/v1/runs", {"access_token": TOKEN}),
                                 ("/runs", {"suite": "timm_models", "token": TOKEN})):
                response = httpx.get(url + path, params=params)
                assert response.status_code == 400, response.text
                assert "Authorization: Bearer" in response.json()["detail"] and TOKEN not in response.text
            # the header still works
            assert httpx.get(url + "/api/v1/audit", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
            assert httpx.delete(url + "/api/v1/runs/7", params={"token": TOKEN}).status_code == 400
        finally:
            process.terminate()
            process.wait(20)
    text = log_path.read_text()
    # the request line is there (perfdash's own, service/request_log.py: the path, never the query string)
    assert '"message": "GET /api/v1/audit 400 ' in text, text
    assert TOKEN not in text
