"""Two replicas, one database (issue 40, item 2): two `perfdash serve` processes (uvicorn) on one real Postgres take
the same night from two agents at once, each posting to its own replica.

Every night agent A posts the runs of configurations 1 and 2 to replica 1 while agent B posts those of 2 and 3 to
replica 2 (a barrier starts them together): configuration 2's run arrives twice at once, the others are different
runs of a new machine arriving at once. Both replicas start on an empty database at the same time (each migrates
first). Then both agents post every confirm request's A/B result to both replicas at once (a retry that reached
the other replica) and the nightly's `perfdash report --post` runs twice at once.

What must hold: every answer a success, each run stored once, the findings those of one process ingesting the
same files one by one (so each run detected once, in order), one GitHub issue per confirmed regression and one
report comment, and nothing left pending.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest
import sqlalchemy as sa

NIGHTS = 22  # the regression lands on night 20: two points after it, as detection requires
DTYPES = ("float32", "bfloat16", "float16")  # configurations 1, 2 and 3
OPERATOR = "replicas-operator-token-0123"
REPOSITORY = "perfdash-test/dashboard"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None,
             timeout: float = 120) -> tuple[int, dict | list | None]:
    request = urllib.request.Request(url, data=data, headers=headers or {}, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, {"error": exc.read().decode(errors="replace")[:2000]}


def _multipart(files: dict[str, bytes]) -> tuple[bytes, str]:
    boundary = "perfdash-replicas-boundary"
    parts = []
    for name, data in files.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
                     "Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def _upload(url: str, files: dict[str, bytes]) -> tuple[int, dict]:
    body, content_type = _multipart(files)
    status, answer = _request(f"{url}/api/v1/runs", data=body, headers={
        "Authorization": f"Bearer {OPERATOR}", "Content-Type": content_type})
    assert isinstance(answer, dict)
    return status, answer


def _environment(database_url: str, github_url: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PERFDASH_", "GITHUB_", "DATABASE_URL"))}
    return {**env, "DATABASE_URL": database_url, "GITHUB_TOKEN": "ghp_replicasSECRET",
            "GITHUB_REPOSITORY": REPOSITORY, "GITHUB_API_URL": github_url, "PERFDASH_REPORT_ISSUE": "1",
            "PERFDASH_TOKENS": json.dumps([{"name": "operator", "scopes": ["ingest", "bisect", "admin"],
                                            "token": OPERATOR}]),
            "PERFDASH_SPOOL_DIR": str(tmp_path / "spool"), "PERFDASH_CACHE_DIR": str(tmp_path / "cache")}


def _wait_ready(url: str, process: subprocess.Popen, log: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()[-4000:]
        try:
            if _request(f"{url}/healthz/ready", timeout=3)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{url} never became ready")


@pytest.fixture
def replicas(fresh_postgres: str, github, tmp_path: Path):
    """Two `perfdash serve` processes on one empty database, started together (both migrate it first)."""
    env = _environment(fresh_postgres, github.url, tmp_path)
    ports = [_free_port(), _free_port()]
    logs = [tmp_path / f"replica-{n}.log" for n in (1, 2)]
    processes = [subprocess.Popen([sys.executable, "-m", "perfdash.cli", "serve", "--host", "127.0.0.1", "--port",
                                   str(port)], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
                 for port, log in zip(ports, logs, strict=True)]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        for url, process, log in zip(urls, processes, logs, strict=True):
            _wait_ready(url, process, log)
        yield urls, env
    finally:
        for log in logs:  # what the replicas said: pytest shows it when the test failed
            print(f"--- {log.name}\n{log.read_text()[-6000:]}", file=sys.stderr)
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()


def _night_files(run_files, series_values) -> list[dict[str, dict[str, bytes]]]:
    """Per night, each configuration's run files: resnet18 20 % slower from night 20 in every configuration."""
    a, b = series_values(1, NIGHTS), series_values(2, NIGHTS, level=2.0)
    return [{dtype: run_files(night, {"resnet18": a[night] * (0.8 if night >= 20 else 1.0), "vit_small": b[night]},
                              dtype=dtype)
             for dtype in DTYPES} for night in range(NIGHTS)]


def _together(*calls):
    """Run the calls at once (each thread waits at a barrier first); their results in order."""
    barrier = threading.Barrier(len(calls))

    def run(call):
        barrier.wait()
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return [f.result() for f in [pool.submit(run, call) for call in calls]]


def _serial_findings(url: str, nights: list[dict[str, dict[str, bytes]]]) -> list[tuple]:
    """The findings of one process ingesting the same runs one by one into the empty database ``url`` (the
    reference)."""
    from service.db import make_engine, make_session_factory
    from service.hooks import post_ingest_hooks
    from service.ingest.files import bundles_from_files
    from service.ingest.upload import ingest
    from service.migrate import upgrade
    from service.settings import Settings

    upgrade(url)
    engine = make_engine(url)
    hooks = post_ingest_hooks(Settings(database_url=url))
    try:
        with make_session_factory(engine)() as session:
            for night in nights:
                for files in night.values():
                    assert not ingest(session, bundles_from_files(files), hooks).hook_errors
            return _findings(session.connection())
    finally:
        engine.dispose()


