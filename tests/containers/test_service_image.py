"""docker/service.Dockerfile, built and run: migrations, readiness, a page, no torch, not root."""

from __future__ import annotations

import json
import urllib.request


def test_the_service_image_serves_the_dashboard(podman, service_container) -> None:
    with urllib.request.urlopen(f"{service_container.url}/healthz/ready", timeout=5) as response:
        assert response.status == 200
    with urllib.request.urlopen(f"{service_container.url}/", timeout=10) as response:
        page = response.read().decode()
        assert response.status == 200 and response.headers["Content-Type"].startswith("text/html")
    assert "<nav" in page and "perfdash" in page
    with urllib.request.urlopen(f"{service_container.url}/api/v1/runs", timeout=10) as response:
        assert isinstance(json.loads(response.read()), list)
    # The container's process is the unprivileged user of the Dockerfile, and the image has no torch.
    assert podman("exec", service_container.container, "id", "-u").stdout.strip() == "10001"
    no_torch = podman("run", "--rm", service_container.image, "python", "-c", "import torch", check=False)
    assert no_torch.returncode != 0 and "No module named 'torch'" in no_torch.stderr


def test_the_service_image_has_the_real_psycopg2_linked_to_debians_libpq(podman, service_container) -> None:
    # psycopg2 built from source in the image's build stage (docker/service.lock), not psycopg2-binary's wheel with
    # its own libpq bundled (psycopg2_binary.libs/)
    code = ("import importlib.metadata as m, psycopg2, psycopg2._psycopg as c; "
            "names = {d.metadata['Name'].lower() for d in m.distributions()}; "
            "print('psycopg2' in names, 'psycopg2-binary' in names, c.__file__, psycopg2.__libpq_version__)")
    found = podman("run", "--rm", service_container.image, "python", "-c", code).stdout.split()
    assert found[:2] == ["True", "False"], found
    linked = podman("run", "--rm", "--entrypoint", "ldd", service_container.image, found[2]).stdout
    libpq = next(line for line in linked.splitlines() if "libpq.so" in line)
    assert "/usr/lib/" in libpq or "/lib/x86_64-linux-gnu/" in libpq, libpq
    assert ".libs/" not in libpq, libpq
