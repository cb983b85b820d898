"""Detection over stored history: what changed when a run arrived, stored as findings.

The checks are the declared rules of :data:`RULES` (one entry each: name, the categories of perfdash.verdicts it may
file, its function), run in order by :func:`detect_run`; all idempotent (a finding's ``key`` is unique; running
detection twice stores nothing new):

- status changes against the previous run of the configuration (service.queries.order), at once: a model that
  passed and now fails (fail_accuracy, fail_to_run, timeout, OOM, ...) is a new failure; the reverse is fixed
  (perfdash.judgement's status verdicts);
- performance: change points of each series and metric that perfdash.metric_registry marks ``detected`` (speedup,
  abs_latency, compilation_latency, compression_ratio) over the passing runs, starting at the series' last stored
  change point;
- the suite: the passrate dropping by PASSRATE_ALERT_DROP (perfdash.metric_registry) or more against the previous
  run, and change points of the suite's (clipped) geomean speedup;
- the environment (service.detection.environment): when the manifest differs from the previous run's and most
  series moved together, one "environment change" finding naming the differences; it resets every series' baseline
  of the configuration at this run, so no per-model change point follows from it;
- missing data: a suite whose model count dropped by MODELS_DROP or more against the previous run;
- noise: a series whose between-run spread jumped or turned bimodal over its newest runs while its median held
  (service.detection.spread), compared only with runs of the same environment, level and generated code: a finding
  of its own kind, never a confirmation, a bisection or an issue.

A model's performance regression is a candidate until an A/B re-measurement confirms it
(service.alerts.confirmation): detection queues the confirm requests.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, NamedTuple, overload

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from perfdash.code_change import CODE_UNKNOWN, CodeChange, compare_code
from perfdash.contract import display_status
from perfdash.judgement import Side, change_verdict, direction, judge
from perfdash.metric_registry import (
    DETECTED_METRICS,
    GEOMEAN,
    PASSRATE,
    PASSRATE_ALERT_DROP,
    better_of,
    leader_of,
    min_effect_of,
)
from perfdash.noise import robust_cv
from perfdash.verdicts import (
    ENVIRONMENT,
    FIXED,
    IMPROVEMENT,
    MACHINE_CHANGE,
    MODELS_DROPPED,
    NEW_FAILURE,
    NOISE_CHANGE,
    REGRESSION,
    FindingKind,
    UnknownVerdict,
    Verdict,
    category,
)
from service.alerts.confirmation import queue_confirmations
from service.detection.changepoint import (
    ChangePoint,
    DetectionConfig,
    Search,
    detect_change_points,
    detect_change_points_many,
)
from service.detection.environment import ShiftConfig, common_shift, manifest_differences, series_move
from service.detection.spread import (
    HISTORY,
    MIN_EARLIER,
    NEWEST_RUNS,
    level_start,
    newest_spread_change,
    spread_floor,
)
from service.models import Annotation, ChangePointRow, Finding, Result, Run, RunSummary
from service.queries.detection import (
    night_of_run,
    passing_series,
    result_count,
    results_by_series,
    run_marks,
    series_history,
    suite_geomean_history,
)
from service.queries.generated_code import code_digests, code_side
from service.queries.order import previous_run
from service.queries.torch_versions import is_release

logger = logging.getLogger(__name__)

SUITE_METRIC = GEOMEAN.key  # change points of the suite's clipped geomean speedup; series_id NULL
MODELS_DROP = 0.2  # relative: a fifth of the suite's models missing against the previous run


class Point(NamedTuple):
    """One night of a series; a tuple, not a dataclass: a run's detection makes ~100,000 of them (issue 31)."""

    run_id: int
    night: date
    commit: str | None
    value: float


RunMarks = Mapping[int, tuple[date, str | None]]  # run id -> (night, torch commit): service.queries.detection.run_marks


