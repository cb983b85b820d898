"""Fault drills end to end on a real Postgres (issue 13): what a deployment loses, duplicates or crashes on.

    .venv/bin/python -m bench.faults [--nights 12] [--models 30] [--schemathesis-s 60]

Starts a throwaway Postgres (tests/pgcluster.py) and `perfdash serve` in its own process, writes synthetic nights of
PyTorch-format CSVs, and replays:

1. service down, then up: `perfdash ingest --url` while nothing listens (spooled, exit 3), then with the service up
   (the spool is posted first);
2. Postgres killed (SIGKILL of the postmaster) while nights stream in, restarted seconds later; a last ingest posts
   whatever the client spooled meanwhile;
3. 20 parallel `perfdash ingest --url` processes: 10 nights, each posted twice at once; then 5 nights without
   --timestamp, each posted twice and once more as a copy of its files with other file times;
4. the malformed corpus (tests/service/hostile.py: files, JSON, query filters) on one keep-alive connection;
5. schemathesis against /openapi.json for a bounded time (last: it may delete runs with the token).

Prints rows lost (result rows of the drill nights missing from the database), runs stored twice (a night stored as
more than one run), server errors (5xx from the server's access log: 503 while Postgres is down is the designed
answer and counted apart), tracebacks (in the server's log and in every client's output) and connections reset.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import io
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import sqlalchemy as sa

from perfdash.contract import AccuracyRow, PerformanceRow, header_for
from service.db import session_scope
from service.settings import Settings

REPO = Path(__file__).resolve().parent.parent  # where the corpus is (tests/service/hostile.py)
TOKEN = "faults-token"
STEM = "inductor_timm_models_float32_inference_cpu"
PERFDASH = [sys.executable, "-m", "perfdash.cli"]


def _load_corpus():
    name = "perfdash_hostile_corpus"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "tests" / "service" / "hostile.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


# --------------------------------------------------------------------------------------------------------------------
# Data


@dataclass(frozen=True)
class Night:
    directory: Path
    timestamp: str | None  # None: posted without --timestamp (the run is keyed by its content)
    commit: str  # one per night: how the count finds a night's runs
    models: int


def write_night(root: Path, index: int, models: int, rng: random.Random, timestamped: bool = True) -> Night:
    directory = root / f"night{index:03d}"
    directory.mkdir(parents=True)
    perf, acc = io.StringIO(), io.StringIO()
    pw, aw = csv.writer(perf, lineterminator="\n"), csv.writer(acc, lineterminator="\n")
    pw.writerow(header_for("performance"))
    aw.writerow(header_for("accuracy"))
    for m in range(models):
        name = f"model_{m:03d}"
        pw.writerow(PerformanceRow(dev="cpu", name=name, batch_size=8, speedup=round(rng.uniform(0.8, 2.0), 4),
                                   abs_latency=5.0, compilation_latency=20.0, compression_ratio=1.1,
                                   eager_peak_mem=0.5, dynamo_peak_mem=0.45).to_csv_fields(with_stats=True))
        aw.writerow(AccuracyRow(dev="cpu", name=name, batch_size=8, accuracy="pass").to_csv_fields(with_stats=True))
    (directory / f"{STEM}_performance.csv").write_text(perf.getvalue())
    (directory / f"{STEM}_accuracy.csv").write_text(acc.getvalue())
    start = datetime(2026, 1, 1, 1, tzinfo=UTC) + timedelta(days=index)
    return Night(directory, start.isoformat() if timestamped else None, f"night{index:03d}", models)


# --------------------------------------------------------------------------------------------------------------------
# Postgres that can be killed and started again


class Postgres:
    """The server tests/pgcluster.py started, found through its data directory, so a drill can kill it."""

    def __init__(self, url: str) -> None:
        self.url = url
        with session_scope(Settings(database_url=url)) as session:
            self.data = Path(session.scalar(sa.text("SHOW data_directory")))
        self.options = (self.data / "postmaster.opts").read_text().strip()

    def kill(self) -> None:
        pid = int((self.data / "postmaster.pid").read_text().splitlines()[0])
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # SIGKILL of the postmaster: its backends notice and exit
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 0)
                time.sleep(0.05)
                continue
            break

    def start(self) -> None:
        binary, *args = shlex.split(self.options)
        pg_ctl = str(Path(binary).with_name("pg_ctl"))
        as_root = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        options = " ".join(shlex.quote(a) for a in args if a not in ("-D", str(self.data)))
        env = {**os.environ, "LC_ALL": "C.UTF-8"}
        deadline = time.monotonic() + 30
        while True:  # the killed postmaster's backends may hold its shared memory for a moment
            (self.data / "postmaster.pid").unlink(missing_ok=True)
            done = subprocess.run([*as_root, pg_ctl, "-D", str(self.data), "-o", options, "-l",
                                   str(self.data.parent / "restart.log"), "-w", "start"], capture_output=True, env=env)
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"Postgres did not restart: {done.stderr.decode(errors='replace')}")
            time.sleep(0.5)


# --------------------------------------------------------------------------------------------------------------------
# The service in its own process


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    def __init__(self, database_url: str, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        import service

        code = Path(service.__file__).resolve().parent.parent  # the code under test: the one this process imports
        self.env = {**os.environ, "DATABASE_URL": database_url, "PERFDASH_INGEST_TOKENS": TOKEN,
                    "PYTHONPATH": os.pathsep.join([str(code), str(code / "bisect"), os.environ.get("PYTHONPATH", "")])}
        self.log = log
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        handle = self.log.open("ab")
        self.process = subprocess.Popen([*PERFDASH, "serve", "--no-upgrade", "--host", "127.0.0.1", "--port",
                                         str(self.port)], env=self.env, stdout=handle, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/openapi.json", timeout=1).status_code == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError("the service did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(20)
            self.process = None


# --------------------------------------------------------------------------------------------------------------------
# Drills


@dataclass
class Tally:
    client_outputs: list[str] = field(default_factory=list)
    resets: int = 0
    outage: list[tuple[float, float]] = field(default_factory=list)  # monotonic windows with Postgres down
    corpus_statuses: Counter = field(default_factory=Counter)
    corpus_unexpected: list[str] = field(default_factory=list)

    def ingest(self, service: Service, spool: Path, night: Night, retries: int = 4) -> int:
        when = ["--timestamp", night.timestamp] if night.timestamp else []
        done = subprocess.run([*PERFDASH, "ingest", str(night.directory), "--url", service.url, "--token", TOKEN,
                               "--machine", "Drill Xeon", "--commit", night.commit, *when, "--retries", str(retries)],
                              env={**service.env, "PERFDASH_SPOOL_DIR": str(spool)}, capture_output=True, text=True)
        self.client_outputs.append(done.stdout + done.stderr)
        return done.returncode


def drill_down_then_up(tally: Tally, service: Service, spool: Path, nights: list[Night]) -> str:
    *while_down, after = nights
    codes = [tally.ingest(service, spool, n, retries=2) for n in while_down]
    spooled = len([p for p in spool.iterdir() if p.is_dir() and p.name != "rejected"]) if spool.exists() else 0
    service.start()
    last = tally.ingest(service, spool, after)
    left = len([p for p in spool.iterdir() if p.is_dir() and p.name != "rejected"])
    return f"down: exit codes {codes}, {spooled} spooled; up: exit {last}, {left} left in the spool"


def drill_postgres_killed(tally: Tally, service: Service, spool: Path, postgres: Postgres,
                          nights: list[Night], down_s: float) -> str:
    codes: list[int] = []

    def stream() -> None:
        for night in nights:
            codes.append(tally.ingest(service, spool, night))

    streamer = threading.Thread(target=stream)
    streamer.start()
    time.sleep(1.5)  # a night or two in
    start = time.monotonic()
    postgres.kill()
    time.sleep(down_s)
    postgres.start()
    tally.outage.append((start, time.monotonic() + 1.0))
    streamer.join()
    # the next build's ingest posts whatever was spooled meanwhile
    codes.append(tally.ingest(service, spool, nights[-1]))
    return f"Postgres down {down_s:.0f} s mid-stream; client exit codes {codes}"


def drill_parallel(tally: Tally, service: Service, spool_root: Path, nights: list[Night]) -> str:
    jobs = [(night, spool_root / f"agent{i}") for i, night in enumerate(nights * 2)]
    threads = [threading.Thread(target=lambda n=n, s=s: tally.ingest(service, s, n)) for n, s in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return f"{len(jobs)} uploads at once ({len(nights)} nights, each twice)"


def drill_untimed(tally: Tally, service: Service, spool: Path, nights: list[Night]) -> str:
    """Without --timestamp: each night posted twice, then a copy of its files (other file times) posted again."""
    for night in nights:
        tally.ingest(service, spool, night)
        tally.ingest(service, spool, night)
        copy = night.directory.with_name(night.directory.name + "-copy")
        shutil.copytree(night.directory, copy)
        for f in copy.iterdir():
            os.utime(f, (1_700_000_000, 1_700_000_000))
        tally.ingest(service, spool, Night(copy, None, night.commit, night.models))
    return f"{len(nights)} nights without a timestamp, each posted twice and once more as a copy of its files"


def drill_corpus(tally: Tally, service: Service) -> str:
    hostile = _load_corpus()
    auth = {"Authorization": f"Bearer {TOKEN}"}
    sent = 0
    with httpx.Client(base_url=service.url, timeout=30) as client:
        def send(method: str, url: str, accepted: tuple[int, ...], label: str, **kwargs: object) -> None:
            nonlocal sent
            sent += 1
            try:
                response = client.request(method, url, **kwargs)
            except httpx.TransportError as exc:
                tally.resets += 1
                tally.corpus_unexpected.append(f"{label}: {type(exc).__name__}")
                return
            tally.corpus_statuses[response.status_code] += 1
            tally.client_outputs.append(response.text)
            if response.status_code not in accepted:
                tally.corpus_unexpected.append(f"{label}: HTTP {response.status_code} {response.text[:120]}")

        for case in hostile.file_cases():
            files = [("files", (n, d, "text/csv")) for n, d in case.files.items()]
            send("POST", "/api/v1/runs", (case.status,), case.name, files=files, data=case.form, headers=auth)
        for case in hostile.json_cases():
            send("POST", "/api/v1/runs", (case.status,), case.name, content=json.dumps(case.body),
                 headers={**auth, "content-type": "application/json"})
        for method, url, accepted in hostile.query_cases():
            send(method, url, accepted, url)
        send("POST", "/api/v1/annotations", (422,), "NUL in an annotation",
             json={"text": "a\x00b", "night": "2026-01-02"}, headers=auth)
    return f"{sent} hostile requests on one keep-alive connection"


def drill_schemathesis(service: Service, seconds: int, log: Path) -> str:
    command = [str(Path(sys.executable).with_name("schemathesis")), "run", f"{service.url}/openapi.json",
               "--checks", "not_a_server_error", "--max-time", str(seconds), "--workers", "1",
               "-H", f"Authorization: Bearer {TOKEN}", "--continue-on-failure", "--no-color"]
    # in the work directory: schemathesis keeps a cache (.schemathesis/) where it runs
    done = subprocess.run(command, capture_output=True, text=True, env=service.env, timeout=seconds * 3 + 120,
                          cwd=log.parent)
    log.write_text(done.stdout + done.stderr)
    tail = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()][-3:]
    return f"schemathesis {seconds} s, exit {done.returncode}: " + " / ".join(t.strip() for t in tail)


# --------------------------------------------------------------------------------------------------------------------
# Counting


_ACCESS = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})')


def server_statuses(log: Path) -> Counter:
    return Counter(int(m["status"]) for m in _ACCESS.finditer(log.read_text(errors="replace")))


def stored(url: str, nights: list[Night]) -> tuple[int, int, int]:
    """(rows lost, runs stored twice, runs of the drill nights)."""
    with session_scope(Settings(database_url=url)) as session:
        rows = session.execute(sa.text(
            "SELECT r.torch_git_commit, count(DISTINCT r.id), count(x.id) FROM runs r "
            "LEFT JOIN results x ON x.run_id = r.id GROUP BY r.torch_git_commit")).all()
    by_commit = {commit: (runs, results) for commit, runs, results in rows}
    lost = twice = total = 0
    for night in nights:
        runs, results = by_commit.get(night.commit, (0, 0))
        total += runs
        twice += max(0, runs - 1)
        lost += max(0, night.models - (results // runs if runs else 0))
    return lost, twice, total


def _table_counts(url: str) -> dict[str, int]:
    with session_scope(Settings(database_url=url)) as session:
        counts = {t: session.scalar(sa.text(f"SELECT count(*) FROM {t}"))
                  for t in ("machines", "configurations", "runs", "series", "results", "annotations")}
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, default=12, help="nights streamed while Postgres is killed")
    parser.add_argument("--models", type=int, default=30, help="models a night")
    parser.add_argument("--down-s", type=float, default=4.0, help="how long Postgres stays down")
    parser.add_argument("--schemathesis-s", type=int, default=60, help="schemathesis time budget, seconds")
    args = parser.parse_args(argv)

    from service.migrate import upgrade
    from tests.pgcluster import temporary_postgres

    rng = random.Random(13)
    work = Path(tempfile.mkdtemp(prefix="perfdash-faults-"))
    log = work / "server.log"
    index = iter(range(10_000))
    make = lambda n: [write_night(work / "data", next(index), args.models, rng) for _ in range(n)]  # noqa: E731
    down_up, killed, parallel = make(4), make(args.nights), make(10)
    untimed = [write_night(work / "data", next(index), args.models, rng, timestamped=False) for _ in range(5)]
    drill_nights = down_up + killed + parallel + untimed
    tally = Tally()
    report: list[str] = []
    with temporary_postgres() as url:
        upgrade(url)
        postgres = Postgres(url)
        service = Service(url, log)
        try:
            t0 = time.monotonic()
            report.append("1 " + drill_down_then_up(tally, service, work / "spool1", down_up))
            report.append("2 " + drill_postgres_killed(tally, service, work / "spool2", postgres, killed, args.down_s))
            report.append("3 " + drill_parallel(tally, service, work / "spool3", parallel))
            report.append("3b " + drill_untimed(tally, service, work / "spool3b", untimed))
            lost, twice, runs = stored(url, drill_nights)
            before_corpus = _table_counts(url)
            report.append("4 " + drill_corpus(tally, service))
            after_corpus = _table_counts(url)
            statuses_before_fuzz = server_statuses(log)
            if args.schemathesis_s > 0:
                report.append("5 " + drill_schemathesis(service, args.schemathesis_s, work / "schemathesis.log"))
            elapsed = time.monotonic() - t0
        finally:
            service.stop()
    statuses = server_statuses(log)
    fuzz = statuses - statuses_before_fuzz
    server_log = log.read_text(errors="replace")
    tracebacks_server = server_log.count("Traceback")
    tracebacks_client = sum(o.count("Traceback") for o in tally.client_outputs)
    five = {s: c for s, c in sorted(statuses.items()) if s >= 500}
    print("\n".join(report))
    print(f"work directory: {work} (server log, schemathesis log); {elapsed:.0f} s")
    print(f"drill nights: {len(drill_nights)} x {args.models} models, {runs} runs stored")
    print(f"rows lost: {lost}")
    print(f"runs stored twice: {twice}")
    print(f"corpus: statuses {dict(sorted(tally.corpus_statuses.items()))}; unexpected {len(tally.corpus_unexpected)}"
          f"{': ' + '; '.join(tally.corpus_unexpected) if tally.corpus_unexpected else ''}; "
          f"database unchanged by it: {before_corpus == after_corpus}")
    print(f"connections reset: {tally.resets}")
    print(f"server 5xx by status (all drills): {five or 'none'}; of them during schemathesis: "
          f"{ {s: c for s, c in fuzz.items() if s >= 500} or 'none'}")
    print(f"server 5xx other than 503 (Postgres down): {sum(c for s, c in five.items() if s != 503)}")
    print(f"tracebacks: server log {tracebacks_server}, client outputs {tracebacks_client}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
