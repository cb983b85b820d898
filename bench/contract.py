"""The API against its own OpenAPI document: schemathesis with every check, on a real Postgres, with a token of every
scope (issue 29). Not a timed test: it prints what schemathesis found and what the runs table lost.

    PYTHONPATH=$PWD:$PWD/bisect .venv/bin/python -m bench.contract [--seconds 300] [--seed 29]

Starts a throwaway Postgres (tests/pgcluster.py), migrates it, stores the PyTorch run of tests/service/data, starts
`perfdash serve` in its own process with four named tokens (ingest, bisect, admin, and one with all three), then:

1. schemathesis, all checks, fixed seed, the all-scopes token, for --seconds (positive_data_acceptance in the form of
   bench/contract_hooks.py: the same check, expecting the one refusal the document names but JSON Schema cannot
   describe, a multipart upload whose files are not result files);
2. schemathesis for --ingest-seconds with the ingest-only token: no run may be deleted (the runs before and after
   are counted; the audit log must show no DELETE);

and prints each pass' summary line (the whole output is in the work directory).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import sqlalchemy as sa

REPO = Path(__file__).resolve().parent.parent
PERFDASH = [sys.executable, "-m", "perfdash.cli"]
TOKENS = {"ingest": "contract-ingest-token-0001", "bisect": "contract-bisect-token-0001",
          "admin": "contract-admin-token-0001", "all": "contract-all-scopes-token-0001"}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _token_config() -> str:
    scopes = {"ingest": ["ingest"], "bisect": ["bisect"], "admin": ["admin"], "all": ["ingest", "bisect", "admin"]}
    return json.dumps([{"name": f"contract-{name}", "scopes": scopes[name], "token": token}
                       for name, token in TOKENS.items()])


@contextlib.contextmanager
def _service(database_url: str, log: Path):
    port = _free_port()
    env = {**os.environ, "DATABASE_URL": database_url, "PERFDASH_TOKENS": _token_config(),
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "bisect")])}
    with log.open("ab") as handle:
        process = subprocess.Popen([*PERFDASH, "serve", "--no-upgrade", "--host", "127.0.0.1", "--port", str(port)],
                                   env=env, stdout=handle, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/openapi.json", timeout=1).status_code == 200:
                    break
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(20)


def _seed_data(url: str) -> None:
    data = REPO / "tests" / "service" / "data" / "pytorch_run"
    for night in (1, 2, 3):
        files = [("files", (p.name, p.read_bytes(), "text/csv")) for p in sorted(data.iterdir()) if p.is_file()]
        response = httpx.post(url + "/api/v1/runs", files=files, timeout=60,
                              data={"machine": "Contract Xeon", "commit": f"c{night}",
                                    "timestamp": f"2026-03-0{night}T01:00:00+00:00"},
                              headers={"Authorization": f"Bearer {TOKENS['ingest']}"})
        response.raise_for_status()


def _schemathesis(url: str, token: str, seconds: int, seed: int, work: Path, name: str) -> tuple[str, int]:
    command = [str(Path(sys.executable).with_name("schemathesis")), "run", f"{url}/openapi.json",
               "--checks", "all", "--exclude-checks", "positive_data_acceptance",
               "--seed", str(seed), "--max-time", str(seconds), "--workers", "1",
               "-H", f"Authorization: Bearer {token}", "--continue-on-failure", "--no-color"]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(REPO / "bench" / "contract_hooks.py")}
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds * 3 + 300, cwd=work, env=env)
    (work / f"schemathesis-{name}.log").write_text(done.stdout + done.stderr)
    lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    # the summary's figures: cases and unique failures, each failure kind, the last line (failures, warnings, time)
    shown = [line for line in lines if re.match(r"^\d+ generated", line) or line.startswith(("❌ ST", "⚠️"))
             or (line.startswith("=") and ("passed" in line or "failure" in line or " in " in line))]
    printable = " ".join(command).replace(token, "<token>")
    return f"{printable}\n  exit {done.returncode}: " + " | ".join(shown), done.returncode


def _count(database_url: str, sql: str) -> int:
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as connection:
            return int(connection.scalar(sa.text(sql)))
    finally:
        engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=300, help="schemathesis budget with the all-scopes token")
    parser.add_argument("--ingest-seconds", type=int, default=60, help="budget with the ingest-only token")
    parser.add_argument("--seed", type=int, default=29)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from service.migrate import upgrade
    from tests.pgcluster import temporary_postgres

    work = Path(tempfile.mkdtemp(prefix="perfdash-contract-"))
    with temporary_postgres() as database_url:
        upgrade(database_url)
        with _service(database_url, work / "server.log") as url:
            _seed_data(url)
            line, first = _schemathesis(url, TOKENS["all"], args.seconds, args.seed, work, "all")
            print(line)
            _seed_data(url)  # the all-scopes pass may have deleted them (it may)
            runs_before = _count(database_url, "SELECT count(*) FROM runs")
            line, second = _schemathesis(url, TOKENS["ingest"], args.ingest_seconds, args.seed, work, "ingest")
            print(line)
            runs_after = _count(database_url, "SELECT count(*) FROM runs")
            # its refused attempts are in the log too (outcome 'refused'): only a DELETE that happened counts
            deletes = _count(database_url, "SELECT count(*) FROM audit_log WHERE action LIKE 'DELETE %' "
                                           "AND token_name = 'contract-ingest' AND outcome = 'done'")
            print(f"ingest-only token: runs {runs_before} before, {runs_after} after; deletes in the audit log by "
                  f"it: {deletes}")
    print(f"work directory: {work}")
    shutil.rmtree(work / ".schemathesis", ignore_errors=True)
    return 0 if first == 0 and second == 0 and runs_after >= runs_before and deletes == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