class SeriesPoints(Sequence[Point]):
    """A series' passing points, column by column: a night of PyTorch's matrix reads ~20,000 rows for every one of its
    276 runs, and making a Point of each (4 metrics a row) cost more than the change-point search (issue 31). A Point
    is made only where one is read: the change's two nights, the newest; its night and commit come from the runs'
    ``marks`` (read once a run, not once a row)."""

    __slots__ = ("marks", "run_ids", "values")

    def __init__(self, run_ids: Sequence[int], values: Sequence[float], marks: RunMarks) -> None:
        self.run_ids, self.values, self.marks = run_ids, values, marks

    @classmethod
    def of(cls, points: Sequence[Point]) -> SeriesPoints:
        return cls([p.run_id for p in points], [p.value for p in points],
                   {p.run_id: (p.night, p.commit) for p in points})

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, i: int) -> Point: ...

    @overload
    def __getitem__(self, i: slice) -> SeriesPoints: ...

    def __getitem__(self, i: int | slice) -> Point | SeriesPoints:
        if isinstance(i, slice):
            return SeriesPoints(self.run_ids[i], self.values[i], self.marks)
        run_id = self.run_ids[i]
        return Point(run_id, *self.marks[run_id], self.values[i])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # unhashable, as it compares equal to a list; typeshed: a method


@dataclass(frozen=True, slots=True)
class DetectionReport:
    run_id: int
    new_findings: tuple[int, ...]

    @property
    def count(self) -> int:
        return len(self.new_findings)


def _baselines(session: Session, configuration_id: int) -> dict[tuple[int | None, str], set[int]]:
    """(series_id, metric) -> run ids where a change point is stored, and the runs of environment changes (which
    reset every series of the configuration)."""
    resets = set(session.scalars(sa.select(Finding.run_id).where(Finding.configuration_id == configuration_id,
                                                                 Finding.kind == FindingKind.ENVIRONMENT)))
    out: dict[tuple[int | None, str], set[int]] = defaultdict(lambda: set(resets))
    rows = session.execute(sa.select(ChangePointRow.series_id, ChangePointRow.metric, ChangePointRow.run_id)
                           .where(ChangePointRow.configuration_id == configuration_id))
    for series_id, metric, run_id in rows:
        out[(series_id, metric)].add(run_id)
    return out


# Manifest facts that are the models' own code (the torchbench suite's TorchBench commit): a change of one changes what
# is measured, so it is one finding whatever moved, as a torch release change is, never per-model regressions.
MODEL_CODE_FACTS: frozenset[str] = frozenset({"suite torchbench"})


def run_environment(run: Run) -> dict[str, str]:
    """The manifest facts whose change is an environment change (the torch build is what is under test)."""
    flat = {f"suite {k}": str(v) for k, v in (run.suite_versions or {}).items()}
    flat.update({str(k): str(v) for k, v in (run.environment or {}).items()})
    return flat


def _recent_moves(session: Session, run: Run, config: ShiftConfig) -> dict[str, list[float]]:
    """metric -> tonight's log move of each passing series against its recent level (environment.series_move)."""
    rows = series_history(session, run, None, [getattr(Result, m.name) for m in DETECTED_METRICS],
                          last_runs=config.history + 1)
    history: dict[tuple[int, str], list[tuple[int, float]]] = defaultdict(list)
    for series_id, run_id, *values in rows:
        for metric, value in zip(DETECTED_METRICS, values, strict=True):
            if value is not None and value > 0:
                history[(series_id, metric.name)].append((run_id, float(value)))
    moves: dict[str, list[float]] = defaultdict(list)
    for (_series, metric_name), points in history.items():
        if points[-1][0] != run.id:
            continue
        move = series_move([v for _, v in points], config)
        if move is not None:
            moves[metric_name].append(move)
    return moves


def release_change(previous: Run, run: Run) -> tuple[str, str] | None:
    """(old, new) torch when the two runs measured two different torch releases (2.13.0 -> 2.14.1): a release
    comparison, not a night of the nightly under test. Local builds of one release (+cpu, +cu130) are one release."""
    old, new = previous.torch_version, run.torch_version
    if not old or not new or not (is_release(old) and is_release(new)):
        return None
    return (old, new) if old.split("+")[0] != new.split("+")[0] else None


def _release_moves(session: Session, run: Run, previous: Run) -> dict[str, list[float]]:
    """metric -> log change of each series passing in both runs (a release comparison has no nights between)."""
    now, before = results_by_series(session, run.id), results_by_series(session, previous.id)
    moves: dict[str, list[float]] = defaultdict(list)
    for series_id, current in now.items():
        old = before.get(series_id)
        if old is None or not (old.passed and current.passed):
            continue
        for metric in DETECTED_METRICS:
            a, b = getattr(old, metric.name), getattr(current, metric.name)
            if a is not None and b is not None and a > 0 and b > 0:
                moves[metric.name].append(math.log(b / a))
    return moves


