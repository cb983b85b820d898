"""A throwaway PostgreSQL server in a temporary directory, for tests and benchmarks (never for production).

Debian's server binaries live in /usr/lib/postgresql/<major>/bin. Postgres refuses to run as root, so as root the
server runs as the ``postgres`` user in a directory under /tmp that the user can reach.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

POSTGRES_BIN_DIRS = tuple(sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True))


def _bin(name: str) -> str:
    for directory in POSTGRES_BIN_DIRS:
        if (directory / name).exists():
            return str(directory / name)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"PostgreSQL server binary {name!r} not found; install Debian's 'postgresql' package")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def temporary_postgres(database: str = "perfdash") -> Iterator[str]:
    """Start a server, create ``database``, yield its SQLAlchemy URL; stop and delete everything afterwards."""
    as_root = os.geteuid() == 0
    base = Path(tempfile.mkdtemp(prefix="perfdash-pg-", dir="/tmp"))
    data = base / "data"
    run_as: list[str] = ["runuser", "-u", "postgres", "--"] if as_root else []
    if as_root:
        shutil.chown(base, user="postgres")
    port = _free_port()
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    try:
        subprocess.run([*run_as, _bin("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                        "--encoding=UTF8", "--no-sync"], check=True, capture_output=True, env=env)
        options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off " \
                  "-c full_page_writes=off"
        subprocess.run([*run_as, _bin("pg_ctl"), "-D", str(data), "-o", options, "-l", str(base / "server.log"),
                        "-w", "start"], check=True, capture_output=True, env=env)
        try:
            subprocess.run([*run_as, _bin("psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-q",
                            "-c", f'CREATE DATABASE "{database}"'], check=True, capture_output=True, env=env)
            yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/{database}"
        finally:
            subprocess.run([*run_as, _bin("pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                           capture_output=True, env=env)
    finally:
        shutil.rmtree(base, ignore_errors=True)
