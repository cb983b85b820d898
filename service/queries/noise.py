"""Each series' between-run noise and the smallest change the alert policy can catch in it, read when a page or the
API asks (issue 39 item 3): the model page, the suite page, the summary's flag, findings and the JSON API.

The maths is perfdash/noise.py; which metrics get it, perfdash/metric_registry.py (``NOISE_METRICS``). This module
picks the runs: a series' newest ``NOISE_WINDOW`` passing runs (before a finding's change, for a finding), and of
those the newest stretch whose generated code (issue 28's digest) is the newest run's, where the runs carry one; a
series without fingerprints uses its own latest runs. The torch build is not required to be unchanged: a nightly
moves it every night, which would leave no series an estimate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import sqlalchemy as sa
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from perfdash.metric_registry import NOISE_METRICS, ResultMetric, result_metric
from perfdash.noise import CATCH_TARGET, MIN_RUNS, SeriesNoise, many_series_noise
from service.models import Finding, GeneratedCode, Result, Run, Series
from service.queries.filters import ConfigFilter
from service.queries.order import earlier, latest_run_ids, run_order

# changepoint.DetectionConfig.window: the points detection looks at once.
NOISE_WINDOW = 60
# changepoint.DetectionConfig.p_value_max: the reads may not import detection (a layer above them);
# tests/service/test_noise_reads.py pins the two equal.
ALERT_P_VALUE = 1.5e-3


class NoiseBasis(StrEnum):
    UNCHANGED_CODE = "unchanged_code"  # runs whose generated code is the newest run's
    HISTORY = "history"  # the series' latest runs: no generated-code fingerprint to tell


def catch_target(metric: ResultMetric) -> float:
    """The change a series must be able to catch: 5 %, or the metric's minimum effect where the policy wants more
    (compile time's 10 %: smaller changes are no alerts by design, not noise)."""
    return max(CATCH_TARGET, metric.min_effect)


class NoiseOut(BaseModel):
    """One metric's noise in one series; the figures are null with fewer than ``min_runs`` runs."""

    metric: str
    runs: int = Field(description="the runs the estimate is based on")
    basis: NoiseBasis = Field(description="unchanged_code: the newest runs of the newest run's generated code; "
                                          "history: the series' latest runs (no generated-code fingerprint)")
    min_runs: int = MIN_RUNS
    robust_cv: float | None = Field(description="between-run noise, relative (0.03 = 3 %): 1.4826 x MAD of the "
                                                "log values; null: not enough runs")
    minimum_detectable_effect: float | None = Field(
        description="the smallest relative change the alert policy catches (80 % power); null: not enough runs")
    catch_target: float = Field(description="the change the series must be able to catch (5 %, or the metric's "
                                            "minimum effect where larger)")
    catches_target: bool | None = Field(description="false: too noisy to catch catch_target; null: not enough runs")

    @classmethod
    def of(cls, metric: ResultMetric, noise: SeriesNoise | None, runs: int, basis: NoiseBasis) -> NoiseOut:
        target = catch_target(metric)
        return cls(metric=metric.name, runs=runs, basis=basis,
                   robust_cv=noise.robust_cv if noise else None,
                   minimum_detectable_effect=noise.minimum_detectable_effect if noise else None,
                   catch_target=target, catches_target=noise.catches(target) if noise else None)


@dataclass(frozen=True, slots=True)
class SeriesFigures:
    """One series' noise estimate per metric (None: too few runs), the runs each is based on, and which runs those
    are; the API shapes (NoiseOut) are made when asked for, since a summary flags few of many series."""

    series_id: int
    name: str
    basis: NoiseBasis
    estimates: dict[str, SeriesNoise | None]
    runs: dict[str, int]

    def of(self, metric: str) -> NoiseOut | None:
        if metric not in self.estimates:
            return None
        return NoiseOut.of(result_metric(metric), self.estimates[metric], self.runs[metric], self.basis)

    @property
    def noise(self) -> tuple[NoiseOut, ...]:
        return tuple(NoiseOut.of(m, self.estimates[m.name], self.runs[m.name], self.basis) for m in NOISE_METRICS)

    @property
    def too_noisy(self) -> bool:
        """Too noisy to catch its target in some metric (cheap: no API shape made)."""
        return any(not e.catches(catch_target(m)) for m in NOISE_METRICS if (e := self.estimates[m.name]) is not None)

    @property
    def cannot_catch(self) -> tuple[NoiseOut, ...]:
        """The metrics this series is too noisy to catch its target in."""
        return tuple(NoiseOut.of(m, e, self.runs[m.name], self.basis) for m in NOISE_METRICS
                     if (e := self.estimates[m.name]) is not None and not e.catches(catch_target(m)))


# The series' name, not the result's: every column of results read here is in ix_results_series_history
# (models.HISTORY_INCLUDE), so a series' window is an index-only scan like its history.
_COLUMNS = (Result.series_id, Series.name, GeneratedCode.digest, *(getattr(Result, m.name) for m in NOISE_METRICS))


def _with_digest(query: sa.Select) -> sa.Select:
    return (query.join(Series, Series.id == Result.series_id)
            .outerjoin(GeneratedCode, sa.and_(GeneratedCode.run_id == Result.run_id,
                                              GeneratedCode.name == Series.name)))


def _series_window(*where: sa.ColumnElement[bool]) -> sa.Select:
    """The newest NOISE_WINDOW passing results of the series matching ``where`` (one series: its history is
    small), newest first within a series."""
    rank = sa.func.row_number().over(partition_by=Result.series_id, order_by=run_order(newest_first=True))
    ranked = _with_digest(sa.select(*_COLUMNS, rank.label("rank")).join(Run, Run.id == Result.run_id)
                          .where(Result.passed, *where)).subquery()
    return (sa.select(*(c for c in ranked.c if c.key != "rank")).where(ranked.c.rank <= NOISE_WINDOW)
            .order_by(ranked.c.series_id, ranked.c.rank))


def _configuration_window(configuration_ids: list[int], present_in: list[int] | None, up_to: Run | None) -> sa.Select:
    """The passing results of the newest NOISE_WINDOW runs of each configuration (and partition; up to and with the
    run ``up_to``), newest first within a series: the runs are picked first, so a long history is not ranked result
    by result."""
    rank = sa.func.row_number().over(partition_by=(Run.configuration_id, Run.partition_id, Run.total_partitions),
                                     order_by=run_order(newest_first=True))
    recent = (sa.select(Run.id, Run.night, Run.started_at, rank.label("rank"))
              .where(Run.configuration_id.in_(configuration_ids),
                     *([earlier(Run, up_to, or_same=True)] if up_to is not None else [])).subquery())
    query = _with_digest(sa.select(*_COLUMNS).join(recent, recent.c.id == Result.run_id)
                         .where(recent.c.rank <= NOISE_WINDOW, Result.passed))
    if present_in is not None:
        query = query.where(Result.series_id.in_(sa.select(Result.series_id).where(Result.run_id.in_(present_in))))
    return query.order_by(Result.series_id, *run_order(recent.c, newest_first=True))


def _kept(digests: Sequence[str | None], start: int, end: int) -> tuple[int, NoiseBasis]:
    """The end of the runs of one series' window (rows start..end, newest first) that count: the newest stretch of
    the newest run's generated code, or all of them where the newest run has no fingerprint."""
    newest = digests[start]
    if newest is None:
        return end, NoiseBasis.HISTORY
    stop = next((i for i in range(start + 1, end) if digests[i] != newest), end)
    return stop, NoiseBasis.UNCHANGED_CODE


def _read(session: Session, query: sa.Select) -> dict[int, SeriesFigures]:
    """series id -> its figures, every series and metric computed at once (many_series_noise: a suite page's
    hundreds of series in a few scipy calls); the rows are taken column by column, not row by row."""
    rows = session.execute(query).all()
    if not rows:
        return {}
    series_ids, names, digests, *values = zip(*rows, strict=True)
    ids = np.asarray(series_ids)
    starts = [0, *(np.flatnonzero(ids[1:] != ids[:-1]) + 1).tolist()]
    windows = [(start, *_kept(digests, start, end)) for start, end in zip(starts, [*starts[1:], len(ids)],
                                                                           strict=True)]
    estimates: list[dict[str, SeriesNoise | None]] = [{} for _ in windows]
    runs: list[dict[str, int]] = [{} for _ in windows]
    for metric, column in zip(NOISE_METRICS, values, strict=True):
        numbers = np.asarray(column, dtype=float)  # None: nan, which no "> 0" keeps
        kept = [(part := numbers[start:stop])[part > 0] for start, stop, _ in windows]
        found = many_series_noise(kept, min_effect=metric.min_effect, p_value=ALERT_P_VALUE)
        for index, (series_values, estimate) in enumerate(zip(kept, found, strict=True)):
            estimates[index][metric.name] = estimate
            runs[index][metric.name] = len(series_values)
    return {series_ids[start]: SeriesFigures(series_id=series_ids[start], name=names[start], basis=basis,
                                             estimates=estimates[index], runs=runs[index])
            for index, (start, _, basis) in enumerate(windows)}


def series_figures(session: Session, series_id: int, configuration_id: int) -> SeriesFigures | None:
    """One series' noise now (the model page, its history); None without a passing run."""
    # the configuration condition lets the planner take the series' runs from ix_runs_configuration_night
    return _read(session, _series_window(Result.series_id == series_id,
                                         Run.configuration_id == configuration_id)).get(series_id)


def configuration_figures(session: Session, configuration_ids: Iterable[int],
                          present_in: Iterable[int] | None = None,
                          up_to: Run | None = None) -> dict[int, SeriesFigures]:
    """series id -> noise of every series of these configurations (the suite page, the summary's flag); with
    ``present_in`` (run ids) only the series that have a result in those runs; with ``up_to`` as of that run."""
    ids = list(configuration_ids)
    if not ids:
        return {}
    return _read(session, _configuration_window(ids, None if present_in is None else list(present_in), up_to))


@dataclass(frozen=True, slots=True)
class FindingNoise:
    """A performance finding against its series' noise before the change."""

    noise: NoiseOut
    sigmas_beyond: float | None  # None: not enough runs before the change


def finding_noise(session: Session, findings: Sequence[Finding]) -> dict[int, FindingNoise]:
    """finding id -> how far beyond its series' noise (of the runs before its change) a performance finding of a
    noise metric is; other findings are left out."""
    metrics = {m.name: m for m in NOISE_METRICS}
    out: dict[int, FindingNoise] = {}
    cuts: dict[tuple[int, int], SeriesFigures | None] = {}
    for f in findings:
        metric = metrics.get(f.metric or "")
        if metric is None or f.series_id is None or f.change_pct is None:
            continue
        # the noise of the old level: the runs before the change point's first new run (or the finding's run)
        first_new = session.get(Run, f.change_point.run_id) if f.change_point is not None else f.run
        assert first_new is not None
        key = (f.series_id, first_new.id)
        if key not in cuts:
            cuts[key] = _read(session, _series_window(
                Result.series_id == f.series_id, Run.configuration_id == f.configuration_id,
                earlier(Run, first_new))).get(f.series_id)
        figures = cuts[key]
        if figures is None:
            continue
        estimate = figures.estimates[metric.name]
        noise = figures.of(metric.name)
        assert noise is not None
        out[f.id] = FindingNoise(noise=noise,
                                 sigmas_beyond=estimate.sigmas_beyond(f.change_pct / 100) if estimate else None)
    return out




class SeriesNoiseOut(BaseModel):
    """One series of a configuration's latest run with its noise per watched metric (GET /api/v1/noise)."""

    series_id: int
    name: str
    configuration_id: int
    run_id: int = Field(description="the configuration's latest run, which the series is part of")
    noise: list[NoiseOut]


class FiguresCache:
    """configuration id -> (its latest run, the figures of that run's series): the summary's flag reads a
    configuration's window again only once it has a new latest run, not on every load (a summary of PyTorch's matrix
    is thousands of series of 60 runs each). One per app (service/app.py: ``app.state.noise_cache``), never module
    state; a deleted older run is seen at the configuration's next run. The app warms it after each ingest
    (``after_ingest``, a post-ingest hook), so the page does not pay for a night's new runs."""

    def __init__(self) -> None:
        self._latest: dict[int, tuple[int, dict[int, SeriesFigures]]] = {}
        self.windows_read = 0  # configurations whose window was read: the page's share of it shows in the tests

    def after_ingest(self, session: Session, run_id: int) -> None:
        """A post-ingest hook: the figures of the run's configuration's latest run, read now rather than at the
        summary's next load (the first after a nightly read every configuration's window: ~10 s on a long
        history). An older run of a backfill leaves the cache as it is."""
        configuration_id = session.scalar(sa.select(Run.configuration_id).where(Run.id == run_id))
        if configuration_id is not None:
            self.latest(session, latest_run_ids(session, ConfigFilter(configuration_id=configuration_id)))

    def latest(self, session: Session, latest: Mapping[int, int]) -> dict[int, tuple[int, dict[int, SeriesFigures]]]:
        """configuration id -> (latest run id, series id -> figures) for ``latest`` (configuration id -> run id)."""
        missing = {cid: run_id for cid, run_id in latest.items() if self._latest.get(cid, (None,))[0] != run_id}
        if missing:
            figures = configuration_figures(session, missing, present_in=missing.values())
            run_of = dict(session.execute(sa.select(Result.series_id, Result.run_id)
                                          .where(Result.run_id.in_(list(missing.values())))).all())
            fresh: dict[int, dict[int, SeriesFigures]] = {cid: {} for cid in missing}
            configuration_of = {run_id: cid for cid, run_id in missing.items()}
            for sid, f in figures.items():
                if sid in run_of:
                    fresh[configuration_of[run_of[sid]]][sid] = f
            self._latest.update({cid: (missing[cid], fresh[cid]) for cid in missing})
            self.windows_read += len(missing)
        return {cid: self._latest[cid] for cid in latest}


def run_figures(session: Session, run: Run, *, cache: FiguresCache | None = None) -> dict[int, SeriesFigures]:
    """series id -> the figures of a run's series as of that run (the suite page); the app's ``cache`` answers for a
    configuration's latest run, the page most visited."""
    cid = run.configuration_id
    if cache is not None and latest_run_ids(session, ConfigFilter(configuration_id=cid)).get(cid) == run.id:
        return cache.latest(session, {cid: run.id})[cid][1]
    return configuration_figures(session, [cid], present_in=[run.id], up_to=run)


def latest_figures(session: Session, filters: ConfigFilter = ConfigFilter(), *, cache: FiguresCache | None = None
                   ) -> dict[int, tuple[int, dict[int, SeriesFigures]]]:
    """configuration id -> (its latest run id, series id -> figures of that run's series), for every configuration
    matching ``filters`` (the summary's flag). ``cache``: the app's, else a fresh one (every window read)."""
    return (cache or FiguresCache()).latest(session, latest_run_ids(session, filters))


def latest_noise(session: Session, filters: ConfigFilter = ConfigFilter(), *, cannot_catch: bool = False,
                 cache: FiguresCache | None = None) -> list[SeriesNoiseOut]:
    """The noise of every series of each matching configuration's latest run, by series id; ``cannot_catch``: only
    the series too noisy to catch their target in some metric, with those metrics (the summary's flag). ``cache``:
    the app's, else a fresh one (every window read)."""
    out = []
    for cid, (run_id, figures) in latest_figures(session, filters, cache=cache).items():
        for sid, f in figures.items():
            noise = list(f.cannot_catch if cannot_catch else f.noise)
            if noise:
                out.append(SeriesNoiseOut(series_id=sid, name=f.name, configuration_id=cid, run_id=run_id,
                                          noise=noise))
    return sorted(out, key=lambda s: s.series_id)