def _environment_finding(session: Session, run: Run, previous: Run) -> Finding | None:
    """One finding for a change of what surrounds the compiler: the machine's software (kernel, suites, allocator)
    when many series moved with it, or the torch release itself (a release-to-release comparison, always said, with
    how the series moved between the two runs). Either resets the configuration's baselines: no per-model findings."""
    differences = manifest_differences(run_environment(previous), run_environment(run))
    release = release_change(previous, run)
    if release is not None:
        differences = {"torch": release, **differences}
    if not differences:
        return None
    config = ShiftConfig()
    models_changed = bool(MODEL_CODE_FACTS & set(differences))
    if release is not None or models_changed:
        release_moves = _release_moves(session, run, previous)
        moved = "; ".join(_release_summary(metric, moves) for metric, moves in sorted(release_moves.items())
                          ) or "no model passed in both runs"
        speedups = release_moves.get("speedup")
        lead_pct = 100.0 * math.expm1(statistics.median(speedups)) if speedups else None
    else:
        shifts = {metric: shift for metric, moves in _recent_moves(session, run, config).items()
                  if (shift := common_shift(moves, config)) is not None}
        if not shifts:
            return None
        moved = ", ".join(f"{m} {s.median_pct:+.1f}% (median of {s.series} series, {100 * s.share:.0f}% moved with "
                          f"it)" for m, s in sorted(shifts.items()))
        lead_pct = (shifts.get("speedup") or next(iter(shifts.values()))).median_pct
    named = ", ".join(f"{k} {a or '-'} -> {b or '-'}" for k, (a, b) in differences.items())
    what = ("torch release change" if release is not None
            else "models' code change" if models_changed else "environment change")
    return _add_finding(session, Finding(
        key=f"environment:{run.id}", kind=FindingKind.ENVIRONMENT, category=ENVIRONMENT.name,
        configuration_id=run.configuration_id, run_id=run.id, change_pct=lead_pct,
        good_commit=previous.torch_git_commit, bad_commit=run.torch_git_commit,
        summary=f"{what}: {named}; {moved}. Baselines reset, no per-model findings."))


def _release_summary(metric: str, moves: list[float]) -> str:
    """``speedup median +4.1% over 3 models (2 better, 0 worse beyond 5%)``: how one metric moved between releases."""
    minimum = min_effect_of(metric)
    # the relative change of each model, judged as every comparison judges it (perfdash.judgement.direction)
    directions = direction(np.expm1(moves), better_of(metric), minimum)
    better, worse = int(np.sum(directions > 0)), int(np.sum(directions < 0))
    return (f"{metric} median {100.0 * math.expm1(statistics.median(moves)):+.1f}% over {len(moves)} models "
            f"({better} better, {worse} worse beyond {100 * minimum:g}%)")


def models_dropped(d: RunDetection) -> list[Finding | None]:
    """A suite whose model count dropped by MODELS_DROP or more against the previous run."""
    session, run, previous = d.session, d.run, d.previous_run
    now, before = result_count(session, run.id), result_count(session, previous.id)
    if not before or now > (1.0 - MODELS_DROP) * before:
        return []
    return [_add_finding(session, Finding(
        key=f"models_dropped:{run.id}", kind=FindingKind.MISSING, category=MODELS_DROPPED.name,
        configuration_id=run.configuration_id, run_id=run.id, metric="models", old_value=float(before),
        new_value=float(now), change_pct=100.0 * (now / before - 1.0),
        summary=f"{run.configuration.suite}: {now} models reported, {before} the run before"))]


def _add_finding(session: Session, finding: Finding) -> Finding | None:
    if session.scalar(sa.select(Finding.id).where(Finding.key == finding.key)) is not None:
        return None
    session.add(finding)
    session.flush()
    return finding


