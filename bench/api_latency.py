"""Benchmark of the service at production size, on SYNTHETIC history (bench/synthetic_history.py).

One run: start a throwaway Postgres, fill it with ``--years`` of synthetic nightly history (3 suites x 150 models x
6 configurations ~ 3M result rows for three years), start the app under uvicorn on 127.0.0.1 (its own process), then

- ingest one new night (18 runs, ~2,700 rows) over HTTP in one upload, the same upload again (idempotent path), and
  the night after as 18 uploads, one per configuration;
- p50/p95 of the summary, model-history, suite-history, compare and runs-list requests over HTTP, and of the
  query functions called in-process (the same functions the dashboard pages use).

Targets (issue 3): a night ingests in under 2 s; every query's p95 under 50 ms.

    .venv/bin/python -m bench.api_latency [--years 3] [--requests 100]

PyTorch's whole nightly matrix (issue 31; ~50,000 results a night, 276 runs in 14 uploads of at most MAX_FILES
files; targets: a night ingests in < 30 s and is detected in < 60 s):

    .venv/bin/python -m bench.api_latency --configs 92 --models 180 --rows 30e6 [--detect-sample 28]

prints beside the above the app's CPU per request (the uvicorn process, from /proc), a deep page of the runs list by
offset and by keyset (``after=``), the database's size per million results, and detection of the new night as the
post-ingest hook runs it (service.detection.detector.detection_hook, every run; ``--detect-sample`` times every k-th
run and scales). Figures: bench/README.md, "issue 31".

Last printed (2026-11-23 14:36 UTC, this 2-core VM, load average 2.0-2.2: another job used one core throughout;
`.venv/bin/python -m bench.api_latency`, SYNTHETIC history of 19,710 runs, 2,956,500 result rows generated in 92 s)::

    ingest over HTTP (one night = 18 runs, 2,700 rows, 368 kB of files)
      new night in 2 uploads              0.35 s   target < 2 s   OK
      same uploads again (idempotent)   0.07 s
      next night as 18 uploads (1 run each)   0.44 s total
    queries over HTTP (100 requests each after 5 warm-up; ms)
      query                                          p50     p95  target p95 < 50 ms
      summary of a night (18 rows + previous)       14.2    21.2  OK
      summary, latest night                         14.5    20.9  OK
      model history, 3 years                        20.6    26.0  OK
      model history, last 90 days                    6.3    10.4  OK
      suite summary history, 3 years                27.0    35.4  OK
      compare two runs                              10.7    11.9  OK
      runs list, 30 days, filtered                  16.1    22.4  OK
    results table with its indexes: 680 MB

Before the app froze its startup objects (gc.freeze, service/app.py), the same run printed suite summary history
p50 25.5 / p95 121.7 ms: full garbage collections walking every imported object stalled one request in ten.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta

import httpx
import numpy as np

from bench.synthetic_history import SeriesModel, configurations, fill_database, model_names, night_files

TOKEN = "bench-token"
NIGHT_TARGET_S = 2.0  # today's 18 runs (issue 3)
MATRIX_NIGHT_TARGET_S = 30.0  # a night of more configurations, up to PyTorch's whole matrix (issue 31)
DEEP_OFFSET = 10_000  # runs skipped by the deep-page requests (offset, and keyset's after=)
DETECT_TARGET_S = 60.0  # detection of a whole night of PyTorch's matrix (issue 31)
QUERY_P95_TARGET_MS = 50.0


def bench_app():
    """The app as production runs it, minus post-ingest hooks (detection is measured by bench/detection.py): this
    benchmark times ingest itself. ``--with-hooks`` serves the default app instead."""
    from service.app import app_from_environment

    return app_from_environment(post_ingest_hooks=[])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _night_uploads(night, n_models: int, n_configs: int = 6) -> list[dict[str, bytes]]:
    """A night's files as few uploads as possible: PyTorch's file names do not encode the thread setting or the
    machine, so a configuration whose names another one already uses (single-thread beside all-cores, the second GPU
    machine) goes in another upload, as its agent would send it; an upload holds at most the API's MAX_FILES."""
    from service.api.runs import MAX_FILES

    uploads: list[dict[str, bytes]] = []
    for index, sc in enumerate(configurations(n_configs)):
        if sc.releases_only:  # the scaling experiment runs on release nights only
            continue
        # the history's seed for this configuration: the same models and batch sizes (the same series); the
        # nightly noise differs because the generator's state does
        model = SeriesModel(n_models, 2, seed=index)
        files = night_files(sc, model.night(0, model_names(sc.suite, n_models), sc.config.device), night)
        target = next((u for u in uploads if not set(files) & set(u) and len(u) + len(files) <= MAX_FILES), None)
        if target is None:
            uploads.append(target := {})
        target.update(files)
    return uploads


