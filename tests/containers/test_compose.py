"""docker/compose.yaml brought up for real with podman-compose (issue 40, item 1), as an operator runs it.

The compose file is used as it ships; a second file (what an operator's override would hold) only points the secrets
and the certificate at this test's files, publishes the port on a free loopback port and names an env file of its
own, so nothing is written into docker/ and a developer's docker/perfdash.env is not read. The project has a name of
its own, so an operator's stack on the machine is left alone.

Up: Postgres (the official image, or the stand-in scripts/containers/postgres-image.sh builds where no registry
answers), the migration step, the service over TLS with a certificate of a throwaway CA. An agent's upload client
and a container of the CPU runner image each post a night of real result files over HTTPS; the pages and the API
answer; both health checks pass. `down` then `up` again: every run is still there (the named volume), and the
migration step finds nothing to do.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker" / "compose.yaml"
POSTGRES_IMAGE_SCRIPT = REPO / "scripts" / "containers" / "postgres-image.sh"
RUNS = (REPO / "tests" / "service" / "data" / "pytorch_run",
        REPO / "tests" / "contract" / "data" / "runner_py_statuses")
IMAGE_UID = 10001  # docker/service.Dockerfile's USER
TOKEN = "compose-ingest-token-0123456789"
MACHINE = "Compose Xeon"


def _compose_command() -> list[str]:
    """podman-compose from the venv (the dev extra) or the system (Debian's package)."""
    beside = Path(sys.executable).with_name("podman-compose")
    found = str(beside) if beside.exists() else shutil.which("podman-compose")
    assert found, "podman-compose is not installed: `make test` installs it (pyproject's dev extra)"
    return [found]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Stack:
    url: str
    ca: Path
    project: str
    files: tuple[Path, ...]
    env: dict[str, str]

    def compose(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [*_compose_command(), "-p", self.project, *(a for f in self.files for a in ("-f", str(f))), *args]
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"podman-compose {' '.join(args)}: exit {done.returncode}\n{done.stdout[-4000:]}\n"
                                 f"{done.stderr[-4000:]}")
        return done

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"  # podman-compose's container names

    def get(self, path: str) -> tuple[int, str, bytes]:
        context = ssl.create_default_context(cafile=str(self.ca))
        with urllib.request.urlopen(f"{self.url}{path}", timeout=15, context=context) as response:
            return response.status, response.headers["Content-Type"], response.read()

    def runs(self) -> list[dict]:
        return json.loads(self.get(f"/api/v1/runs?machine={MACHINE.replace(' ', '+')}&limit=100")[2])

    def wait_ready(self, podman, seconds: float = 180) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if self.get("/healthz/ready")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(1)
        logs = {s: podman("logs", self.container(s), check=False) for s in ("postgres", "migrate", "service")}
        raise AssertionError("the compose service never became ready:\n" + "\n".join(
            f"--- {s}\n{d.stdout[-2000:]}{d.stderr[-2000:]}" for s, d in logs.items()))


def _secret_files(directory: Path, password: str) -> dict[str, Path]:
    """The secrets docker/compose.yaml names, as an operator writes them (readable by the containers' users: the
    test's throwaway values only)."""
    directory.mkdir()
    values = {
        "postgres_password": password,
        "database_url": f"postgresql+psycopg2://perfdash:{password}@postgres:5432/perfdash",
        "perfdash_tokens": json.dumps([{"name": "compose-agent", "scopes": ["ingest"], "token": TOKEN}]),
        "github_token": "",
    }
    files = {}
    for name, value in values.items():
        path = directory / name
        path.write_text(value)
        path.chmod(0o644)
        files[name] = path
    return files


def _tls_directory(podman, ca: Path, directory: Path) -> Path:  # type: ignore[no-untyped-def]
    """cert.pem and key.pem as compose mounts them: the key 0600 and the service user's (uid 10001)."""
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    shutil.copyfile(ca / "server.pem", directory / "cert.pem")
    (directory / "cert.pem").chmod(0o644)
    key = directory / "key.pem"
    shutil.copyfile(ca / "server.key", key)
    key.chmod(0o600)
    if os.geteuid() == 0:
        os.chown(key, IMAGE_UID, IMAGE_UID)
    else:
        podman("unshare", "chown", f"{IMAGE_UID}:{IMAGE_UID}", str(key))
    return directory


def _override(directory: Path, secret_files: dict[str, Path], tls: Path, port: int) -> Path:
    env_file = directory / "perfdash.env"
    env_file.write_text("PERFDASH_DASHBOARD_URL=https://perfdash.compose.test\n")
    override = {
        "secrets": {name: {"file": str(path)} for name, path in secret_files.items()},
        "services": {"service": {
            "ports": _Override([f"127.0.0.1:{port}:8443"]),
            "volumes": _Override(["spool:/var/lib/perfdash/spool", f"{tls}:/run/perfdash-tls:ro"]),
            "env_file": _Override([str(env_file)]),
        }},
    }
    path = directory / "compose.test.yaml"
    path.write_text(yaml.dump(override, Dumper=_Dumper, sort_keys=False))
    return path


class _Override(list):
    """A list written with the compose spec's ``!override`` tag: it replaces the compose file's, not extends it."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Override, lambda dumper, data: dumper.represent_sequence("!override", list(data)))


def _base_image_tag() -> str:
    first = re.search(r"^FROM\s+(\S+)", (REPO / "docker" / "service.Dockerfile").read_text(), re.MULTILINE)
    assert first is not None
    return first.group(1)


def _up_options(podman) -> list[str]:  # type: ignore[no-untyped-def]
    """`up`'s options for this podman: before 4.6 (Debian 12 has 4.3) podman-compose cannot keep the compose file's
    order (the health condition is ignored, and podman refuses to start the service beside the exited migration
    step: "depends on container ... not found in input list"), so every container starts at once and the migrate
    and service commands wait for the database themselves (docker/compose.yaml, docs/operations.md)."""
    version = podman("version", "--format", "{{.Client.Version}}").stdout.strip()
    major, minor = (int(part) for part in version.split(".")[:2])
    return ["--no-deps"] if (major, minor) < (4, 6) else []


@pytest.fixture(scope="module")
def stack(podman, throwaway_ca: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    compose = yaml.safe_load(COMPOSE.read_text())
    service = compose["services"]["service"]
    assert service["build"] == {"context": "..", "dockerfile": "docker/service.Dockerfile"}
    # The image compose's build section makes (docker/service.Dockerfile, the repository as context), built as the
    # other image tests build it (layers cached across them); `up` then finds it and builds nothing.
    podman.build("service.Dockerfile", f"localhost/{service['image']}")
    made = subprocess.run([str(POSTGRES_IMAGE_SCRIPT), compose["services"]["postgres"]["image"], _base_image_tag()],
                          env=podman.env, capture_output=True, text=True, timeout=1200)
    assert made.returncode == 0, made.stderr[-3000:]
    print(f"\n[tests/containers] {made.stderr.strip().splitlines()[-1]}", file=sys.__stderr__, flush=True)

    directory = tmp_path_factory.mktemp("compose")
    secret_files = _secret_files(directory / "secrets", secrets.token_hex(16))
    tls = _tls_directory(podman, throwaway_ca, directory / "tls")
    port = _free_port()
    stack = Stack(url=f"https://127.0.0.1:{port}", ca=throwaway_ca / "ca.pem", project=f"perfdash-test-{port}",
                  files=(COMPOSE, _override(directory, secret_files, tls, port)), env=podman.env)
    try:
        stack.compose("up", "-d", *_up_options(podman))
        stack.wait_ready(podman)
        yield stack
    finally:
        stack.compose("down", "--volumes", "--timeout", "10", check=False)


def _ingest_args(stack: Stack, results: str, token_file: str, ca: str, night: int) -> list[str]:
    """`perfdash ingest --url https://...` as an agent runs it: the token in a file, the service's CA trusted."""
    return ["ingest", results, "--url", stack.url, "--token-file", token_file, "--ca-bundle", ca, "--machine", MACHINE,
            "--commit", f"{night:040x}", "--timestamp", f"2026-06-0{night}T01:00:00+00:00", "--retries", "2"]


def _token_file(tmp_path: Path) -> Path:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    return token_file


def _post_night(stack: Stack, results: Path, night: int, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """From this machine's venv, as a developer or a bare agent posts."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("PERFDASH_", "DATABASE_URL"))},
           "PERFDASH_SPOOL_DIR": str(tmp_path / "spool")}
    return subprocess.run([sys.executable, "-m", "perfdash.cli",
                           *_ingest_args(stack, str(results), str(_token_file(tmp_path)), str(stack.ca), night)],
                          env=env, capture_output=True, text=True, timeout=300)


def _post_night_from_runner(podman, image: str, stack: Stack, results: Path, night: int,  # type: ignore[no-untyped-def]
                            tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """From the CPU runner image, as the Jenkins cell posts after its run (host network: the service's port)."""
    return podman("run", "--rm", "-v", f"{results}:/results:ro", "-v", f"{_token_file(tmp_path)}:/run/token:ro",
                  "-v", f"{stack.ca}:/run/ca.pem:ro", image, "perfdash",
                  *_ingest_args(stack, "/results", "/run/token", "/run/ca.pem", night), check=False, timeout=300)


def test_compose_up_serves_a_night_and_keeps_it_across_down_and_up(stack: Stack, podman, runner_cpu_image: str,
                                                                    tmp_path: Path) -> None:
    # the migration step ran once and exited 0; the service runs as its unprivileged user
    state = podman("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", stack.container("migrate"))
    assert state.stdout.split() == ["exited", "0"]
    assert podman("exec", stack.container("service"), "id", "-u").stdout.strip() == str(IMAGE_UID)

    assert stack.runs() == []
    # the first night from this machine's upload client, the second from a runner container
    for night, results in enumerate(RUNS, start=1):
        posted = (_post_night(stack, results, night, tmp_path) if night == 1 else
                  _post_night_from_runner(podman, runner_cpu_image, stack, results, night, tmp_path))
        assert posted.returncode == 0 and "stored" in posted.stdout, posted.stdout + posted.stderr
    runs = stack.runs()
    assert len(runs) == len(RUNS)

    status, kind, page = stack.get("/")
    assert status == 200 and kind.startswith("text/html") and b"<nav" in page
    for run in runs:
        status, kind, page = stack.get(f"/suite/{run['id']}")
        assert status == 200 and run["configuration"]["suite"].encode() in page
        detail = json.loads(stack.get(f"/api/v1/runs/{run['id']}")[2])
        assert detail["id"] == run["id"] and len(detail["results"]) == 7
    status, _, page = stack.get("/runs")
    assert status == 200 and MACHINE.encode() in page
    # compose's health checks, run as the engine runs them
    for service in ("postgres", "service"):
        health = podman("healthcheck", "run", stack.container(service), check=False)
        assert health.returncode == 0, (service, health.stdout, health.stderr)
    # only HTTPS on the port
    with pytest.raises(OSError):
        urllib.request.urlopen(stack.url.replace("https://", "http://") + "/healthz/live", timeout=5)

    stack.compose("down", "--timeout", "10")
    assert podman("ps", "-a", "--filter", f"name={stack.project}_", "--format", "{{.Names}}").stdout.strip() == ""
    stack.compose("up", "-d", *_up_options(podman))
    stack.wait_ready(podman)
    assert stack.runs() == runs  # every run kept in the named volume, byte for byte the same answer
    migrated = podman("inspect", "--format", "{{.State.ExitCode}}", stack.container("migrate"))
    assert migrated.stdout.strip() == "0"
