"""TLS end to end between containers (issue 29): the service image serving HTTPS with a certificate of a throwaway
CA, mounted as compose mounts it (docker/compose.yaml: PERFDASH_TLS_CERT_FILE / PERFDASH_TLS_KEY_FILE under
/run/perfdash-tls, the key readable by the image's uid 10001 only), and an agent's container uploading with
`perfdash ingest --url https://...` that trusts the CA through PERFDASH_CA_BUNDLE. Without the bundle the upload
fails on the certificate, says so, and the service stores nothing.

The image is the service_container fixture's (built once per session, layers cached), on the same migrated Postgres.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "service" / "data" / "pytorch_run"
IMAGE_UID = 10001  # docker/service.Dockerfile's USER
MACHINE = "TLS container Xeon"  # this test's runs, apart from the other tests' on the same database


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _own_by_image_user(podman, path: Path) -> None:  # type: ignore[no-untyped-def]
    """The key as compose wants it: mode 0600, owned by the uid the service runs as (rootless podman maps that uid,
    so the chown goes through its user namespace)."""
    path.chmod(0o600)
    if os.geteuid() == 0:
        os.chown(path, IMAGE_UID, IMAGE_UID)
    else:
        podman("unshare", "chown", f"{IMAGE_UID}:{IMAGE_UID}", str(path))


def _runs(url: str, ca: Path) -> list[dict]:
    """This test's runs (the machine filter matches the fingerprint: a CPU run's is its CPU model)."""
    context = ssl.create_default_context(cafile=str(ca))
    query = urllib.parse.urlencode({"machine": MACHINE, "limit": 1000})
    with urllib.request.urlopen(f"{url}/api/v1/runs?{query}", timeout=10, context=context) as response:
        return json.loads(response.read())


@pytest.fixture
def tls_service(podman, service_container, throwaway_ca: Path,  # type: ignore[no-untyped-def]
                tmp_path: Path) -> Iterator[tuple[str, Path, str]]:
    tls = tmp_path / "tls"
    tls.mkdir(mode=0o755)
    tls.chmod(0o755)  # the mount point: the service's user must enter it
    shutil.copyfile(throwaway_ca / "server.pem", tls / "cert.pem")
    (tls / "cert.pem").chmod(0o644)
    shutil.copyfile(throwaway_ca / "server.key", tls / "key.pem")
    _own_by_image_user(podman, tls / "key.pem")
    port = _free_port()
    name = f"perfdash-service-tls-{port}"
    podman("run", "-d", "--name", name, "-v", f"{tls}:/run/perfdash-tls:ro",
           "-e", f"DATABASE_URL={service_container.database_url}",
           "-e", f"PERFDASH_INGEST_TOKENS={service_container.token}",
           "-e", "PERFDASH_TLS_CERT_FILE=/run/perfdash-tls/cert.pem",
           "-e", "PERFDASH_TLS_KEY_FILE=/run/perfdash-tls/key.pem",
           service_container.image, "perfdash", "serve", "--host", "127.0.0.1", "--port", str(port))
    url = f"https://127.0.0.1:{port}"
    try:
        _wait_ready(podman, name, url, throwaway_ca / "ca.pem")
        yield url, throwaway_ca / "ca.pem", name
    finally:
        podman("rm", "--force", name, check=False)


def _wait_ready(podman, name: str, url: str, ca: Path, seconds: float = 90) -> None:  # type: ignore[no-untyped-def]
    context = ssl.create_default_context(cafile=str(ca))
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz/ready", timeout=3, context=context) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            logs = podman("logs", name, check=False)
            raise AssertionError(f"{name} never served HTTPS:\n{logs.stdout[-3000:]}{logs.stderr[-3000:]}")
        time.sleep(0.5)


def _agent_ingest(podman, image: str, url: str, token_file: Path, ca: Path | None):  # type: ignore[no-untyped-def]
    """`perfdash ingest --url` in a container of the image, as an agent runs it: the results, the token file and
    (when given) the CA mounted read-only, the CA named by PERFDASH_CA_BUNDLE only."""
    mounts = ["-v", f"{DATA}:/results:ro", "-v", f"{token_file}:/run/secrets/perfdash_token:ro"]
    env = []
    if ca is not None:
        mounts += ["-v", f"{ca}:/run/perfdash-ca/ca.pem:ro"]
        env = ["-e", "PERFDASH_CA_BUNDLE=/run/perfdash-ca/ca.pem"]
    return podman("run", "--rm", *mounts, *env, image, "perfdash", "ingest", "/results", "--url", url,
                  "--token-file", "/run/secrets/perfdash_token", "--machine", MACHINE,
                  "--timestamp", "2026-05-01T01:00:00+00:00", "--retries", "1", check=False, timeout=300)


def test_an_agent_container_uploads_over_tls_to_the_service_container(podman, service_container, tls_service,
                                                                       tmp_path) -> None:
    url, ca, container = tls_service
    token_file = tmp_path / "token"
    token_file.write_text(service_container.token)
    token_file.chmod(0o644)  # a test token; the agent's uid must read it through the mount
    ca_copy = tmp_path / "ca.pem"
    shutil.copyfile(ca, ca_copy)
    ca_copy.chmod(0o644)
    assert _runs(url, ca) == []

    untrusted = _agent_ingest(podman, service_container.image, url, token_file, None)
    # a certificate that does not verify is no outage: its own exit status, nothing spooled
    assert untrusted.returncode == 5, untrusted.stdout + untrusted.stderr
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr and "Traceback" not in untrusted.stderr
    assert "not spooled" in untrusted.stderr
    assert _runs(url, ca) == []  # nothing reached the service

    trusted = _agent_ingest(podman, service_container.image, url, token_file, ca_copy)
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    assert "stored" in trusted.stdout
    runs = _runs(url, ca)
    assert len(runs) == 1 and runs[0]["started_at"].startswith("2026-05-01T01:00:00")

    # the port speaks TLS only, and the certificate is the mounted one (issued by the throwaway CA)
    with pytest.raises(OSError):
        urllib.request.urlopen(url.replace("https://", "http://") + "/healthz/live", timeout=5)
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(url + "/healthz/live", timeout=5, context=ssl.create_default_context())
    # the service runs as the image's user, which alone may read the key (mode 0600, its own)
    assert podman("exec", container, "id", "-u").stdout.strip() == str(IMAGE_UID)
    assert podman("exec", container, "stat", "-c", "%a %u", "/run/perfdash-tls/key.pem").stdout.split() == [
        "600", str(IMAGE_UID)]