def _post(client: httpx.Client, files: dict[str, bytes]) -> tuple[float, dict]:
    parts = [("files", (name, data, "application/octet-stream")) for name, data in files.items()]
    started = time.perf_counter()
    response = client.post("/api/v1/runs", files=parts, headers={"Authorization": f"Bearer {TOKEN}"})
    elapsed = time.perf_counter() - started
    if response.is_error:  # the service's own reason, which raise_for_status would drop
        raise SystemExit(f"upload of {len(files)} files refused: {response.status_code} {response.text[:2000]}")
    return elapsed, response.json()


def _detect_night(url: str, run_ids: list[int]) -> tuple[float, int]:
    """Detection of a night's runs as the post-ingest hook does it (service.detection.detector.detection_hook: every
    series of each run, newest window), one commit per run; seconds and findings."""
    from service.db import session_scope
    from service.detection.detector import detect_run
    from service.settings import Settings

    started, cpu = time.perf_counter(), time.process_time()
    findings = 0
    with session_scope(Settings(database_url=url)) as session:
        for run_id in sorted(run_ids):
            findings += len(detect_run(session, run_id, incremental=True).new_findings)
            session.commit()
    print(f"  (detection's own CPU: {time.process_time() - cpu:.2f} s of {time.perf_counter() - started:.2f} s, "
          f"Postgres not included)")
    return time.perf_counter() - started, findings


def _percentiles(samples_ms: list[float]) -> tuple[float, float]:
    return float(np.percentile(samples_ms, 50)), float(np.percentile(samples_ms, 95))


def _process_cpu_ms(pid: int) -> float:
    """User + system CPU of a process so far (Linux /proc), ms."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def _time_calls(call: Callable[[], object], n: int, warmup: int = 5, cpu_of: int | None = None,
                cpu_out: list[float] | None = None) -> list[float]:
    """Wall ms per call; with ``cpu_of``, that process's CPU ms per call go to ``cpu_out`` (clock ticks: 10 ms)."""
    for _ in range(warmup):
        call()
    out = []
    for _ in range(n):
        cpu = _process_cpu_ms(cpu_of) if cpu_of is not None else 0.0
        started = time.perf_counter()
        call()
        out.append((time.perf_counter() - started) * 1000)
        if cpu_of is not None and cpu_out is not None:
            cpu_out.append(_process_cpu_ms(cpu_of) - cpu)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--years", type=float, default=3.0)
    parser.add_argument("--models", type=int, default=150, help="synthetic models per suite")
    parser.add_argument("--configs", type=int, default=6,
                        help="configurations per suite, the first N of bench.synthetic_history's matrix (6: today's; "
                             "92 with --models 180: PyTorch's nightly matrix, ~50,000 results a night)")
    parser.add_argument("--rows", type=float, help="result rows of history to generate (e.g. 30e6; sets the nights "
                                                   "instead of --years)")
    parser.add_argument("--no-detection", action="store_true", help="skip timing detection of the new night")
    parser.add_argument("--detect-sample", type=int, help="detect only every k-th run of the new night, this many "
                                                          "runs, and scale the time to the whole night")
    parser.add_argument("--requests", type=int, default=100, help="timed requests per query")
    parser.add_argument("--database-url", help="use this Postgres (filled on the first run, reused afterwards; "
                                               "each run adds two nights) instead of a throwaway one")
    parser.add_argument("--with-hooks", action="store_true", help="serve the default app with its post-ingest hooks")
    parser.add_argument("--queries-only", action="store_true",
                        help="time the queries only: no ingest, no detection, nothing written (a database others "
                             "measure on stays as it is)")
    parser.add_argument("--only", nargs="+", help="time only the HTTP queries whose label contains one of these words")
    args = parser.parse_args(argv)

    from tests.pgcluster import temporary_postgres

    if args.database_url:
        _run(args.database_url, args)
    else:
        with temporary_postgres() as url:
            _run(url, args)
    return 0


