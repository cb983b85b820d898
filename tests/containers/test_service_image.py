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