def _findings(connection) -> list[tuple]:
    """Findings by what they are (ids differ between databases): key text with ids replaced by the run's start."""
    rows = connection.execute(sa.text(
        "SELECT c.dtype, s.name, f.metric, f.category, f.kind, r.started_at, f.confirmation "
        "FROM findings f JOIN runs r ON r.id = f.run_id JOIN configurations c ON c.id = f.configuration_id "
        "LEFT JOIN series s ON s.id = f.series_id"))
    return sorted(tuple(str(v) for v in row) for row in rows)


def _confirmed(verdict: str = "confirmed") -> bytes:
    return json.dumps({"verdict": verdict, "culprit": None, "steps": [], "good_samples": [1.5] * 10,
                       "bad_samples": [1.2] * 10, "summary": "A/B: reproduced", "change_pct": 20.0,
                       "p_value": 1e-5}).encode()


def test_two_replicas_take_one_night_from_two_agents(replicas, fresh_postgres, new_database, github, run_files,
                                                     series_values) -> None:
    (one, two), env = replicas
    github.add_issue()  # the report's tracking issue, number 1
    nights = _night_files(run_files, series_values)
    answers = []
    for night in nights:
        f32, bf16, f16 = (night[d] for d in DTYPES)
        answers += _together(partial(_upload, one, {**f32, **bf16}), partial(_upload, two, {**bf16, **f16}))
    problems = [(status, answer) for status, answer in answers
                if status not in (200, 201) or answer.get("hook_errors")]
    assert not problems, problems[:3]
    # configuration 2's run came twice each night: one upload stored it, the other found it stored
    for (_, a), (_, b) in zip(answers[::2], answers[1::2], strict=True):
        (shared,) = {r["run_id"] for r in a["runs"]} & {r["run_id"] for r in b["runs"]}
        assert sorted(r["created"] for r in [*a["runs"], *b["runs"]] if r["run_id"] == shared) == [False, True]

    engine = sa.create_engine(fresh_postgres)
    with engine.connect() as connection:
        count = lambda table: connection.scalar(sa.text(f"SELECT count(*) FROM {table}"))  # noqa: E731
        assert (count("machines"), count("configurations"), count("runs"), count("results"), count("series")) == (
            1, len(DTYPES), NIGHTS * len(DTYPES), NIGHTS * len(DTYPES) * 2, len(DTYPES) * 2)
        assert connection.scalar(sa.text("SELECT count(*) FROM runs WHERE hooks_pending")) == 0
        replicated = _findings(connection)
    # each run detected once and in order: the findings of one process ingesting the runs one by one
    assert replicated == _serial_findings(new_database(), nights)
    assert sum(1 for f in replicated if f[2] == "speedup" and f[3] == "regression") == len(DTYPES)

    # every confirm request's A/B result, posted by two agents to both replicas at once, to a slow GitHub (so one
    # replica is still posting the issue when the other files it too)
    github.state.delay_s = 0.3
    status, pending = _request(f"{one}/api/v1/bisections?status=pending")
    confirms = [r["id"] for r in pending if r["purpose"] == "confirm"]
    assert status == 200 and len(confirms) == len(DTYPES)
    auth = {"Authorization": f"Bearer {OPERATOR}", "Content-Type": "application/json"}
    for request_id in confirms:
        results = _together(*(partial(_request, f"{url}/api/v1/bisections/{request_id}/result", data=_confirmed(),
                                      headers=auth) for url in (one, two)))
        assert [s for s, _ in results] == [200, 200], results
    # and the nightly's report posted twice at once (two Jenkins builds of the same night)
    reports = _together(*(lambda: subprocess.run([sys.executable, "-m", "perfdash.cli", "report", "--post"],
                                                 env=env, capture_output=True, text=True, timeout=300)
                          for _ in range(2)))
    assert [r.returncode for r in reports] == [0, 0], [r.stderr[-2000:] for r in reports]

    issues = [i for i in github.state.issues.values() if i["number"] != 1]
    markers = Counter(i["body"].splitlines()[0] for i in issues)
    assert len(issues) == len(DTYPES) and set(markers.values()) == {1}, markers
    report_comments = [c for c in github.state.comments.values() if c["issue_number"] == 1]
    assert len(report_comments) == 1
    with engine.connect() as connection:
        assert connection.scalar(sa.text("SELECT count(*) FROM bisection_requests WHERE purpose = 'bisect'")) == 3
        assert connection.scalar(sa.text("SELECT count(*) FROM github_posts WHERE status <> 'posted'")) == 0
    engine.dispose()
