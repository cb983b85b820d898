"""Benchmark the dashboard pages on three years of synthetic nightly history in Postgres.

Prints, per page, the server time (the app's Server-Timing header: queries + rendering) p50/p95 over ``--repeat``
requests after a warm-up, the client-side wall time on loopback beside it, and the time until the home page is
rendered in headless Chromium (navigation start to the load event, which follows the first paint of a page without
charts). Targets (issue 4): p95 < 150 ms per page, home rendered < 1 s. Screenshots of every page go to
bench/out/pages/ for a human look.

The history comes from the service benchmark's generator (bench/synthetic_history.py) in a throwaway Postgres, or
from ``--database-url`` when one is already filled. It carries torch versions (releases and nightlies), training
throughput and a DDP scaling experiment, for the Training page and the Releases view (issue 15; their figures, and
the latest run of all pages: bench/README.md).

Run from the repository root as a module:
``.venv/bin/python -m bench.pages [--years 3] [--repeat 40] [--database-url URL]``; PyTorch's whole matrix
(issue 31): ``--configs 92 --models 180 --rows 30e6`` (bench/synthetic_history.py; figures in bench/README.md).
``--only releases --only training`` times only the pages whose name starts with one of them.

Last printed (2026-11-23 14:31 UTC, this 2-core VM at load average 2.0-2.9: another job used one core; run right
after bench/api_latency.py on the database it filled and added two nights to,
``.venv/bin/python -m bench.pages --database-url URL``), SYNTHETIC history of 18 configurations, 19,746 runs,
2,700 series, 2,961,900 results; cpu50 is this process's CPU per request, app + client, Postgres not included::

    page                        p50      p95   wall50   wall95    cpu50     KiB
    home                       10.8     13.4     12.7     15.2     10.9      26  ok
    suite                      19.2     32.3     21.4     36.1     18.0      96  ok
    model (1 year)             12.1     16.5     13.6     18.1      9.9      65  ok
    model (all years)          21.6     27.3     23.6     29.1     18.6     119  ok
    trends (90 days)           10.5     12.1     12.1     14.5      9.7      38  ok
    trends (1 group, all)      28.4     32.9     30.0     34.7     14.3      59  ok
    trends (1 suite, all)      26.8     34.8     28.5     36.4     13.5      50  ok
    compare (prev night)       19.5    119.8     21.4    121.3     19.3     138  ok
    compare (3 years)          19.9    114.0     21.8    116.1     19.6     153  ok
    compare (commits)          19.9     29.0     21.7     30.7     18.7     138  ok
    runs                        7.5      8.0      8.8      9.4      7.5      53  ok
    runs (filtered)             9.3     10.5     10.8     11.9      8.4      52  ok
    home rendered in headless Chromium (navigation start to load event, 7 cold loads): median 132 ms, max 360 ms
    (target < 1000 ms) ok

That run predates the app's gc.freeze at startup (service/app.py); the compare pages' p95 near 115 ms next to a
p50 of 20 ms is the same full-collection stall that the freeze removed from the service's suite history (122 -> 35 ms
p95). An earlier run on the same machine at load average 9.8 printed p95 of 117-617 ms: the figures follow the
machine's load more than the code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import socket
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import sqlalchemy as sa

from service.db import session_scope
from service.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "pages"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
P95_TARGET_MS = 150.0
HOME_TARGET_MS = 1000.0


@dataclass(frozen=True)
class Timing:
    name: str
    path: str
    server_ms: list[float]
    client_ms: list[float]
    cpu_ms: list[float]  # CPU time of this process (app + client) per request: the part a loaded machine can't inflate
    bytes: int

    @staticmethod
    def _pct(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]

    def row(self) -> str:
        p50, p95 = self._pct(self.server_ms, 50), self._pct(self.server_ms, 95)
        verdict = "ok" if p95 < P95_TARGET_MS else "OVER"
        return (f"{self.name:<22} {p50:8.1f} {p95:8.1f} {self._pct(self.client_ms, 50):8.1f} "
                f"{self._pct(self.client_ms, 95):8.1f} {self._pct(self.cpu_ms, 50):8.1f} {self.bytes / 1024:7.0f}  "
                f"{verdict}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(database_url: str) -> Iterator[str]:
    """The real app under uvicorn in a thread on 127.0.0.1."""
    import uvicorn

    from service.app import create_app

    app = create_app(Settings(database_url=database_url), post_ingest_hooks=[])
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the app did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def pick_pages(database_url: str) -> list[tuple[str, str]]:
    """One URL per page kind, chosen on the data: the busiest configuration, its longest series, its latest runs."""
    with session_scope(Settings(database_url=database_url)) as c:
        config_id, suite, backend, variant, device, dtype, mode = c.execute(sa.text(
            "SELECT c.id, c.suite, c.backend, c.variant, c.device, c.dtype, c.mode FROM configurations c "
            "JOIN runs r ON r.configuration_id = c.id GROUP BY c.id ORDER BY count(*) DESC, c.id LIMIT 1")).one()
        new, base = c.execute(sa.text(
            "SELECT id FROM runs WHERE configuration_id = :c ORDER BY night DESC, id DESC LIMIT 2"),
            {"c": config_id}).scalars().all()
        oldest = c.execute(sa.text("SELECT id FROM runs WHERE configuration_id = :c ORDER BY night, id LIMIT 1"),
                           {"c": config_id}).scalar()
        series = c.execute(sa.text("SELECT series_id FROM results WHERE run_id = :r ORDER BY name LIMIT 1"),
                           {"r": new}).scalar()
        first, last = c.execute(sa.text("SELECT min(night), max(night) FROM runs")).one()
        commit = c.execute(sa.text("SELECT torch_git_commit FROM runs WHERE id = :r"), {"r": base}).scalar() or ""
        new_commit = c.execute(sa.text("SELECT torch_git_commit FROM runs WHERE id = :r"), {"r": new}).scalar()
        # a model of a DDP scaling experiment (it also has single-process training runs), else any training one
        trained = c.execute(sa.text(
            "SELECT s.name FROM series s JOIN configurations c ON c.id = s.configuration_id "
            "WHERE c.mode = 'training' ORDER BY c.world_size DESC, s.name LIMIT 1")).scalar()
        versions = c.execute(sa.text("SELECT DISTINCT torch_version FROM runs WHERE torch_version IS NOT NULL")
                             ).scalars().all()
    from service.queries.torch_versions import is_release, ordered

    releases = [v for v in ordered(versions) if is_release(v)]
    backend_variant = f"{backend}_{variant}" if variant else backend
    return [
        ("home", "/"),
        ("suite", f"/suite/{new}"),
        ("model (1 year)", f"/model/{series}"),
        ("model (all years)", f"/model/{series}?from={first}&to={last}"),
        ("trends (90 days)", f"/trends?device={device}&dtype={dtype}&mode={mode}"),
        ("trends (1 group, all)", f"/trends?device={device}&dtype={dtype}&mode={mode}&from={first}&to={last}"),
        ("trends (1 suite, all)", f"/trends?suite={suite}&backend={backend_variant}&from={first}&to={last}"),
        ("compare (prev night)", f"/compare?base={base}&new={new}"),
        ("compare (3 years)", f"/compare?base={oldest}&new={new}"),
        ("compare (commits)",
         f"/compare?config={config_id}&base_commit={commit[:10]}&new_commit={(new_commit or '')[:10]}"),
        ("runs", "/runs"),
        ("runs (filtered)", f"/runs?suite={suite}&device={device}&page=3"),
        ("training", f"/training?model={trained}"),
        ("training (nightlies)", f"/training?model={trained}&nightlies=true"),
        ("releases (default)", "/releases"),
        ("releases (2 releases)", f"/releases?base={releases[-2] if len(releases) > 1 else ''}&new="
                                  f"{releases[-1] if releases else ''}"),
        ("releases (1st..latest)", f"/releases?base={releases[0] if releases else ''}&new=latest"),
        ("releases (1 suite)", f"/releases?base={releases[-1] if releases else ''}&new=latest&suite={suite}"),
    ]


def time_pages(base_url: str, pages: list[tuple[str, str]], repeat: int, warmup: int) -> list[Timing]:
    out = []
    with httpx.Client(base_url=base_url, timeout=60, follow_redirects=True) as client:
        for name, path in pages:
            for _ in range(warmup):
                client.get(path).raise_for_status()
            server, wall, cpu = [], [], []
            size = 0
            for _ in range(repeat):
                started, cpu_started = time.perf_counter(), time.process_time()
                response = client.get(path)
                wall.append((time.perf_counter() - started) * 1000)
                cpu.append((time.process_time() - cpu_started) * 1000)
                response.raise_for_status()
                server.append(float(response.headers["server-timing"].split("dur=")[1]))
                size = len(response.content)
            out.append(Timing(name, path, server, wall, cpu, size))
    return out


def browser_checks(base_url: str, pages: list[tuple[str, str]], runs: int) -> list[float]:
    """Home-page render times in headless Chromium (fresh context each time: no cache); screenshots of all pages."""
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    times = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for _ in range(runs):
                context = browser.new_context(viewport={"width": 1400, "height": 900})
                page = context.new_page()
                page.goto(base_url + "/", wait_until="load")
                times.append(page.evaluate(
                    "() => { const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd; }"))
                context.close()
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            page = context.new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            for name, path in pages:
                page.goto(base_url + path, wait_until="networkidle")
                slug = "".join(ch if ch.isalnum() else "_" for ch in name).strip("_")
                page.screenshot(path=str(OUT / f"{slug}.png"), full_page=False)
            if errors:
                print("browser errors:", *errors, sep="\n  ")
            context.close()
        finally:
            browser.close()
    return times


def fill_history(database_url: str, years: float, seed: int, n_models: int = 150, n_configs: int = 6,
                 rows: int | None = None) -> None:
    """Years (or ``rows`` results) of SYNTHETIC nights from the service benchmark's generator
    (bench/synthetic_history.py)."""
    sys.path.insert(0, str(ROOT))
    generator = importlib.import_module("bench.synthetic_history")
    filled = generator.fill_database(database_url, years=years, seed=seed, n_models=n_models, n_configs=n_configs,
                                     rows=rows)
    print(f"SYNTHETIC history: {filled.runs:,} runs, {filled.results:,} result rows, "
          f"nights {filled.first_night} .. {filled.last_night}, generated in {filled.seconds:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="an already filled database (default: a temporary Postgres)")
    parser.add_argument("--years", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--models", type=int, default=150, help="synthetic models per suite")
    parser.add_argument("--configs", type=int, default=6, help="configurations per suite (bench.synthetic_history's "
                                                               "matrix; 92 with --models 180: PyTorch's nightly)")
    parser.add_argument("--rows", type=float, help="result rows of history (e.g. 30e6) instead of --years")
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--browser-runs", type=int, default=7)
    parser.add_argument("--only", action="append", default=[], metavar="PREFIX",
                        help="time only the pages whose name starts with PREFIX (repeatable; e.g. releases, training)")
    args = parser.parse_args()

    with _database(args) as url:
        with session_scope(Settings(database_url=url)) as session:
            counts = {t: session.scalar(sa.text(f"SELECT count(*) FROM {t}"))
                      for t in ("configurations", "runs", "series", "results")}
        print("history:", ", ".join(f"{v} {k}" for k, v in counts.items()))
        # The machine is shared: a high load average inflates every wall-clock figure below.
        print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        pages = [(name, path) for name, path in pick_pages(url)
                 if not args.only or any(name.startswith(prefix) for prefix in args.only)]
        with serve(url) as base_url:
            timings = time_pages(base_url, pages, args.repeat, args.warmup)
            home = browser_checks(base_url, pages, args.browser_runs)
    print(f"\nserver time per page, ms ({args.repeat} requests after {args.warmup} warm-up; target p95 < "
          f"{P95_TARGET_MS:.0f} ms)")
    print(f"{'page':<22} {'p50':>8} {'p95':>8} {'wall50':>8} {'wall95':>8} {'cpu50':>8} {'KiB':>7}")
    for timing in timings:
        print(timing.row())
    median = statistics.median(home)
    print(f"\nhome rendered in headless Chromium (navigation start to load event, {len(home)} cold loads): "
          f"median {median:.0f} ms, max {max(home):.0f} ms (target < {HOME_TARGET_MS:.0f} ms) "
          f"{'ok' if median < HOME_TARGET_MS else 'OVER'}")
    print(f"screenshots: {OUT}")
    print(f"load average at end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


@contextmanager
def _database(args: argparse.Namespace) -> Iterator[str]:
    if args.database_url:
        yield args.database_url
        return
    from tests.pgcluster import temporary_postgres

    with temporary_postgres() as url:
        fill_history(url, args.years, args.seed, args.models, args.configs,  # migrates, fills, VACUUM ANALYZE
                     None if args.rows is None else int(args.rows))
        yield url


if __name__ == "__main__":
    sys.exit(main())