def _filled(url: str, args: argparse.Namespace):
    """Generate the history, or describe what an earlier run of this benchmark left in ``url``."""
    import sqlalchemy as sa

    from bench.synthetic_history import Filled
    from service.db import session_scope
    from service.settings import Settings

    with session_scope(Settings(database_url=url)) as session:
        exists = sa.inspect(session.connection()).has_table("runs")
        first, last, runs = session.execute(sa.text(
            "SELECT min(night), max(night), count(*) FROM runs WHERE command LIKE 'SYNTHETIC%'")).one() \
            if exists else (None, None, 0)
        results = session.scalar(sa.text("SELECT count(*) FROM results")) if runs else 0
    if runs:
        print(f"reusing SYNTHETIC history in {url}")
        return Filled(runs=runs, results=results, first_night=first, last_night=last, seconds=0.0)
    print(f"SYNTHETIC history: {args.rows or f'{args.years} years'}, 3 suites x {args.models} models x "
          f"{args.configs} configurations")
    return fill_database(url, years=args.years, n_models=args.models, n_configs=args.configs,
                         rows=None if args.rows is None else int(args.rows))


def _cpu_check() -> str:
    """How busy the (shared) machine is: the same loop on an idle modern core takes ~0.15-0.2 s."""
    started = time.perf_counter()
    sum(range(10**7))
    return f"CPU check: sum(range(10**7)) took {time.perf_counter() - started:.2f} s; load average " \
           f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def _run(url: str, args: argparse.Namespace) -> None:
    rng = random.Random(0)
    print(_cpu_check())
    filled = _filled(url, args)
    print(f"database: {filled.runs:,} runs, {filled.results:,} result rows "
          f"(nights {filled.first_night} .. {filled.last_night}); generated in {filled.seconds:.0f} s")

    port = _free_port()
    env = {**os.environ, "DATABASE_URL": url, "PERFDASH_INGEST_TOKENS": TOKEN,
           "PERFDASH_MAX_UPLOAD_BYTES": str(64 * 1024 * 1024)}
    factory = "service.app:app_from_environment" if args.with_hooks else "bench.api_latency:bench_app"
    server = subprocess.Popen([sys.executable, "-m", "uvicorn", factory, "--factory",
                               "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"], env=env)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("uvicorn did not start")
                time.sleep(0.2)
            _report(client, url, filled, args, rng, server.pid)
    finally:
        server.terminate()
        server.wait(60)


def _report(client: httpx.Client, url: str, filled, args: argparse.Namespace, rng: random.Random,
            server_pid: int) -> None:
    nightly = [sc for sc in configurations(args.configs) if not sc.releases_only]
    if not args.queries_only:
        _ingest(client, url, filled, args, server_pid)
    _queries(client, url, filled, args, rng, server_pid, nightly)


