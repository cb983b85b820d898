"""Images built from docker/*.Dockerfile and run with podman, as the agents run them with Docker.

podman runs with runc, fixed ulimits and host networking (scripts/containers/containers.conf says why). The
Dockerfiles' base image is pulled when a registry answers; where none does (these machines), a stand-in made from
Debian's packages takes its tag (scripts/containers/base-image.sh), and the test output says which it was.
The torch wheels come from a local index of PyTorch's shape (``<root>/<variant>/<project>/``), served on loopback and
downloaded once into the persistent cache: torch 2.14.1 (CUDA 13.0) for the CUDA image, and for the CPU image the torch
2.13.0 release as PyPI publishes it (also a CUDA 13.0 build, which runs on a CPU) with its torchvision 0.28.0.
PyTorch's own CPU wheels live on download.pytorch.org, which these machines cannot reach; the 2.13.0+cpu wheel that is
on their disk has no torchvision to go with it here (PyPI's torchvision 0.28.0 fails beside it: "operator
torchvision::nms does not exist", and transformers then cannot import its models).
Build times (cold and warm) go to ``$PERFDASH_CACHE_DIR/image-builds.jsonl``; the README quotes them.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONTAINERS_CONF = REPO / "scripts" / "containers" / "containers.conf"
BASE_IMAGE_SCRIPT = REPO / "scripts" / "containers" / "base-image.sh"
CACHE = Path(os.environ.get("PERFDASH_CACHE_DIR", Path.home() / ".cache" / "perfdash"))
# The real wheels each local index variant serves: (directory under the cache, requirements pip downloads, from the
# registry alone: without this machine's local wheel directories, whose torch 2.13.0+cpu pip would prefer).
WHEEL_SETS = {
    "cpu": ("torch-2.13.0-pypi", ("torch==2.13.0", "torchvision==0.28.0"), True),
    "cu130": ("torch-2.14.1-cu130", ("torch==2.14.1", "torchvision==0.29.1"), False),
}


INDEX_PORT = int(os.environ.get("PERFDASH_TORCH_INDEX_PORT", "38611"))
# A test here may build an image from nothing: a cold build is allowed 1800 s (Podman.build), which the suite's
# 900 s per test would cut short on a busy machine.
IMAGE_TEST_TIMEOUT_S = 2400


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.timeout(IMAGE_TEST_TIMEOUT_S))


def base_image_tag() -> str:
    """The FROM of the images (all three share it; tests/deploy/test_docker.py checks each is pinned)."""
    first = re.search(r"^FROM\s+(\S+)", (REPO / "docker" / "service.Dockerfile").read_text(), re.MULTILINE)
    assert first is not None
    return first.group(1)


@dataclass(frozen=True)
class Podman:
    env: dict[str, str]

    def __call__(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["podman", *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"podman {' '.join(args[:3])} ... exit {done.returncode}:\n"
                                 f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
        return done

    def build(self, dockerfile: str, tag: str, build_args: dict[str, str] | None = None,
              timeout: float = 1800) -> float:
        """Build ``docker/<dockerfile>`` from the repository root; returns the seconds it took (and records them)."""
        args = [f"--build-arg={key}={value}" for key, value in (build_args or {}).items()]
        start = time.monotonic()
        done = self("build", "--network", "host", "--format", "docker", "--layers", "-f", f"docker/{dockerfile}",
                    "-t", tag, *args, str(REPO), timeout=timeout, check=False)
        seconds = time.monotonic() - start
        if done.returncode != 0:
            raise AssertionError(f"podman build {dockerfile} failed after {seconds:.0f} s:\n{done.stdout[-6000:]}\n"
                                 f"{done.stderr[-3000:]}")
        cached = done.stdout.count("--> Using cache")
        steps = len(re.findall(r"^STEP \d+/\d+", done.stdout, re.MULTILINE))
        with (CACHE / "image-builds.jsonl").open("a", encoding="utf-8") as log:
            log.write(json.dumps({"dockerfile": dockerfile, "tag": tag, "seconds": round(seconds, 1),
                                  "cached_steps": cached, "steps": steps, "at": time.strftime("%FT%T")}) + "\n")
        # Superseded images of earlier builds would fill the disk build after build; but the unnamed intermediate
        # images are the layer cache (a plain prune removes them, and every build is cold): prune only old ones.
        self("image", "prune", "--force", "--filter", "until=72h", check=False)
        return seconds


@pytest.fixture(scope="session")
def podman() -> Podman:
    if shutil.which("podman") is None or shutil.which("runc") is None:
        pytest.skip("podman and runc are not installed (scripts/install-system-packages.sh test installs them)")
    env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}
    tool = Podman(env)
    info = tool("info", "--format", "{{.Host.OCIRuntime.Name}}", check=False, timeout=120)
    if info.returncode != 0:
        pytest.skip(f"containers cannot run on this machine: podman info: {info.stderr.strip()[-300:]}")
    CACHE.mkdir(parents=True, exist_ok=True)
    tag = base_image_tag()
    made = subprocess.run([str(BASE_IMAGE_SCRIPT), tag], env=env, capture_output=True, text=True, timeout=900)
    if made.returncode != 0:
        pytest.skip(f"no base image {tag}: {made.stderr.strip()[-500:]}")
    origin = tool("image", "inspect", "--format", '{{ index .Labels "org.perfdash.base" }}', tag).stdout.strip()
    said = made.stderr.strip().splitlines()[-1] + (f" [{origin}]" if origin and origin != "<no value>" else "")
    # Said in the test output whatever the capture mode (CI's log is where a reader looks for it).
    print(f"\n[tests/containers] {said}", file=sys.__stderr__, flush=True)
    probe = tool("run", "--rm", tag, "python", "-c", "print('ok')", check=False, timeout=120)
    if probe.returncode != 0 or probe.stdout.strip() != "ok":
        pytest.skip(f"containers cannot run on this machine: {probe.stderr.strip()[-300:]}")
    return tool


def _download(directory: Path, requirements: tuple[str, ...], registry_only: bool) -> None:
    if directory.is_dir() and any(directory.glob("torch-*.whl")):
        return
    partial = directory.with_name(directory.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    env = {**os.environ, "PIP_FIND_LINKS": "", "PIP_CONFIG_FILE": os.devnull} if registry_only else None
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--python-version",
                    "3.11", "-d", str(partial), *requirements], check=True, timeout=1800, env=env)
    partial.rename(directory)


def _project(wheel: str) -> str:
    return re.sub(r"[-_.]+", "-", wheel.split("-", 1)[0]).lower()  # PEP 503 normalised name


@pytest.fixture(scope="session")
def torch_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """http://127.0.0.1:PORT, a wheel index of download.pytorch.org/whl's shape (install-torch's TORCH_INDEX_ROOT)."""
    root = tmp_path_factory.mktemp("torch-index")
    for variant, (name, requirements, registry_only) in WHEEL_SETS.items():
        wheels = CACHE / "wheels" / name
        _download(wheels, requirements, registry_only)
        for wheel in wheels.glob("*.whl"):
            project = root / variant / _project(wheel.name)
            project.mkdir(parents=True, exist_ok=True)
            (project / wheel.name).symlink_to(wheel)
    # TorchBench's archive beside the wheels, for the runner images' PERFDASH_TORCHBENCH_SOURCE (torchbench_source)
    archive = _torchbench_archive()
    if archive is not None:
        (root / "torchbench").mkdir()
        (root / "torchbench" / archive.name).symlink_to(archive)
    handler = functools.partial(_QuietHandler, directory=str(root))
    # A fixed port: the index URL is a build argument, part of the layer cache's key (a new port every session would
    # rebuild every layer from install-torch on). Another port only when that one is taken.
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", INDEX_PORT), handler)
    except OSError:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def _torchbench_archive() -> Path | None:
    """The TorchBench archive setup.sh would use here (PERFDASH_TORCHBENCH_SOURCE, else the shared one), if a file."""
    from runner.torchbench_install import default_source

    source = default_source(REPO, os.environ)
    return Path(source.location) if source.kind == "archive" else None