def status_changes(d: RunDetection) -> list[Finding | None]:
    """A model that passed in the previous run and fails now is a new failure, the reverse is fixed
    (perfdash.judgement's status verdicts)."""
    session, run, previous = d.session, d.run, d.previous_run
    now, before = results_by_series(session, run.id), results_by_series(session, previous.id)
    series = [s for s in now if s in before]
    judged = judge(Side.of([before[s] for s in series]), Side.of([now[s] for s in series]), ())
    found = []
    for i, series_id in enumerate(series):
        verdict = judged.verdict_of(i)
        if verdict not in (NEW_FAILURE, FIXED):
            continue
        current, old = now[series_id], before[series_id]
        old_status = display_status(old.accuracy, old.passed)
        new_status = display_status(current.accuracy, current.passed)
        found.append(_add_finding(session, Finding(
            key=f"status:{series_id}:{run.id}", kind=FindingKind.STATUS, category=verdict.name,
            configuration_id=run.configuration_id, series_id=series_id, run_id=run.id, model=current.name,
            metric="accuracy", old_status=old_status, new_status=new_status,
            old_value=old.gated_speedup, new_value=current.gated_speedup,
            good_commit=previous.torch_git_commit, bad_commit=run.torch_git_commit,
            summary=f"{current.name}: {old_status} -> {new_status}")))
    return found


def _search(points: SeriesPoints, stored: set[int], config: DetectionConfig, incremental: bool) -> Search | None:
    """What to search of a series: its points since its last stored change (only the newest window, incremental)."""
    if len(points) < 5:
        return None
    baseline = 0
    if stored:  # most series have no stored change point: no index of their runs to build
        positions = {run_id: i for i, run_id in enumerate(points.run_ids)}
        baseline = max((positions[r] for r in stored if r in positions), default=0)
    if incremental:
        # Every earlier window was the last window of an earlier run, examined when that run arrived: only the
        # window ending tonight is new. Keeps a night's detection cost flat however long the history grows.
        baseline = max(baseline, len(points) - config.window)
    return Search(points.values, baseline, config)


def _store_change_points(session: Session, run: Run, series_id: int | None, model: str | None, metric: str,
                         points: SeriesPoints, stored: set[int], config: DetectionConfig,
                         incremental: bool) -> list[Finding]:
    search = _search(points, stored, config, incremental)
    if search is None:
        return []
    found = detect_change_points(search.values, baseline_start=search.baseline_start, config=config)
    return _store_found(session, run, series_id, model, metric, points, stored, found)


def _store_found(session: Session, run: Run, series_id: int | None, model: str | None, metric: str,
                 points: SeriesPoints, stored: set[int], change_points: list[ChangePoint]) -> list[Finding]:
    """The change points a search found, stored with their findings (those not stored already)."""
    found = []
    for cp in change_points:
        first, last_old = points[cp.index], points[cp.index - 1]
        if first.run_id in stored:
            continue
        row = ChangePointRow(
            configuration_id=run.configuration_id, series_id=series_id, metric=metric, run_id=first.run_id,
            previous_run_id=last_old.run_id, good_commit=last_old.commit, bad_commit=first.commit,
            before_mean=cp.before_mean, after_mean=cp.after_mean, change_pct=cp.change_pct, p_value=cp.p_value,
            n_before=cp.n_before, n_after=cp.n_after,
            regression=change_verdict(cp.change_pct, better_of(metric)) is REGRESSION)
        session.add(row)
        session.flush()
        stored.add(first.run_id)
        subject = model or "suite geomean speedup"
        label = metric if model else "geomean"
        code = _code_change(session, last_old.run_id, first.run_id, model) if model else None
        same_code = code.machine_change if code is not None else _models_all_machine_changes(session, run, first.run_id)
        finding = _add_finding(session, Finding(
            key=f"cp:{row.id}", kind=FindingKind.PERFORMANCE if model else FindingKind.SUMMARY,
            category=MACHINE_CHANGE.name if same_code else change_verdict(cp.change_pct, better_of(metric)).name,
            code_change=code.to_json() if code is not None else None, configuration_id=run.configuration_id,
            series_id=series_id, run_id=run.id, change_point_id=row.id, model=model, metric=metric,
            old_value=cp.before_mean, new_value=cp.after_mean, change_pct=cp.change_pct, p_value=cp.p_value,
            good_commit=last_old.commit, bad_commit=first.commit,
            summary=f"{subject}: {label} {cp.change_pct:+.1f}% ({cp.before_mean:.4g} -> {cp.after_mean:.4g}, "
                    f"p={cp.p_value:.1e}, since {first.night})"
                    + (f" {code.sentence()}" if code is not None and code.verdict != CODE_UNKNOWN else "")))
        if finding is not None:
            found.append(finding)
    return found


