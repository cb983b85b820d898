"""TLS end to end on loopback, without containers (issue 29): `perfdash serve` with a certificate from a throwaway CA
(PERFDASH_TLS_CERT_FILE / PERFDASH_TLS_KEY_FILE), `perfdash ingest --url https://...` trusting that CA
(--ca-bundle, PERFDASH_CA_BUNDLE), and a client that does not trust it refusing to send its token."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "service" / "data" / "pytorch_run"
TOKEN = "tls-ingest-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PERFDASH_", "DATABASE_URL", "SSL_CERT"))}
    return {**env, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "bisect")]), **extra}


@pytest.fixture
def tls_service(throwaway_ca: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port = _free_port()
    database = f"sqlite:///{tmp_path / 'service.db'}"
    env = _env(DATABASE_URL=database, PERFDASH_INGEST_TOKENS=TOKEN,
               PERFDASH_TLS_CERT_FILE=str(throwaway_ca / "server.pem"),
               PERFDASH_TLS_KEY_FILE=str(throwaway_ca / "server.key"))
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen([sys.executable, "-m", "perfdash.cli", "serve", "--host", "127.0.0.1", "--port",
                                str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if httpx.get(url + "/healthz/live", verify=str(throwaway_ca / "ca.pem"), timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.3)
        yield url, throwaway_ca / "ca.pem"
    finally:
        process.terminate()
        process.wait(20)
        log.close()


def _ingest(url: str, tmp_path: Path, *extra: str, **env: str) -> subprocess.CompletedProcess:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    return subprocess.run([sys.executable, "-m", "perfdash.cli", "ingest", str(DATA), "--url", url, "--token-file",
                           str(token), "--machine", "TLS Xeon", "--timestamp", "2026-05-01T01:00:00+00:00",
                           "--retries", "1", *extra], capture_output=True, text=True, timeout=180,
                          env=_env(PERFDASH_SPOOL_DIR=str(tmp_path / "spool"), **env))


def test_an_ingest_over_tls_with_a_private_ca(tls_service, tmp_path: Path) -> None:
    url, ca = tls_service
    # without the CA the certificate is not trusted: nothing is sent, nothing spooled (no outage), said so, exit 5
    untrusted = _ingest(url, tmp_path, "--retries", "4")
    assert untrusted.returncode == 5, untrusted.stderr
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr and "Traceback" not in untrusted.stderr
    assert "certificate did not verify" in untrusted.stderr and "not spooled" in untrusted.stderr
    assert untrusted.stderr.count("NOT POSTED") == 1 and "retrying" not in untrusted.stderr
    assert not list((tmp_path / "spool").rglob("*.csv"))
    # trusting the CA: posted
    trusted = _ingest(url, tmp_path, "--ca-bundle", str(ca))
    assert trusted.returncode == 0, trusted.stderr
    assert "stored" in trusted.stdout
    by_env = _ingest(url, tmp_path, PERFDASH_CA_BUNDLE=str(ca))
    assert by_env.returncode == 0 and "already stored" in by_env.stdout, by_env.stderr
    runs = httpx.get(url + "/api/v1/runs", verify=str(ca), timeout=10).json()
    assert len(runs) == 1 and runs[0]["host"] is not None
    # and the service speaks nothing but TLS on that port
    with pytest.raises(httpx.HTTPError):
        httpx.get(url.replace("https://", "http://") + "/healthz/live", timeout=5)


def test_serve_refuses_half_a_tls_configuration(throwaway_ca: Path, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "perfdash.cli", "serve", "--port", str(_free_port())],
                          env=_env(DATABASE_URL=f"sqlite:///{tmp_path / 'p.db'}",
                                   PERFDASH_TLS_CERT_FILE=str(throwaway_ca / "server.pem")),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "needs both PERFDASH_TLS_CERT_FILE and PERFDASH_TLS_KEY_FILE" in done.stderr
    assert "Traceback" not in done.stderr