@pytest.fixture(scope="session")
def torchbench_source(torch_index: str) -> str:
    """The runner images' PERFDASH_TORCHBENCH_SOURCE: the archive this machine has, served beside the wheels on
    loopback (a build reaches the host's loopback with --network host); else the setting or GitHub, as on agents."""
    from runner.torchbench_install import default_source

    archive = _torchbench_archive()
    return f"{torch_index}/torchbench/{archive.name}" if archive else default_source(REPO, os.environ).location


# The CPU runner image as the tests build it: PyPI's torch 2.13.0 from the loopback index, TorchBench from the
# archive, the spool owned by the user the cells run as (the Jenkinsfile passes the agent's `id -u`, here podman's).
RUNNER_CPU_IMAGE = "localhost/perfdash-runner-cpu:test-2.13.0"


@pytest.fixture(scope="session")
def runner_cpu_image(podman: Podman, torch_index: str, torchbench_source: str) -> str:
    podman.build("runner-cpu.Dockerfile", RUNNER_CPU_IMAGE,
                 {"TORCH_SPEC": "2.13.0", "TORCH_INDEX_ROOT": torch_index, "SPOOL_UID": str(os.getuid()),
                  "PERFDASH_TORCHBENCH_SOURCE": torchbench_source})
    return RUNNER_CPU_IMAGE


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