def _code_change(session: Session, old_run_id: int, new_run_id: int, model: str) -> CodeChange:
    """Whether the generated code of ``model`` changed between the two runs (perfdash.code_change); the
    torch build counts as environment here (the code calls torch's own kernels)."""
    old, new = session.get(Run, old_run_id), session.get(Run, new_run_id)
    if old is None or new is None:  # deleted since the detection began
        raise LookupError(f"run {old_run_id if old is None else new_run_id} is gone")
    environment_changed = (run_environment(old) != run_environment(new)
                           or (old.torch_version, old.torch_git_commit) != (new.torch_version, new.torch_git_commit))
    return compare_code(code_side(session, old_run_id, model), code_side(session, new_run_id, model),
                        environment_changed)


def _models_all_machine_changes(session: Session, run: Run, first_run_id: int) -> bool:
    """Whether the models' findings of the configuration's change at ``first_run_id`` are all machine changes (then
    so is the suite geomean's change it made)."""
    categories = set(session.scalars(
        sa.select(Finding.category).join(Finding.change_point)
        .where(Finding.configuration_id == run.configuration_id, Finding.series_id.is_not(None),
               ChangePointRow.run_id == first_run_id)))
    return categories == {MACHINE_CHANGE.name}


def _series_points(session: Session, run: Run, series_ids: list[int],
                   last_runs: int | None = None) -> dict[tuple[int, str], SeriesPoints]:
    """(series id, metric) -> the passing points of each series up to ``run`` (in its last ``last_runs`` runs)."""
    marks = run_marks(session, run, last_runs=last_runs)
    rows = series_history(session, run, series_ids, [getattr(Result, m.name) for m in DETECTED_METRICS],
                          last_runs=last_runs)
    by_series: dict[int, list[Any]] = defaultdict(list)
    for row in rows.all():  # one fetchall, not a fetchone per row
        by_series[row[0]].append(row)
    history: dict[tuple[int, str], SeriesPoints] = {}
    for series_id, series_rows in by_series.items():
        _, run_ids, *columns = zip(*series_rows, strict=True)
        for metric, column in zip(DETECTED_METRICS, columns, strict=True):
            keep = [i for i, value in enumerate(column) if value is not None and value > 0]
            if len(keep) == len(column):  # the metric passed every night: the columns as they are
                history[(series_id, metric.name)] = SeriesPoints(run_ids, [float(v) for v in column], marks)
            elif keep:
                history[(series_id, metric.name)] = SeriesPoints(
                    [run_ids[i] for i in keep], [float(column[i]) for i in keep], marks)
    return history


