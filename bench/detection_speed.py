"""What detection of one night of PyTorch's matrix costs (issue 31: a whole night detected in < 60 s on 2 cores).

A night of the matrix is 276 runs (92 configurations x 3 suites) of 180 models, and the post-ingest hook detects
each run (service.detection.night.DetectionHook, incremental; a night's runs on every core): every series and metric
the registry marks detected, 720 a run, each searched over its newest window (60 nights) with its noise from the
last 120.

Three measurements, as CPU seconds of this process (the machine is shared: wall time is printed too, with the
load average, but CPU is what the load cannot inflate):

- the search alone (default): ``--series`` synthetic series of ``--nights`` nights (bench/detection.py's generator:
  2 % and 5 % Gaussian noise, single-night spikes, a third with a 5 % step somewhere), each searched as the hook does
  (the last window; all at once by detect_change_points_many where the code has it, else detect_change_points one
  by one), ``--repeat`` times; per run and scaled to ``--runs`` runs a night;
- ``--database``: the whole detector (reads, search, stored findings) on a throwaway Postgres (tests/pgcluster.py)
  filled by bench/synthetic_history.py with ``--configs`` configurations x 3 suites x ``--models`` models over
  ``--nights`` nights; detect_run(incremental=True) on each run of the last ``--timed-nights`` nights, after the
  ``--warm-nights`` before them (untimed), in a transaction rolled back afterwards. ``--database-url``: a database
  filled already. ``--profile`` prints where the CPU went (cProfile, top functions by own time);
- ``--database --database-url URL --whole-night``: a whole night end to end as `perfdash detect` and the hook run it
  (service.detection.night.detect_runs: every run of the last night, the configurations spread over processes),
  wall and CPU, one process against ``--workers`` (default: every core), ``--repeat`` times alternately, each run's
  detection rolled back so the same night is detected each time; the ``--warm-nights`` before it are detected first
  and COMMITTED (a database of your own: the night is steady only when the nights before it were detected). CPU is
  the sum of the runs' detection CPU in whichever process detected them (a worker's start, ~1.5 s of imports, is in
  the wall figure only), and this process's own.

Run from the repository root: ``.venv/bin/python -m bench.detection_speed [--database] [--profile]``. Figures (and
the figures before issue 31's speed work, from the same script over the older code) are in bench/README.md, "Issue
31".
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import time
from collections.abc import Callable

import numpy as np

TARGET_S = 60.0  # issue 31: a night of the matrix detected in < 60 s on these 2 cores
NIGHT_RUNS = 276  # --configs 92 x 3 suites: the matrix of bench/synthetic_history.py, PyTorch's size
SERIES_PER_RUN = 720  # 180 models x 4 detected metrics


def _machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor())
    return f"{cpu}, {os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"


def _timed(work: Callable[[], int], profile: bool) -> tuple[float, float, int]:
    """(CPU s, wall s, what work returned); with ``profile``, the top of its cProfile by own time is printed."""
    profiler = cProfile.Profile() if profile else None
    cpu, wall = time.process_time(), time.perf_counter()
    if profiler is not None:
        profiler.enable()
    out = work()
    if profiler is not None:
        profiler.disable()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
    return cpu, wall, out


def search_only(series: int, nights: int, repeat: int, seed: int, profile: bool) -> tuple[float, float]:
    """CPU and wall seconds per ``series`` searches (the newest window of each), best of ``repeat``."""
    from bench.detection import make_series
    from service.detection import changepoint
    from service.detection.changepoint import DetectionConfig, detect_change_points

    rng = np.random.default_rng(seed)
    corpus = [make_series(rng, nights, (0.02, 0.05)[i % 2], () if i % 3 else (0.05,)).values for i in range(series)]
    config = DetectionConfig()
    many = getattr(changepoint, "detect_change_points_many", None)  # a run's series at once (absent before it)

    def work() -> int:
        if many is not None:
            return sum(map(len, many([changepoint.Search(v, max(0, len(v) - config.window), config)
                                      for v in corpus])))
        return sum(len(detect_change_points(v, baseline_start=max(0, len(v) - config.window), config=config))
                   for v in corpus)

    best = None
    for i in range(repeat):
        cpu, wall, found = _timed(work, profile and i == repeat - 1)
        print(f"  pass {i + 1}: {cpu:.3f} s CPU, {wall:.3f} s wall, {found} change points")
        best = (cpu, wall) if best is None or cpu < best[0] else best
    assert best is not None
    return best


def with_database(configs: int, models: int, nights: int, profile: bool, url: str | None, warm: int,
                  timed: int, max_runs: int | None = None) -> tuple[float, float, int]:
    """CPU and wall seconds of detect_run over the last night's runs, and how many runs that was. ``url``: a database
    bench/synthetic_history.py filled already (else a throwaway one, filled here)."""
    from tests.pgcluster import temporary_postgres

    if url is not None:
        return _detect_last_night(url, profile, warm, timed, max_runs)
    from bench.synthetic_history import fill_database

    with temporary_postgres() as started:
        filled = fill_database(started, n_configs=configs, n_models=models, rows=nights * configs * 3 * models,
                               progress=False)
        print(f"  filled: {filled.runs} runs, {filled.results} results, {filled.first_night} .. {filled.last_night}")
        return _detect_last_night(started, profile, warm, timed)


def _detect_last_night(url: str, profile: bool, warm: int, timed: int,
                       max_runs: int | None = None) -> tuple[float, float, int]:
    """Detection as the hook runs it, night after night: the ``warm`` nights before the last ``timed`` ones first
    (untimed: the first detection over a history that was never detected finds every step in its window, which a
    steady night does not), then the ``timed`` nights; all in one transaction, rolled back."""
    import sqlalchemy as sa

    from service.db import make_engine, make_session_factory
    from service.detection.detector import detect_run
    from service.models import Run

    engine = make_engine(url)
    with make_session_factory(engine)() as session:
        nights = list(session.scalars(sa.select(Run.night).distinct().order_by(Run.night.desc()).limit(warm + timed)))

        def runs_of(chosen: list) -> list[int]:
            return list(session.scalars(sa.select(Run.id).where(Run.night.in_(chosen)).order_by(Run.night, Run.id)))

        for run_id in runs_of(nights[timed:]):
            detect_run(session, run_id, incremental=True)
        runs = runs_of(nights[:timed])[:max_runs]

        def work() -> int:
            return sum(detect_run(session, run_id, incremental=True).count for run_id in runs)

        cpu, wall, found = _timed(work, profile)
        session.rollback()
    engine.dispose()
    print(f"  {found} findings in {len(runs)} runs of the last {timed} nights, after {warm} nights detected untimed")
    return cpu, wall, len(runs)


def whole_night(url: str, warm: int, repeat: int, workers: int | None, max_runs: int | None = None) -> None:
    """A night end to end, one process against ``workers``; prints each pass and the figure against the target."""
    import sqlalchemy as sa

    from service.db import make_engine, make_session_factory
    from service.detection.night import default_workers, detect_runs
    from service.models import Run
    from service.queries.order import run_order

    workers = workers or default_workers()
    engine = make_engine(url)
    with make_session_factory(engine)() as session:
        nights = sorted(session.scalars(sa.select(Run.night).distinct().order_by(Run.night.desc()).limit(warm + 1)))

        def runs_of(night) -> list[int]:
            return list(session.scalars(sa.select(Run.id).where(Run.night == night).order_by(*run_order())))

        for night in nights[:-1]:
            runs = runs_of(night)
            session.commit()
            wall = time.perf_counter()
            outcomes = detect_runs(session, runs, incremental=True, workers=workers)
            print(f"  warm night {night}: {len(runs)} runs detected and committed on {workers} processes in "
                  f"{time.perf_counter() - wall:.1f} s wall, {sum(o.cpu_s for o in outcomes):.1f} s CPU, "
                  f"{sum(len(o.new_findings) for o in outcomes)} findings")
        runs = runs_of(nights[-1])[:max_runs]
        session.commit()
        print(f"  timed: night {nights[-1]}, {len(runs)} runs (each run's detection rolled back)")
        best: dict[int, float] = {}
        for i in range(repeat):
            for count in (1, workers):
                load = os.getloadavg()[0]
                cpu, wall = time.process_time(), time.perf_counter()
                outcomes = detect_runs(session, runs, incremental=True, workers=count, keep=False)
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                errors = [o for o in outcomes if o.error]
                assert not errors, errors[:3]
                detected = sum(o.cpu_s for o in outcomes)
                total = detected if count == 1 else detected + cpu  # one process: its CPU is the runs'
                best[count] = min(best.get(count, wall), wall)
                print(f"  pass {i + 1}, {count} process{'es' if count > 1 else ''}: {wall:.1f} s wall, "
                      f"{total:.1f} s CPU ({detected:.1f} s detecting, {1000 * detected / len(runs):.0f} ms a run), "
                      f"{sum(len(o.new_findings) for o in outcomes)} findings, load {load:.2f} before")
    engine.dispose()
    for count, wall in best.items():
        processes = f"{count} process{'es' if count > 1 else ''}"
        if max_runs is None:
            verdict = "within" if wall < TARGET_S else "over"
            print(f"a night of {len(runs)} runs on {processes}: {wall:.1f} s wall (best of {repeat}), {verdict} the "
                  f"{TARGET_S:.0f} s target")
        else:  # a sample: no verdict, the figure scaled
            print(f"{len(runs)} runs on {processes}: {wall:.1f} s wall (best of {repeat}); {NIGHT_RUNS} runs at that "
                  f"pace: {wall * NIGHT_RUNS / len(runs):.0f} s, against the {TARGET_S:.0f} s target")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=SERIES_PER_RUN, help="series searched (a run's: 720)")
    parser.add_argument("--nights", type=int, default=120, help="nights of history per series (default 120)")
    parser.add_argument("--repeat", type=int, default=3, help="passes over the series; the best is kept")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--runs", type=int, default=NIGHT_RUNS, help="runs a night, to scale to (276)")
    parser.add_argument("--database", action="store_true", help="the whole detector on a throwaway Postgres")
    parser.add_argument("--configs", type=int, default=1, help="with --database: configurations (x 3 suites)")
    parser.add_argument("--models", type=int, default=180, help="with --database: models per suite")
    parser.add_argument("--database-url", help="with --database: a database filled already (SQLAlchemy URL)")
    parser.add_argument("--warm-nights", type=int, default=5, help="with --database: nights detected untimed first")
    parser.add_argument("--timed-nights", type=int, default=2, help="with --database: the last nights, timed")
    parser.add_argument("--profile", action="store_true", help="print the top of a cProfile of the (last) pass")
    parser.add_argument("--whole-night", action="store_true",
                        help="with --database-url: the last night end to end, 1 process against --workers")
    parser.add_argument("--workers", type=int, help="with --whole-night: processes (default: every core)")
    parser.add_argument("--max-runs", type=int, help="with --database: only the first N timed runs (a sample)")
    args = parser.parse_args()
    print(f"machine: {_machine()}")
    if args.whole_night:
        if not args.database_url:
            parser.error("--whole-night needs --database-url (a database it may write the warm nights to)")
        whole_night(args.database_url, args.warm_nights, args.repeat, args.workers, args.max_runs)
        print(f"after: load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0
    if args.database:
        cpu, wall, runs = with_database(args.configs, args.models, args.nights, args.profile, args.database_url,
                                       args.warm_nights, args.timed_nights, args.max_runs)
        per_run_cpu, per_run_wall = cpu / runs, wall / runs
        what = f"detect_run over {runs} runs" + ("" if args.database_url else
                                                 f" of {args.models} models, {args.nights} nights of history")
    else:
        cpu, wall = search_only(args.series, args.nights, args.repeat, args.seed, args.profile)
        scale = SERIES_PER_RUN / args.series
        per_run_cpu, per_run_wall = cpu * scale, wall * scale
        what = f"the search over {args.series} series of {args.nights} nights (best of {args.repeat})"
    print(f"{what}: {cpu:.3f} s CPU, {wall:.3f} s wall")
    print(f"per run: {1000 * per_run_cpu:.1f} ms CPU ({1000 * per_run_wall:.1f} ms wall); a night of {args.runs} runs: "
          f"{per_run_cpu * args.runs:.1f} s CPU of one core ({per_run_wall * args.runs:.1f} s wall at this load)")
    print(f"after: load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