def _ingest(client: httpx.Client, url: str, filled, args: argparse.Namespace, server_pid: int) -> None:
    new_night = filled.last_night + timedelta(days=1)
    uploads = _night_uploads(new_night, args.models, args.configs)
    nightly = [sc for sc in configurations(args.configs) if not sc.releases_only]
    rows = args.models * len(nightly)
    size_kb = sum(len(v) for u in uploads for v in u.values()) / 1024
    night_s = again_s = 0.0
    created: list[int] = []
    ingest_cpu = _process_cpu_ms(server_pid)
    for upload in uploads:
        elapsed, body = _post(client, upload)
        night_s += elapsed
        created += [r["run_id"] for r in body["runs"] if r["created"]]
    assert len(created) == len(nightly), len(created)
    ingest_cpu = _process_cpu_ms(server_pid) - ingest_cpu
    sample = sorted(created)
    if args.detect_sample and args.detect_sample < len(sample):
        sample = sample[::-(-len(sample) // args.detect_sample)]
    detect_s, findings = (None, 0) if args.no_detection else _detect_night(url, sample)
    for upload in uploads:
        elapsed, body = _post(client, upload)
        again_s += elapsed
        assert not any(r["created"] for r in body["runs"])
    next_night = new_night + timedelta(days=1)
    split_s = 0.0
    runs_posted = 0
    for upload in _night_uploads(next_night, args.models, args.configs):
        for stem in sorted({name.rsplit("_", 1)[0] for name in upload}):
            elapsed, _ = _post(client, {k: v for k, v in upload.items() if k.startswith(stem + "_")})
            split_s += elapsed
            runs_posted += 1

    print()
    print(f"ingest over HTTP (one night = {len(nightly)} runs, {rows:,} rows, {size_kb:.0f} kB of files)")
    target_s = NIGHT_TARGET_S if len(nightly) <= 18 else MATRIX_NIGHT_TARGET_S
    print(f"  new night in {len(uploads)} uploads            {night_s:6.2f} s   target < {target_s:.0f} s   "
          f"{'OK' if night_s < target_s else 'MISSED'}; the app's CPU {ingest_cpu / 1000:.2f} s")
    print(f"  same uploads again (idempotent) {again_s:6.2f} s")
    print(f"  next night as {runs_posted} uploads (1 run each) {split_s:6.2f} s total")
    if detect_s is not None:
        night_detect_s = detect_s * len(created) / len(sample)
        scaled = "" if len(sample) == len(created) else f" (measured on {len(sample)} of them: {detect_s:.2f} s)"
        print(f"  detection of the new night ({len(created)} runs, incremental, as the post-ingest hook) "
              f"{night_detect_s:6.2f} s{scaled}, {findings} findings   target < {DETECT_TARGET_S:.0f} s   "
              f"{'OK' if night_detect_s < DETECT_TARGET_S else 'MISSED'}")


def _queries(client: httpx.Client, url: str, filled, args: argparse.Namespace, rng: random.Random, server_pid: int,
             nightly: list) -> None:
    # Inputs for the queries, from the API itself.
    configurations_list = client.get("/api/v1/configurations").json()
    runs_by_configuration = {
        c["id"]: [r["id"] for r in client.get("/api/v1/runs", params={"configuration_id": c["id"],
                                                                      "limit": 1000}).json()]
        for c in configurations_list}
    series_ids = [s["id"] for c in configurations_list
                  for s in client.get("/api/v1/series", params={"configuration_id": c["id"]}).json()]
    nights = [filled.first_night + timedelta(days=i)
              for i in range((filled.last_night - filled.first_night).days + 1)]

    def summary() -> None:
        client.get("/api/v1/summary", params={"night": rng.choice(nights).isoformat()}).raise_for_status()

    def latest_summary() -> None:
        client.get("/api/v1/summary").raise_for_status()

    def summary_with_warnings() -> None:
        client.get("/api/v1/summary", params={"night": rng.choice(nights).isoformat(),
                                              "warnings": "true"}).raise_for_status()

    def model_history() -> None:
        client.get(f"/api/v1/series/{rng.choice(series_ids)}/history").raise_for_status()

    def model_history_90d() -> None:
        client.get(f"/api/v1/series/{rng.choice(series_ids)}/history",
                   params={"since": (filled.last_night - timedelta(days=90)).isoformat()}).raise_for_status()

    def suite_history() -> None:
        client.get(f"/api/v1/configurations/{rng.choice(configurations_list)['id']}/history").raise_for_status()

    compared = [c for c in configurations_list if len(runs_by_configuration[c["id"]]) > 1]

    def compare() -> None:
        runs = runs_by_configuration[rng.choice(compared)["id"]]
        i = rng.randrange(1, len(runs))
        client.get("/api/v1/compare/runs", params={"base": runs[i], "new": runs[i - 1]}).raise_for_status()

    def runs_list() -> None:
        since = rng.choice(nights)
        client.get("/api/v1/runs", params={"device": "cuda", "since": since.isoformat(),
                                           "until": (since + timedelta(days=30)).isoformat()}).raise_for_status()

    deep = min(DEEP_OFFSET, max(0, filled.runs - 200))
    (deep_run,) = client.get("/api/v1/runs", params={"offset": deep - 1, "limit": 1}).json()

    def runs_deep_offset() -> None:
        client.get("/api/v1/runs", params={"offset": deep, "limit": 100}).raise_for_status()

    def runs_deep_keyset() -> None:
        client.get("/api/v1/runs", params={"after": deep_run["id"], "limit": 100}).raise_for_status()

    http_cases = [(f"summary of a night ({len(nightly)} rows + previous)", summary),
                  ("summary, latest night", latest_summary),
                  ("summary of a night, warnings listed", summary_with_warnings),
                  ("model history, all nights", model_history), ("model history, last 90 days", model_history_90d),
                  ("suite summary history, all nights", suite_history), ("compare two runs", compare),
                  ("runs list, 30 days, filtered", runs_list),
                  (f"runs list, 100 after the first {deep:,} (offset)", runs_deep_offset),
                  (f"runs list, 100 after the first {deep:,} (keyset)", runs_deep_keyset)]
    print()
    print(f"queries over HTTP ({args.requests} requests each after 5 warm-up; ms)")
    print(f"  {'query':42s} {'p50':>7s} {'p95':>7s} {'cpu':>7s}  target p95 < {QUERY_P95_TARGET_MS:.0f} ms "
          "(cpu: the app's mean CPU ms per request, Postgres not included)")
    for label, call in http_cases:
        if args.only and not any(word in label for word in args.only):
            continue
        cpu: list[float] = []
        p50, p95 = _percentiles(_time_calls(call, args.requests, cpu_of=server_pid, cpu_out=cpu))
        print(f"  {label:42s} {p50:7.1f} {p95:7.1f} {sum(cpu) / len(cpu):7.1f}  "
              f"{'OK' if p95 < QUERY_P95_TARGET_MS else 'MISSED'}")

    _in_process(url, filled, configurations_list, runs_by_configuration, series_ids, nights, args, rng)


def _in_process(url, filled, configurations_list, runs_by_configuration, series_ids, nights, args, rng) -> None:
    import gc

    import sqlalchemy as sa

    from service.db import session_scope
    from service.queries.compare import compare_runs
    from service.queries.history import model_history, suite_history
    from service.queries.summary import night_summary
    from service.settings import Settings

    with session_scope(Settings(database_url=url)) as session:
        def fresh(call: Callable[[], object]) -> Callable[[], object]:
            def wrapped() -> object:
                session.expunge_all()  # no identity-map hits between calls
                return call()
            return wrapped

        def compare_call() -> object:
            runs = runs_by_configuration[rng.choice([c for c in configurations_list
                                                     if len(runs_by_configuration[c["id"]]) > 1])["id"]]
            i = rng.randrange(1, len(runs))
            return compare_runs(session, runs[i], runs[i - 1])

        cases = [
            ("night_summary", fresh(lambda: night_summary(session, night=rng.choice(nights)))),
            ("model_history, all nights", fresh(lambda: model_history(session, rng.choice(series_ids)))),
            ("suite_history, all nights",
             fresh(lambda: suite_history(session, rng.choice(configurations_list)["id"]))),
            ("compare_runs", fresh(compare_call)),
        ]
        # As the app does at startup (service/app.py): what this process holds by now would otherwise be walked by
        # every full collection and show up as ~90 ms stalls that the served app does not have.
        gc.collect()
        gc.freeze()
        print()
        print("query functions in-process (what the pages call; ms; startup objects frozen as in the app)")
        for label, call in cases:
            p50, p95 = _percentiles(_time_calls(call, args.requests))
            print(f"  {label:42s} {p50:7.1f} {p95:7.1f}")
        results_bytes, database_bytes, n_results = session.execute(sa.text(
            "SELECT pg_total_relation_size('results'), pg_database_size(current_database()), "
            "(SELECT count(*) FROM results)")).one()
        print(f"\nresults table with its indexes: {results_bytes / 2**20:,.0f} MiB; whole database "
              f"{database_bytes / 2**20:,.0f} MiB for {n_results:,} results "
              f"({database_bytes / 2**20 / (n_results / 1e6):,.0f} MiB per million results)")
    print(_cpu_check())


if __name__ == "__main__":
    sys.exit(main())