def _incremental_points(session: Session, run: Run, series_ids: list[int]) -> dict[tuple[int, str], SeriesPoints]:
    """What an incremental search reads of each series' history: its last two windows of points (the search looks
    at the last window, its noise estimate at the last two: changepoint.detect_change_points), the same answer as
    the whole history at a fraction of the rows. The last runs of the configuration hold them for a series that
    passed most nights; a series with fewer points there (flaky, or young) is read whole."""
    needed = max(2 * DetectionConfig.for_metric(m.name).window for m in DETECTED_METRICS)
    history = _series_points(session, run, series_ids, last_runs=needed + needed // 4)
    short = {series_id for (series_id, _metric), points in history.items()
             if points.run_ids[-1] == run.id and len(points) < needed}
    if not short:
        return history
    out = {key: points for key, points in history.items() if key[0] not in short}
    out.update(_series_points(session, run, sorted(short)))
    return out


def performance_change_points(d: RunDetection) -> list[Finding | None]:
    """Change points of each series and metric the registry marks ``detected``, over the passing runs."""
    session, run, incremental = d.session, d.run, d.incremental
    series_in_run = passing_series(session, run.id)
    if not series_in_run:
        return []
    history = (_incremental_points(session, run, list(series_in_run)) if incremental
               else _series_points(session, run, list(series_in_run)))
    stored = _baselines(session, run.configuration_id)
    configs = {m.name: DetectionConfig.for_metric(m.name) for m in DETECTED_METRICS}
    searched = []
    for (series_id, metric), points in history.items():
        if not points or points.run_ids[-1] != run.id:
            continue  # the metric is missing tonight: nothing new to say about it
        search = _search(points, stored[(series_id, metric)], configs[metric], incremental)
        if search is not None:
            searched.append((series_id, metric, points, search))
    # all of the run's series at once: most did not move, and one check over all of them says so (issue 31)
    results = detect_change_points_many([search for *_, search in searched])
    found: list[Finding | None] = []
    for (series_id, metric, points, _), change_points in zip(searched, results, strict=True):
        found += _store_found(session, run, series_id, series_in_run[series_id], metric, points,
                              stored[(series_id, metric)], change_points)
    return found


def _environment_key(run: Run) -> tuple[tuple[tuple[str, str], ...], str]:
    """What two runs must share for their values to be compared as one series' noise: the manifest facts whose
    change is an environment change (run_environment) and the torch release ("nightly" for builds of the nightly,
    whose commit is what is under test)."""
    version = (run.torch_version or "").split("+")[0]
    return tuple(sorted(run_environment(run).items())), version if is_release(version) else "nightly"


def _comparable_start(points: SeriesPoints, change_points: set[int], bounds: set[int],
                      environment: Mapping[int, object], digests: Mapping[int, str] | None, min_effect: float) -> int:
    """The index of a series' first point that its newest point may be compared with for a spread change:

    - from the last of ``bounds`` on (run ids: the configuration's environment findings, the first of the newest runs
      of the series' last noise finding: a spread already reported is what the next one is judged against);
    - in the newest run's environment (``environment``: run id -> _environment_key) and of its generated code
      (``digests``: run id -> digest; None: the newest run has no fingerprint, any code);
    - after its last stored change point (``change_points``: first runs) whose level held (spread.level_start)."""
    run_ids = points.run_ids
    positions = {run_id: i for i, run_id in enumerate(run_ids)}
    start = max((positions[r] for r in bounds if r in positions), default=0)
    newest_environment = environment[run_ids[-1]]
    newest_code = digests.get(run_ids[-1]) if digests is not None else None
    i = len(run_ids) - 1
    while i > start and environment[run_ids[i - 1]] == newest_environment and (
            digests is None or digests.get(run_ids[i - 1]) == newest_code):
        i -= 1
    return level_start(points.values, [positions[r] for r in change_points if r in positions], i, min_effect)


def noise_changes(d: RunDetection) -> list[Finding | None]:
    """A series whose between-run spread over its newest NEWEST_RUNS runs jumped or turned bimodal against its earlier
    comparable runs, its median holding (service.detection.spread): filed once, on the night it shows, with those
    runs. A metric that follows another (latency follows speedup) is not filed again when its leader's spread changed
    over the same runs."""
    session, run = d.session, d.run
    series_in_run = passing_series(session, run.id)
    if not series_in_run:
        return []
    history = _series_points(session, run, list(series_in_run), last_runs=HISTORY)
    floors = {m.name: spread_floor(m.min_effect) for m in DETECTED_METRICS}
    # most series stop here: too few runs, or a spread over the newest runs too small to matter
    candidates = {key: points for key, points in history.items()
                  if points.run_ids[-1] == run.id and len(points) >= NEWEST_RUNS + MIN_EARLIER
                  and robust_cv(points.values[-NEWEST_RUNS:]) >= floors[key[1]]}
    if not candidates:
        return []
    environment_runs = set(session.scalars(sa.select(Finding.run_id).where(
        Finding.configuration_id == run.configuration_id, Finding.kind == FindingKind.ENVIRONMENT)))
    # (series, metric) -> the first runs of its stored levels; -> the runs of its noise findings
    change_points: dict[tuple[int | None, str | None], set[int]] = defaultdict(set)
    for cp in session.execute(sa.select(ChangePointRow.series_id, ChangePointRow.metric, ChangePointRow.run_id)
                              .where(ChangePointRow.configuration_id == run.configuration_id)):
        change_points[(cp.series_id, cp.metric)].add(cp.run_id)
    run_ids = sorted({r for points in candidates.values() for r in points.run_ids})
    environment = {r.id: _environment_key(r) for r in session.scalars(sa.select(Run).where(Run.id.in_(run_ids)))
                   .unique()}
    models = sorted({series_in_run[series_id] for series_id, _ in candidates})
    digests = code_digests(session, run_ids, models)  # model -> run id -> digest
    noise_runs: dict[tuple[int | None, str | None], list[int]] = defaultdict(list)
    for noise in session.execute(sa.select(Finding.series_id, Finding.metric, Finding.run_id)
                                 .where(Finding.configuration_id == run.configuration_id,
                                        Finding.kind == FindingKind.NOISE)):
        noise_runs[(noise.series_id, noise.metric)].append(noise.run_id)
    found: list[Finding | None] = []
    changed: dict[tuple[int, str], list[int]] = {}  # (series, metric) -> its newest runs, where the spread changed
    # leaders first: a follower's change over its leader's runs is the leader's finding
    for (series_id, metric), points in sorted(candidates.items(), key=lambda kv: leader_of(kv[0][1]) is not None):
        model = series_in_run[series_id]
        positions = {run_id: i for i, run_id in enumerate(points.run_ids)}
        # a noise finding's newest runs end on its run: they start NEWEST_RUNS - 1 points of the series earlier
        noise_starts = [points.run_ids[max(0, positions[r] - NEWEST_RUNS + 1)]
                        for r in noise_runs.get((series_id, metric), ()) if r in positions]
        model_code = digests.get(model, {})
        start = _comparable_start(points, change_points[(series_id, metric)], environment_runs | set(noise_starts),
                                  environment, model_code if run.id in model_code else None, min_effect_of(metric))
        comparable = points[start:]
        change = newest_spread_change(comparable.values, min_effect_of(metric))
        if change is None:
            continue
        newest = comparable[-NEWEST_RUNS:]
        changed[(series_id, metric)] = list(newest.run_ids)
        leader = leader_of(metric)
        if leader is not None and set(newest.run_ids) & {*changed.get((series_id, leader), ()),
                                                         *noise_runs.get((series_id, leader), ())}:
            continue  # its leader's spread changed over these runs: one finding, the leader's
        first, earliest, earlier = newest[0], comparable[0], len(comparable) - NEWEST_RUNS  # (at most HISTORY runs)
        found.append(_add_finding(session, Finding(
            key=f"noise:{series_id}:{metric}:{run.id}", kind=FindingKind.NOISE, category=NOISE_CHANGE.name,
            configuration_id=run.configuration_id, series_id=series_id, run_id=run.id, model=model, metric=metric,
            old_value=change.cv_before, new_value=change.cv_after,
            change_pct=100.0 * (change.cv_after / max(change.cv_before, 1e-12) - 1.0), p_value=change.p_value,
            summary=(f"{model}: {metric} between-run spread {100 * change.cv_before:.1f}% -> "
                     f"{100 * change.cv_after:.1f}% (robust CV), median held, over its {NEWEST_RUNS} newest runs "
                     f"{first.night}..{run.night} (runs {', '.join(map(str, newest.run_ids))}) against {earlier} "
                     f"earlier runs since {earliest.night} (p={change.p_value:.1e})"))))
    return found


def passrate_drop(d: RunDetection) -> list[Finding | None]:
    """The suite's passrate dropping by PASSRATE_ALERT_DROP or more against the previous run."""
    session, run, previous = d.session, d.run, d.previous_run
    summary, before = session.get(RunSummary, run.id), session.get(RunSummary, previous.id)
    if summary is None or before is None or not (before.total and summary.total):
        return []
    old_rate, new_rate = before.passed / before.total, summary.passed / summary.total
    if old_rate - new_rate < PASSRATE_ALERT_DROP:
        return []
    return [_add_finding(session, Finding(
        key=f"passrate:{run.id}", kind=FindingKind.SUMMARY, category=REGRESSION.name,
        configuration_id=run.configuration_id, run_id=run.id, metric=PASSRATE.key, old_value=old_rate,
        new_value=new_rate, change_pct=100.0 * (new_rate - old_rate),
        good_commit=previous.torch_git_commit, bad_commit=run.torch_git_commit,
        summary=f"passrate {100 * old_rate:.0f}% ({before.passed}/{before.total}) -> "
                f"{100 * new_rate:.0f}% ({summary.passed}/{summary.total})"))]


def suite_geomean_change_points(d: RunDetection) -> list[Finding | None]:
    """Change points of the suite's (clipped) geomean speedup."""
    session, run = d.session, d.run
    if session.get(RunSummary, run.id) is None:
        return []
    points = SeriesPoints.of([Point(r, n, c, float(g)) for r, n, c, g in suite_geomean_history(session, run)
                              if g is not None and g > 0])
    if not points or points.run_ids[-1] != run.id:
        return []
    stored = _baselines(session, run.configuration_id)[(None, SUITE_METRIC)]
    return list(_store_change_points(session, run, None, None, SUITE_METRIC, points, stored,
                                     DetectionConfig.for_metric(SUITE_METRIC), d.incremental))


def environment_change(d: RunDetection) -> list[Finding | None]:
    """When the manifest differs from the previous run's and most series moved together (or the torch release
    changed): one finding, resetting the configuration's baselines (service.detection.environment)."""
    return [_environment_finding(d.session, d.run, d.previous_run)]


# --------------------------------------------------------------------------------------------------------------------
# The rules, in the order they run: an environment change is stored before the change points, whose baselines it
# resets. A new rule is one entry here, its function and a test (docs/architecture.md, "a detection rule").


@dataclass(frozen=True, slots=True)
class RunDetection:
    """What a rule sees: the run that arrived, the previous run of its configuration, and how far back to search."""

    session: Session
    run: Run
    previous: Run | None
    incremental: bool

    @property
    def previous_run(self) -> Run:
        assert self.previous is not None, "a rule that compares with the previous run says needs_previous"
        return self.previous


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    categories: tuple[Verdict, ...]  # what it may file (perfdash.verdicts); anything else is an error
    check: Callable[[RunDetection], list[Finding | None]]  # None: already stored (detection is idempotent)
    needs_previous: bool = True  # skipped for a configuration's first run


RULES: tuple[Rule, ...] = (
    Rule("status", (NEW_FAILURE, FIXED), status_changes),
    Rule("environment", (ENVIRONMENT,), environment_change),
    Rule("models_dropped", (MODELS_DROPPED,), models_dropped),
    Rule("performance", (REGRESSION, IMPROVEMENT, MACHINE_CHANGE), performance_change_points, needs_previous=False),
    Rule("passrate", (REGRESSION,), passrate_drop),
    Rule("suite_geomean", (REGRESSION, IMPROVEMENT, MACHINE_CHANGE), suite_geomean_change_points, needs_previous=False),
    # after the change points and the environment: tonight's step or environment change bounds what it compares
    Rule("noise", (NOISE_CHANGE,), noise_changes),
)


def run_rules(detection: RunDetection, rules: Sequence[Rule] = RULES) -> list[Finding]:
    found = []
    for rule in rules:
        if rule.needs_previous and detection.previous is None:
            continue
        for finding in rule.check(detection):
            if finding is None:
                continue
            if category(finding.category) not in rule.categories:
                raise UnknownVerdict(f"rule {rule.name} filed {finding.category!r}, not one of its categories "
                                     f"{[c.name for c in rule.categories]}")
            found.append(finding)
    return found


def detect_run(session: Session, run_id: int, *, incremental: bool = False) -> DetectionReport:
    """Detect what changed with this run (flushes; the caller commits). Safe to run again.

    ``incremental``: only the newest window of each series is searched — exact when detection ran for every earlier
    run (the post-ingest hook, a backfill oldest first); otherwise the whole history since the last stored change is
    walked (the first detection over imported history).
    """
    run = session.get(Run, run_id)
    if run is None:
        raise LookupError(f"no run {run_id}")
    found = run_rules(RunDetection(session, run, previous_run(session, run), incremental))
    queue_confirmations(session, found)
    logger.info("run %s: %d new findings", run_id, len(found))
    return DetectionReport(run_id=run_id, new_findings=tuple(f.id for f in found))


def detection_hook(session: Session, run_id: int) -> None:
    """Detection for one newly stored run: the post-ingest hook's (service.detection.night.DetectionHook, which
    detects an upload of many runs on every core)."""
    detect_run(session, run_id, incremental=True)


def acknowledge(session: Session, finding_id: int, note: str, author: str | None = None) -> Finding:
    """Mark a finding as seen with a note; it then stays quiet (no issue, not in the report's open list). The note
    is also an annotation on the series (or configuration) on the run's night, so the dashboard pages show it."""
    finding = session.get(Finding, finding_id)
    if finding is None:
        raise LookupError(f"no finding {finding_id}")
    finding.acknowledged_at = datetime.now(UTC)
    finding.acknowledged_by = author
    finding.ack_note = note
    night = night_of_run(session, finding.run_id)
    session.add(Annotation(configuration_id=None if finding.series_id else finding.configuration_id,
                           series_id=finding.series_id, night=night, author=author,
                           text=f"Acknowledged finding #{finding.id} ({finding.summary}): {note}"))
    session.flush()
    return finding
