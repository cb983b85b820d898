"""Fixtures shared by every test package."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
# `make test PYTEST_WORKERS=2` runs on pytest-xdist workers, one file's tests on one worker (its module fixtures paid
# once), and each of these folders on one worker: tests/containers builds the podman images in session fixtures and
# serves wheels on a fixed port, tests/hf_vision's session fixture is a real compile run two workers would each pay.
ONE_WORKER_FOLDERS = ("containers", "hf_vision")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


def pytest_configure(config: pytest.Config) -> None:
    """git in tests (perfbisect's histories, fetches, clones) sees no user or system git configuration and has an
    identity of its own: a new user's HOME with no identity, or a global config that signs commits or renames the
    default branch, must not change what a test does."""
    os.environ.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
                       "GIT_AUTHOR_NAME": "perfdash tests", "GIT_AUTHOR_EMAIL": "tests@perfdash.invalid",
                       "GIT_COMMITTER_NAME": "perfdash tests", "GIT_COMMITTER_EMAIL": "tests@perfdash.invalid"})


# Optional: the serial run (`-p no:xdist`) has no xdist hooks to validate this one against.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """pytest-xdist's scheduler, given whole files or folders (ONE_WORKER_FOLDERS) in collection order. xdist's own
    ``--dist loadgroup`` does not group with pytest 9.2 here (xdist 3.8 renames ``item._nodeid``, which pytest 9.2 no
    longer reads: tests of one group ran on both workers), so the scope is this scheduler's rule instead."""
    from xdist.scheduler import LoadScopeScheduling

    class FileOrFolderScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            parts = path.split("/")
            if len(parts) > 2 and parts[0] == "tests" and parts[1] in ONE_WORKER_FOLDERS:
                return "/".join(parts[:2])
            return path

    return FileOrFolderScheduling(config, log)


def _load(name: str, path: Path):
    """A test-only module by path (tests are not a package; these helpers are not part of perfdash), once: dataclasses
    look their module up in sys.modules."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _load_pgcluster():
    return _load("perfdash_tests_pgcluster", Path(__file__).with_name("pgcluster.py"))


@pytest.fixture(scope="session")
def temporary_postgres():
    """``with temporary_postgres() as url:`` a throwaway PostgreSQL server for the block (tests/pgcluster.py)."""
    return _load_pgcluster().temporary_postgres


@pytest.fixture(scope="session")
def postgres_url(temporary_postgres) -> Iterator[str]:
    """A real PostgreSQL server for the whole session: PERFDASH_TEST_DATABASE_URL if set, else a temporary one."""
    url = os.environ.get("PERFDASH_TEST_DATABASE_URL")
    if url:
        yield url
        return
    with temporary_postgres() as started:
        yield started


@pytest.fixture(scope="session")
def migrated_url(postgres_url: str) -> str:
    """The session's Postgres with the schema made by `alembic upgrade head`."""
    from service.migrate import upgrade

    upgrade(postgres_url)
    return postgres_url


@pytest.fixture(scope="session")
def engine(migrated_url: str):  # -> sa.Engine; SQLAlchemy is imported only by the tests that use it
    from service.db import make_engine

    engine = make_engine(migrated_url)
    yield engine
    engine.dispose()


@pytest.fixture
def session(engine):
    """Each test in a transaction that is rolled back (the session commits to savepoints inside it)."""
    from sqlalchemy.orm import Session

    connection = engine.connect()
    transaction = connection.begin()
    session = Session(bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False)
    try:
        yield session
    finally:
        session.close()
        transaction.rollback()
        connection.close()


@pytest.fixture
def new_database(postgres_url: str) -> Iterator[Callable[[], str]]:
    """new_database() -> the URL of another empty database on the session's server; all dropped afterwards."""
    import uuid

    import sqlalchemy as sa

    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    names: list[str] = []

    def make() -> str:
        name = f"fresh_{uuid.uuid4().hex[:8]}"
        with admin.connect() as connection:
            connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
        names.append(name)
        return sa.make_url(postgres_url).set(database=name).render_as_string(hide_password=False)

    try:
        yield make
    finally:
        with admin.connect() as connection:
            for name in names:
                connection.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def fresh_postgres(new_database: Callable[[], str]) -> str:
    """An empty database on the session's server, dropped afterwards (migration tests, CLI tests that commit)."""
    return new_database()


@pytest.fixture(scope="session")
def result_csv():
    """result_csv(kind, rows) -> a PyTorch-format CSV ("performance" or "accuracy") as bytes, written with the
    contract's header and row types (what the runner writes)."""
    import csv
    import io

    from perfdash.contract import header_for

    def write(kind: str, rows: list) -> bytes:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header_for(kind))
        for row in rows:
            writer.writerow(row.to_csv_fields(with_stats=True))
        return out.getvalue().encode()

    return write


@pytest.fixture
def github() -> Iterator:
    """The GitHub stand-in server (tests/github/standin.py)."""
    standin = _load("perfdash_tests_github_standin", Path(__file__).parent / "github" / "standin.py")
    with standin.GitHubStandIn() as server:
        yield server


@pytest.fixture
def serve_in_thread():
    """``with serve_in_thread(app, port) as app:`` serves an ASGI app with a real uvicorn on 127.0.0.1:port in a
    thread for the block, and stops it after."""
    import contextlib
    import threading
    import time

    import uvicorn

    @contextlib.contextmanager
    def serve(app, port: int):
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 20
            while not server.started:
                assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
                time.sleep(0.05)
            yield app
        finally:
            server.should_exit = True
            thread.join(10)

    return serve


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Debian's headless Chromium, driven by Playwright. One per session: two sync Playwright instances cannot run
    at once in one thread (the second sees the first's event loop and refuses to start)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """A fresh browser page; the test fails if the page logged a console error, threw, or a request failed."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} {r.failure}"))
    page.on("dialog", lambda d: (problems.append(f"dialog opened: {d.message}"), d.dismiss()))
    page.set_default_timeout(15_000)
    yield page
    context.close()
    assert not problems, "\n".join(problems)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def throwaway_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with ca.pem, and server.pem/server.key for 127.0.0.1 and localhost signed by it (the openssl
    command: `cryptography` is not in the venv). The TLS tests of the deployment (tests/deploy/test_tls.py, and the
    service container's in tests/containers) trust only this CA."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command")
    d = tmp_path_factory.mktemp("ca")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
             "-subj", "/CN=perfdash throwaway test CA", "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=127.0.0.1",
             "-keyout", "server.key", "-out", "server.csr", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
             "-extfile", "san.ext", "-out", "server.pem", cwd=d)
    (d / "server.key").chmod(0o600)
    return d