# ---- the pipeline stand-in (tests/deploy/conftest.py), for the command lines the Jenkinsfile builds --------------


def _deploy_conftest():  # type: ignore[no-untyped-def]
    import importlib.util

    name = "perfdash_tests_deploy_conftest"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "tests" / "deploy" / "conftest.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


groovy_env = _deploy_conftest().groovy_env
run_pipeline = _deploy_conftest().run_pipeline


# ---- the service container -------------------------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, podman: Podman, container: str, seconds: float = 90) -> None:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz/ready", timeout=3) as response:
                if response.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            logs = podman("logs", container, check=False)
            raise AssertionError(f"{container} never became ready:\n{logs.stdout[-3000:]}{logs.stderr[-3000:]}")
        time.sleep(0.5)


@dataclass(frozen=True)
class ServiceContainer:
    url: str
    token: str
    container: str
    database_url: str
    image: str


SERVICE_IMAGE = "localhost/perfdash-service:test"


@pytest.fixture(scope="session")
def service_container(podman: Podman, temporary_postgres) -> Iterator[ServiceContainer]:  # type: ignore[no-untyped-def]
    """The service image, migrated (`perfdash db upgrade`, as compose's migrate step) and serving on loopback
    against a real Postgres, with an ingest token."""
    podman.build("service.Dockerfile", SERVICE_IMAGE)
    token = "container-ingest-token"
    with temporary_postgres("perfdash_images") as database_url:
        podman("run", "--rm", "-e", f"DATABASE_URL={database_url}", SERVICE_IMAGE, "perfdash", "db", "upgrade")
        port = free_port()
        name = f"perfdash-service-test-{port}"
        podman("run", "-d", "--name", name, "-e", f"DATABASE_URL={database_url}",
               "-e", f"PERFDASH_INGEST_TOKENS={token}", SERVICE_IMAGE,
               "perfdash", "serve", "--host", "127.0.0.1", "--port", str(port))
        try:
            url = f"http://127.0.0.1:{port}"
            wait_ready(url, podman, name)
            yield ServiceContainer(url, token, name, database_url, SERVICE_IMAGE)
        finally:
            podman("rm", "--force", name, check=False)
