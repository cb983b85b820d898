"""Training throughput (samples/s) by torch version, and DDP scaling over world sizes: the Training page and its API.

Throughput per release: for one model, each single-process training configuration's **last run per torch version**
gives one eager and one compiled bar (the publication's chart: one bar per release and mode). Releases are shown,
plus the newest nightly when the latest run is one (``nightlies=True`` adds every nightly whose last run is in the
``nightly_days`` before the newest run, :data:`NIGHTLY_DAYS` by default; ``nightly_days=0``: every nightly).

The reads follow what is shown, not the history (issue 31: ~37 training configurations of PyTorch's matrix, a
nightly each a night): each configuration's newest run of the model (one backward probe of
``ix_runs_configuration_night``), the runs of the release versions (``ix_runs_torch_version``), and only with
``nightlies`` the window's runs; a configuration in a scaling experiment is read whole (its versions are listed).

Scaling: configurations that differ only in their world size are one experiment; at one torch version (default the
version of the experiment's latest run) each world size's last run gives its throughput, and
``scaling factor = throughput(N) / (N x throughput(1))``; the ideal line is ``N x throughput(1)``. Without a
world-size-1 run of the experiment, the single-process configuration it was launched beside stands for it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.orm import Session

from service.models import Configuration, Result, Run, Series
from service.queries import torch_versions
from service.queries.filters import ConfigFilter
from service.queries.releases import versions
from service.queries.schemas import ConfigurationOut

TRAINING = "training"
NIGHTLY_DAYS = 30  # nightlies=True: the nightlies of the last 30 days (a bar each per configuration); 0: every one


class VersionBar(BaseModel):
    torch_version: str
    release: bool
    run_id: int
    night: date
    eager_throughput: float | None  # samples/s
    compiled_throughput: float | None


class ThroughputByVersion(BaseModel):
    configuration: ConfigurationOut
    series_id: int
    bars: list[VersionBar]  # oldest version first


class ScalingPoint(BaseModel):
    world_size: int
    run_id: int
    night: date
    eager_throughput: float | None
    compiled_throughput: float | None
    eager_scaling: float | None  # throughput(N) / (N x throughput(1))
    compiled_scaling: float | None
    eager_ideal: float | None  # N x throughput(1)
    compiled_ideal: float | None


class ScalingExperiment(BaseModel):
    configuration: ConfigurationOut  # the experiment's configuration at its smallest world size
    configuration_ids: list[int]  # one per world size
    torch_version: str
    torch_versions: list[str]  # versions the experiment has runs of, newest first
    baseline_run_id: int | None  # the world-size-1 run the factors divide by
    points: list[ScalingPoint]  # by world size


class TrainingView(BaseModel):
    model: str | None
    models: list[str]  # training models with a throughput, alphabetically
    throughput: list[ThroughputByVersion]
    scaling: list[ScalingExperiment]
    nightlies_since: date | None = None  # with nightlies: the first night of the window (None: every nightly)


@dataclass(frozen=True, slots=True)
class _Point:
    configuration_id: int
    series_id: int
    run_id: int
    night: date
    torch_version: str
    eager: float | None
    compiled: float | None


def _training(filters: ConfigFilter) -> list[sa.ColumnElement[bool]]:
    return [*filters.clauses(), Configuration.mode == TRAINING]


def training_models(session: Session, filters: ConfigFilter = ConfigFilter()) -> list[str]:
    """Models of training configurations (a model without any throughput has nothing to draw, but is listed: its
    runs may predate throughput; the page says so)."""
    query = (sa.select(Series.name).distinct().join(Configuration, Configuration.id == Series.configuration_id)
             .where(*_training(filters)).order_by(Series.name))
    return list(session.scalars(query))


def _model_configurations(session: Session, model: str, filters: ConfigFilter) -> list[Configuration]:
    """The selected training configurations with a series of ``model``."""
    has_series = sa.exists().where(Series.configuration_id == Configuration.id, Series.name == model)
    return list(session.scalars(sa.select(Configuration).where(*_training(filters), has_series)))


def _point_columns() -> tuple[sa.SQLColumnExpression, ...]:
    return (Run.configuration_id, Result.series_id, Run.id, Run.night, Run.torch_version, Result.eager_throughput,
            Result.compiled_throughput)


def _newest_points(session: Session, model: str, config_ids: Collection[int]) -> dict[int, _Point]:
    """Each configuration's newest run of ``model`` with a torch version: a correlated subquery per configuration
    (one backward probe of ``ix_runs_configuration_night``; portable, where a LATERAL join is not SQLite's)."""
    if not config_ids:
        return {}
    newest_run = (sa.select(Run.id).join(Result, sa.and_(Result.run_id == Run.id, Result.name == model))
                  .where(Run.configuration_id == Configuration.id, Run.torch_version.is_not(None))
                  .order_by(Run.night.desc(), Run.id.desc()).limit(1).correlate(Configuration).scalar_subquery())
    run_ids = [r for r in session.scalars(sa.select(newest_run).where(Configuration.id.in_(config_ids)))
               if r is not None]
    if not run_ids:
        return {}
    query = (sa.select(*_point_columns()).join(Result, sa.and_(Result.run_id == Run.id, Result.name == model))
             .where(Run.id.in_(run_ids)).order_by(Run.night, Run.id))
    return {row[0]: _Point(*row) for row in session.execute(query)}  # the last row of a configuration's run wins


def _points(session: Session, model: str, config_ids: Collection[int], *, versions: Collection[str] | None = None,
            since: date | None = None) -> list[_Point]:
    """Runs of ``model`` in the configurations, oldest first: all, or those of ``versions``, or from ``since``."""
    if not config_ids or (versions is not None and not versions):
        return []
    query = (sa.select(*_point_columns()).join(Result, sa.and_(Result.run_id == Run.id, Result.name == model))
             .where(Run.configuration_id.in_(config_ids), Run.torch_version.is_not(None)).order_by(Run.night, Run.id))
    if versions is not None:
        query = query.where(Run.torch_version.in_(versions))
    if since is not None:
        query = query.where(Run.night >= since)
    return [_Point(*row) for row in session.execute(query)]


def _last_per_version(points: Sequence[_Point]) -> dict[str, _Point]:
    """points oldest first -> version: its last point."""
    return {p.torch_version: p for p in points}


def shown_versions(last: dict[str, _Point], nightlies: bool, since: date | None = None) -> list[str]:
    """Releases, oldest first, and the newest nightly when the latest run is one (with ``nightlies`` every version
    whose last run is from ``since`` on; every version without ``since``)."""
    ordered = torch_versions.ordered(last)
    if nightlies:
        return [v for v in ordered if since is None or torch_versions.is_release(v) or last[v].night >= since]
    shown = [v for v in ordered if torch_versions.is_release(v)]
    newest = max(last.values(), key=lambda p: (p.night, p.run_id), default=None)
    if newest is not None and newest.torch_version not in shown:
        shown.append(newest.torch_version)
    return shown


def _experiment_key(config: Configuration) -> tuple[object, ...]:
    """What a scaling experiment's world sizes share (everything of the configuration but the world size)."""
    return (config.machine_id, config.suite, config.backend, config.variant, config.compile_mode, config.dtype,
            config.device, config.thread_config, config.batch_size_override, config.dynamic_shapes,
            tuple(sorted(config.env.items())))


def _ratio(value: float | None, base: float | None, world_size: int) -> tuple[float | None, float | None]:
    """(scaling factor, ideal throughput) of ``value`` at ``world_size`` over the 1-process ``base``."""
    if base is None or base <= 0:
        return None, None
    ideal = world_size * base
    return (value / ideal if value is not None else None), ideal


def _scaling(configs: dict[int, Configuration], by_config: dict[int, list[_Point]],
             version: str | None) -> list[ScalingExperiment]:
    groups: dict[tuple[object, ...], list[Configuration]] = {}
    for config in configs.values():
        groups.setdefault(_experiment_key(config), []).append(config)
    out = []
    for members in groups.values():
        distributed = [c for c in members if c.distributed_backend is not None or c.world_size > 1]
        if not distributed:
            continue
        # the single-process configuration stands in for world size 1 when the experiment has none
        sizes: dict[int, Configuration] = {c.world_size: c for c in members if c.distributed_backend is None}
        sizes.update({c.world_size: c for c in distributed})
        runs = [p for c in sizes.values() for p in by_config.get(c.id, [])]
        if not runs:
            continue
        available = list(reversed(torch_versions.ordered(p.torch_version for p in runs)))
        latest = max(runs, key=lambda p: (p.night, p.run_id))
        chosen = version if version in available else latest.torch_version
        last = {size: _last_per_version(by_config.get(c.id, [])).get(chosen) for size, c in sizes.items()}
        baseline = last.get(1)
        points = []
        for size in sorted(s for s, p in last.items() if p is not None):
            point = last[size]
            assert point is not None
            eager_scaling, eager_ideal = _ratio(point.eager, baseline.eager if baseline else None, size)
            compiled_scaling, compiled_ideal = _ratio(point.compiled, baseline.compiled if baseline else None, size)
            points.append(ScalingPoint(world_size=size, run_id=point.run_id, night=point.night,
                                       eager_throughput=point.eager, compiled_throughput=point.compiled,
                                       eager_scaling=eager_scaling, compiled_scaling=compiled_scaling,
                                       eager_ideal=eager_ideal, compiled_ideal=compiled_ideal))
        first = sizes[min(sizes)]
        out.append(ScalingExperiment(configuration=ConfigurationOut.from_row(first),
                                     configuration_ids=[sizes[s].id for s in sorted(sizes)], torch_version=chosen,
                                     torch_versions=available, baseline_run_id=baseline.run_id if baseline else None,
                                     points=points))
    out.sort(key=lambda e: (e.configuration.suite, e.configuration.dtype, e.configuration.id))
    return out


def _in_experiments(configs: dict[int, Configuration]) -> set[int]:
    """Configurations of a scaling experiment (a group of ``_experiment_key`` with a DDP member): read whole."""
    groups: dict[tuple[object, ...], list[Configuration]] = {}
    for config in configs.values():
        groups.setdefault(_experiment_key(config), []).append(config)
    return {c.id for members in groups.values()
            if any(m.distributed_backend is not None or m.world_size > 1 for m in members) for c in members}


def training_view(session: Session, model: str | None = None, filters: ConfigFilter = ConfigFilter(), *,
                  nightlies: bool = False, nightly_days: int = NIGHTLY_DAYS,
                  scaling_version: str | None = None) -> TrainingView:
    """``model`` defaults to the first training model; an unknown one shows nothing."""
    models = training_models(session, filters)
    chosen = model if model is not None else (models[0] if models else None)
    if chosen is None:
        return TrainingView(model=None, models=models, throughput=[], scaling=[])
    candidates = {c.id: c for c in _model_configurations(session, chosen, filters)}
    newest = _newest_points(session, chosen, candidates)
    configs = {i: c for i, c in candidates.items() if i in newest}  # those with a run of the model
    whole = _in_experiments(configs)
    since = (max(p.night for p in newest.values()) - timedelta(days=nightly_days - 1)
             if nightlies and nightly_days > 0 and newest else None)
    releases = [v for v in versions(session) if torch_versions.is_release(v)]
    partial = [i for i in configs if i not in whole]
    points = {p.run_id: p for p in (*_points(session, chosen, whole),
                                    *_points(session, chosen, partial, versions=releases),
                                    *(_points(session, chosen, partial, since=since) if nightlies else ()),
                                    *(newest[i] for i in partial))}
    by_config: dict[int, list[_Point]] = {}
    for p in sorted(points.values(), key=lambda p: (p.night, p.run_id)):
        by_config.setdefault(p.configuration_id, []).append(p)
    throughput = []
    for config_id, config_points in by_config.items():
        config = configs[config_id]
        if config.world_size != 1 or config.distributed_backend is not None:
            continue  # a DDP run's throughput is the scaling chart's
        last = _last_per_version(config_points)
        bars = [VersionBar(torch_version=v, release=torch_versions.is_release(v), run_id=last[v].run_id,
                           night=last[v].night, eager_throughput=last[v].eager, compiled_throughput=last[v].compiled)
                for v in shown_versions(last, nightlies, since)]
        throughput.append(ThroughputByVersion(configuration=ConfigurationOut.from_row(config),
                                              series_id=config_points[-1].series_id, bars=bars))
    throughput.sort(key=lambda t: (t.configuration.suite, t.configuration.device, t.configuration.dtype,
                                   t.configuration.id))
    return TrainingView(model=chosen, models=models, throughput=throughput,
                        scaling=_scaling(configs, by_config, scaling_version), nightlies_since=since)
