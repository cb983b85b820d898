"""What changed between two torch versions, across every configuration: the Releases view and its JSON API.

For each configuration with runs at both versions, the **last run** (latest night, then latest id) of each version
is compared model by model by perfdash.judgement with :data:`perfdash.judgement.EVERY_METRIC`: a "regression" here is
any registry metric worse by more than its own minimum effect (Compare's is the speedup's alone). A model's impact is
the largest relative change in its verdict's direction; rows are sorted by verdict (perfdash.verdicts' order), then
by impact.

``new="latest"`` compares with each configuration's latest run, whatever its version (a release against the latest
nightly).

A pair of runs that ingest judged already (service/release_verdicts.py, table ``release_pairs``) is read from there
(issue 31: pairing two whole nights of PyTorch's matrix cost ~140 ms of Postgres a request); any other is paired here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import date
from typing import Literal

import numpy as np
import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy import orm
from sqlalchemy.orm import Session

from perfdash import judgement
from perfdash.contract import display_status
from perfdash.judgement import EVERY_METRIC, Judgement, Side
from perfdash.metric_registry import RESULT_METRICS, Better, ResultMetric
from perfdash.verdicts import MODEL_VERDICTS, UNCHANGED, ModelVerdictName, Severity, severity_of_direction
from service.models import Configuration, ReleasePair, Result, Run
from service.queries import torch_versions
from service.queries.filters import ConfigFilter
from service.queries.schemas import ConfigurationOut

LATEST = "latest"  # as ``new``: each configuration's latest run
DEFAULT_LIMIT = 100  # model rows returned (counts always cover every model; the page links to all)


# Every result metric of the registry is judged, by its own direction and minimum effect.
METRICS: tuple[ResultMetric, ...] = RESULT_METRICS

VERDICT_ORDER: tuple[str, ...] = tuple(v.name for v in MODEL_VERDICTS)  # perfdash.verdicts' order


class MetricRuleOut(BaseModel):
    key: str
    label: str
    min_effect: float
    higher_is_better: bool


class MetricChange(BaseModel):
    base: float
    new: float
    change: float  # new / base - 1
    direction: Literal["better", "worse", "same"]  # beyond the metric's minimum effect, by its direction


class RunRef(BaseModel):
    id: int
    night: date
    torch_version: str | None
    torch_git_commit: str | None


class ModelChange(BaseModel):
    configuration_id: int
    series_id: int
    name: str
    verdict: ModelVerdictName
    base_status: str | None  # the accuracy status ("pass" when only performance ran), None: not in that run
    new_status: str | None
    impact: float  # the largest relative change in the verdict's direction (status changes: 1.0)
    metrics: dict[str, MetricChange]  # by MetricRule.key, where both runs have the value


class ConfigurationChange(BaseModel):
    configuration: ConfigurationOut
    base_run: RunRef
    new_run: RunRef
    counts: dict[str, int]  # verdict -> models


class ReleaseComparison(BaseModel):
    base: str
    new: str
    metrics: list[MetricRuleOut]
    configurations: list[ConfigurationChange]
    only_base: list[int]  # configuration ids with a run at the base version only
    only_new: list[int]
    totals: dict[str, int]  # verdict -> models, over every configuration
    models_total: int  # rows before the limit
    models: list[ModelChange]  # sorted by impact, at most ``limit``, unchanged models left out unless asked


# The columns paired per model: status, the speedup's interval, then each metric (base and new side of each).
_STATUS = ("series_id", "name", "accuracy", "passed")
_NUMBERS = ("speedup_ci_low", "speedup_ci_high", *(m.name for m in METRICS))


def status_of(accuracy: str | None, passed: bool | None) -> str | None:
    """The status shown for a result (contract.display_status); None: not in that run."""
    return None if passed is None else display_status(accuracy, passed)


@dataclass(frozen=True, slots=True)
class Paired:
    """Every model of the compared configurations, one array element each (NaN: no value), base and new side."""

    configuration_id: np.ndarray
    series_id: list[int]
    name: list[str]
    accuracy: tuple[list[str | None], list[str | None]]  # filled for the models shown (:func:`fill_accuracy`)
    passed: tuple[np.ndarray, np.ndarray]  # 1.0 passed, 0.0 not, NaN: not in that run
    numbers: dict[str, tuple[np.ndarray, np.ndarray]]


def judge(paired: Paired) -> Judgement:
    """Every model's verdict at once (perfdash.judgement, every registry metric by its own minimum effect)."""
    base_numbers = {m.name: paired.numbers[m.name][0] for m in METRICS}
    new_numbers = {m.name: paired.numbers[m.name][1] for m in METRICS}
    (base_low, new_low), (base_high, new_high) = paired.numbers["speedup_ci_low"], paired.numbers["speedup_ci_high"]
    return judgement.judge(Side(paired.passed[0], base_numbers, (base_low, base_high)),
                           Side(paired.passed[1], new_numbers, (new_low, new_high)), EVERY_METRIC)


def _direction_word(direction: int) -> Literal["better", "worse", "same"]:
    severity = severity_of_direction(direction)
    return "same" if severity is Severity.NEUTRAL else "better" if severity is Severity.BETTER else "worse"


def model_change(paired: Paired, judged: Judgement, i: int) -> ModelChange:
    metrics = {}
    for rule in METRICS:
        relative = judged.change[rule.name][i]
        if not np.isnan(relative):
            base, new = paired.numbers[rule.name]
            metrics[rule.name] = MetricChange(
                base=float(base[i]), new=float(new[i]), change=float(relative),
                direction=_direction_word(int(judged.direction[rule.name][i])))
    base_passed, new_passed = (None if np.isnan(p[i]) else bool(p[i]) for p in paired.passed)
    return ModelChange(configuration_id=int(paired.configuration_id[i]), series_id=paired.series_id[i],
                       name=paired.name[i], verdict=ModelVerdictName(judged.verdict_of(i).name),
                       base_status=status_of(paired.accuracy[0][i], base_passed),
                       new_status=status_of(paired.accuracy[1][i], new_passed), impact=float(judged.impact[i]),
                       metrics=metrics)


# --------------------------------------------------------------------------------------------------------------------
# Reads


def pair_results(session: Session, runs: dict[int, tuple[int, int]],
                 only: set[tuple[int, str]] | None = None) -> Paired:
    """``runs``: configuration id -> (base run id, new run id). Each model of either run, paired by name within its
    configuration (a full outer join, done here in numpy: the database's hash join of ~50,000 rows on the name was
    most of the page at PyTorch's matrix, issue 31). ``only``: just these (configuration id, name), e.g. the models
    shown when the verdicts were read from ``release_pairs``."""
    run_ids = sorted({r for pair in runs.values() for r in pair})
    probes = None if only is None else sorted({(run, name) for c, name in only for run in runs[c]})
    columns = _run_columns(session, run_ids, probes)
    if only is not None:  # the runs' rows were read whole (many models shown): keep those asked for
        config_of_run = {r: c for c, pair in runs.items() for r in pair}
        keep = np.array([(config_of_run[int(r)], name) in only for r, name in zip(columns.run_id, columns.name,
                                                                                  strict=True)], dtype=bool)
        columns = columns.take(np.flatnonzero(keep))
    return pair_columns(columns, runs)


def pair_columns(columns: _RunColumns, runs: dict[int, tuple[int, int]]) -> Paired:
    """The pairing of :func:`pair_results` over result rows already read (``columns``: rows of those runs only)."""
    config_of = {r: c for c, pair in runs.items() for r in pair}  # a run belongs to one configuration
    known_runs = np.array(sorted(config_of), dtype=np.int64)
    row_config = np.array([config_of[r] for r in known_runs.tolist()], dtype=np.int64)[
        np.searchsorted(known_runs, columns.run_id)]
    codes = {name: i for i, name in enumerate(dict.fromkeys(columns.name))}
    name_code = np.fromiter(map(codes.__getitem__, columns.name), dtype=np.int64, count=len(columns.name))
    row_key = row_config * max(len(codes), 1) + name_code
    in_base = np.isin(columns.run_id, [b for b, _ in runs.values()])
    in_new = np.isin(columns.run_id, [n for _, n in runs.values()])  # a run can be both (its own version's last)
    keys, inverse = np.unique(np.concatenate([row_key[in_base], row_key[in_new]]), return_inverse=True)
    size = len(keys)
    base_at, new_at = inverse[:int(in_base.sum())], inverse[int(in_base.sum()):]
    base_rows, new_rows = np.flatnonzero(in_base), np.flatnonzero(in_new)

    def spread(values: np.ndarray, rows: np.ndarray, at: np.ndarray) -> np.ndarray:
        out = np.full(size, np.nan)
        out[at] = values[rows]
        return out

    def both(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return spread(values, base_rows, base_at), spread(values, new_rows, new_at)

    # a model's row of the new run names it when both have it (coalesce(new, base))
    first = np.empty(size, dtype=np.int64)
    first[base_at] = base_rows
    first[new_at] = new_rows
    return Paired(configuration_id=keys // max(len(codes), 1), series_id=columns.series_id[first].tolist(),
                  name=[columns.name[i] for i in first.tolist()], accuracy=([None] * size, [None] * size),
                  passed=both(columns.passed), numbers={k: both(columns.numbers[k]) for k in _NUMBERS})


def fill_accuracy(session: Session, runs: dict[int, tuple[int, int]], paired: Paired, shown: list[int]) -> None:
    """The accuracy column of the models shown, both sides (the verdicts need ``passed`` only: reading every row's
    accuracy text was a third of the results' read)."""
    wanted = {(run, paired.name[i]): (side, i) for i in shown
              for side, run in enumerate(runs[int(paired.configuration_id[i])])}
    if not wanted:
        return
    query = sa.select(Result.run_id, Result.name, Result.accuracy)
    if len(wanted) <= ACCURACY_PROBES:
        query = query.where(sa.tuple_(Result.run_id, Result.name).in_(list(wanted)))
    else:  # "show all": the runs' rows, not tens of thousands of (run, name) probes
        query = query.where(Result.run_id.in_(sorted({run for run, _ in wanted})))
    for run_id, name, accuracy in session.connection().execute(query):
        if (run_id, name) not in wanted:
            continue
        for side, run in enumerate(runs[int(paired.configuration_id[wanted[(run_id, name)][1]])]):
            if run == run_id:  # a run that is both sides (its version's last run and the latest) fills both
                paired.accuracy[side][wanted[(run_id, name)][1]] = accuracy


@dataclass(frozen=True, slots=True)
class _RunColumns:
    """Every result row of some runs, one array element each (NaN: no value)."""

    run_id: np.ndarray
    series_id: np.ndarray
    name: list[str]
    passed: np.ndarray
    numbers: dict[str, np.ndarray]

    def take(self, rows: np.ndarray) -> _RunColumns:
        return _RunColumns(self.run_id[rows], self.series_id[rows], [self.name[i] for i in rows.tolist()],
                           self.passed[rows], {k: v[rows] for k, v in self.numbers.items()})


NAME_SEPARATOR = "\n"
ACCURACY_PROBES = 2_000  # (run, name) pairs looked up one by one; more read their runs' rows


def _binary(column: sa.SQLColumnExpression, send: str) -> sa.ColumnElement:
    return sa.func.string_agg(getattr(sa.func, send)(column), sa.literal(b"", sa.LargeBinary))


def _run_columns(session: Session, run_ids: list[int], probes: list[tuple[int, str]] | None = None) -> _RunColumns:
    """The runs' results column by column in one row: numbers as packed big-endian binary (float8send: exact, NULL
    as NaN), names as one newline-separated text (as an array if a name holds a newline). Row by row, the ~100,000
    rows of two nights of the matrix cost the app ~400 ms of CPU to convert; this way ~30 ms. Every aggregate of the
    one aggregation reads the rows in the same order, so element i of each column is the same row."""
    if not run_ids:
        return _RunColumns(np.array([], dtype=np.int64), np.array([], dtype=np.int64), [], np.array([]),
                           {k: np.array([]) for k in _NUMBERS})
    where: sa.ColumnElement[bool] = Result.run_id.in_(run_ids)
    if probes is not None and len(probes) <= ACCURACY_PROBES:  # a few models of the runs: (run, name) probes
        where = sa.tuple_(Result.run_id, Result.name).in_(probes) if probes else sa.false()
    row = _read_columns(session, where, sa.func.string_agg(Result.name, sa.literal(NAME_SEPARATOR)))
    names = [] if row[2] is None else row[2].split(NAME_SEPARATOR)
    if len(names) != len(row[0] or b"") // 4:  # a name holds the separator: read them as an array (slower)
        row = _read_columns(session, where, sa.func.array_agg(Result.name))
        names = list(row[2] or [])

    def ints(value: bytes | None) -> np.ndarray:
        return np.frombuffer(value or b"", dtype=">i4").astype(np.int64)

    def floats(value: bytes | None) -> np.ndarray:
        return np.frombuffer(value or b"", dtype=">f8").astype(float)

    out = _RunColumns(run_id=ints(row[0]), series_id=ints(row[1]), name=names, passed=floats(row[3]),
                      numbers={k: floats(v) for k, v in zip(_NUMBERS, row[4:], strict=True)})
    lengths = {len(out.run_id), len(out.series_id), len(out.name), len(out.passed),
               *(len(v) for v in out.numbers.values())}
    if len(lengths) != 1:
        raise RuntimeError(f"result columns of different lengths: {sorted(lengths)}")
    return out


def _read_columns(session: Session, where: sa.ColumnElement[bool], names: sa.ColumnElement) -> sa.Row:
    nan = sa.literal(float("nan"), sa.Float)
    statement = sa.select(
        _binary(Result.run_id, "int4send"), _binary(Result.series_id, "int4send"), names,
        _binary(sa.cast(sa.cast(Result.passed, sa.Integer), sa.Float), "float8send"),
        *(_binary(sa.func.coalesce(getattr(Result, k), nan), "float8send") for k in _NUMBERS),
    ).where(where)
    return session.connection().execute(statement).one()


def versions(session: Session, filters: ConfigFilter = ConfigFilter()) -> list[str]:
    """Torch versions that have runs of the selected configurations, newest first."""
    query = sa.select(Run.torch_version).distinct().where(Run.torch_version.is_not(None))
    if clauses := filters.clauses():
        found = session.scalars(query.join(Run.configuration).where(*clauses))
    elif session.get_bind().dialect.name == "postgresql":
        found = session.scalars(_distinct_versions())
    else:  # SQLite (tests, a laptop): its compound selects take no LIMIT inside; a small history anyway
        found = session.scalars(query)
    return list(reversed(torch_versions.ordered(v for v in found if v is not None)))  # none are: the query says so


def _distinct_versions() -> sa.Select:
    """Every torch version of the runs as a skip scan of ``ix_runs_torch_version``: one index probe per version (a
    few hundred), where DISTINCT reads one index entry per run (every run of years of nightlies of the matrix)."""
    first = sa.select(Run.torch_version).where(Run.torch_version.is_not(None)).order_by(Run.torch_version).limit(1)
    found = first.cte("found", recursive=True)
    later = orm.aliased(Run)
    following = (sa.select(later.torch_version).where(later.torch_version > found.c.torch_version)
                 .order_by(later.torch_version).limit(1).scalar_subquery())
    found = found.union_all(sa.select(following).where(found.c.torch_version.is_not(None)))
    return sa.select(found.c.torch_version).where(found.c.torch_version.is_not(None))


def last_runs(session: Session, version: str, filters: ConfigFilter) -> dict[int, RunRef]:
    """Per configuration, its last run at ``version`` (LATEST: its last run): the latest night, then the latest id.
    Only the columns shown are read (whole runs with their configuration were ~40 % of the page at issue 31's
    matrix)."""
    query = (sa.select(Run.configuration_id, Run.id, Run.night, Run.torch_version, Run.torch_git_commit)
             .join(Run.configuration).where(*filters.clauses()).order_by(Run.night, Run.id))
    if version == LATEST:
        # one backward probe of ix_runs_configuration_night per configuration, then its runs of that night by the
        # same index (as one join, the planner scanned every run)
        earlier = orm.aliased(Run)
        last_night = (sa.select(sa.func.max(earlier.night)).where(earlier.configuration_id == Configuration.id)
                      .correlate(Configuration).scalar_subquery())
        nights = [(c, night) for c, night in session.execute(
            sa.select(Configuration.id, last_night).where(*filters.clauses())) if night is not None]
        if not nights:
            return {}
        query = query.where(sa.tuple_(Run.configuration_id, Run.night).in_(nights))
    else:
        query = query.where(Run.torch_version == version)
    return {c: RunRef(id=run_id, night=night, torch_version=torch_version, torch_git_commit=commit)
            for c, run_id, night, torch_version, commit in session.execute(query)}


def _configurations(session: Session, ids: list[int]) -> dict[int, ConfigurationOut]:
    if not ids:
        return {}
    return {row.id: ConfigurationOut.from_row(row)
            for row in session.scalars(sa.select(Configuration).where(Configuration.id.in_(ids)))}


def _with_accuracy(session: Session, runs: dict[int, tuple[int, int]], paired: Paired, shown: list[int]) -> list[int]:
    fill_accuracy(session, runs, paired, shown)
    return shown


def compare_versions(session: Session, base: str, new: str, filters: ConfigFilter = ConfigFilter(), *,
                     limit: int = DEFAULT_LIMIT, include_unchanged: bool = False) -> ReleaseComparison:
    """The view. A pair of runs whose verdicts are kept in ``release_pairs`` (service/release_verdicts.py: each
    release's last run against the latest run or a newer release's) is read from there: its counts, and its models
    that are not unchanged by verdict and impact; the rest are paired live. Either way only the models shown have
    their values read and judged again here, so each answer is the one the live pairing gives."""
    before, after = last_runs(session, base, filters), last_runs(session, new, filters)
    both = sorted(set(before) & set(after))
    runs = {c: (before[c].id, after[c].id) for c in both}
    # with unchanged models shown, every model is listed: the stored rows leave them out
    stored = {} if include_unchanged else stored_pairs(session, runs)
    live = {c: pair for c, pair in runs.items() if c not in stored}
    paired = pair_results(session, live)
    judged = judge(paired)
    counts = {**_counts(sorted(live), paired, judged), **{c: pair.counts for c, pair in stored.items()}}
    shown_configurations = _configurations(session, both)
    configurations = [ConfigurationChange(configuration=shown_configurations[c], base_run=before[c],
                                          new_run=after[c], counts=counts[c]) for c in both]
    configurations.sort(key=lambda c: (-sum(c.counts[v.name] for v in MODEL_VERDICTS if v.severity is Severity.WORSE),
                                       c.configuration.suite, c.configuration.id))
    totals = {v: sum(counts[c][v] for c in both) for v in VERDICT_ORDER}
    shown = np.flatnonzero(judged.verdict != VERDICT_ORDER.index(UNCHANGED.name)) if not include_unchanged \
        else np.arange(len(paired.name))
    # status changes and regressions first, then by impact, name, configuration
    names = np.array(paired.name, dtype=str)
    order = shown[np.lexsort((paired.configuration_id[shown], names[shown], -judged.impact[shown],
                              judged.verdict[shown]))].tolist()
    models_total = len(order) + sum(n for pair in stored.values() for v, n in pair.counts.items()
                                    if v != UNCHANGED.name)
    if stored:  # the top of the stored rows and of the live ones, merged by the same order
        ranked = sorted([*((int(judged.verdict[i]), -float(judged.impact[i]), paired.name[i],
                            int(paired.configuration_id[i])) for i in order[:limit]),
                         *_stored_top(stored, limit)])[:limit]
        shown_models = {(c, name) for _, _, name, c in ranked}
        paired = pair_results(session, {c: runs[c] for c in sorted({c for c, _ in shown_models})}, shown_models)
        judged = judge(paired)
        at = {(int(c), name): i for i, (c, name) in enumerate(zip(paired.configuration_id, paired.name, strict=True))}
        order = [at[(c, name)] for _, _, name, c in ranked]
        runs = {c: runs[c] for c, _ in shown_models}
    return ReleaseComparison(
        base=base, new=new, metrics=[MetricRuleOut(key=m.name, label=m.label, min_effect=m.min_effect,
                                                   higher_is_better=m.better is Better.HIGHER) for m in METRICS],
        configurations=configurations, only_base=sorted(set(before) - set(after)),
        only_new=sorted(set(after) - set(before)), totals=totals, models_total=models_total,
        models=[model_change(paired, judged, i) for i in _with_accuracy(session, runs, paired, order[:limit])])


def _counts(configurations: list[int], paired: Paired, judged: Judgement) -> dict[int, dict[str, int]]:
    """Each configuration's verdict counts in one bincount (configuration index x verdict)."""
    if not configurations:
        return {}
    index = np.searchsorted(configurations, paired.configuration_id)
    cells = np.bincount(index * len(VERDICT_ORDER) + judged.verdict,
                        minlength=len(configurations) * len(VERDICT_ORDER)).reshape(len(configurations), -1)
    return {c: {v: int(n) for v, n in zip(VERDICT_ORDER, row, strict=True)}
            for c, row in zip(configurations, cells, strict=True)}


# --------------------------------------------------------------------------------------------------------------------
# The verdicts kept at ingest (table release_pairs, filled by service/release_verdicts.py)

# what the kept verdicts must have been judged by (perfdash.judgement.criteria_words), as release_pairs.criteria
CRITERIA = hashlib.sha256(judgement.criteria_words(EVERY_METRIC).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class PairVerdicts:
    """One pair of runs judged: verdict counts, and the models that are not unchanged (element i of ``names``,
    ``verdicts`` (index into VERDICT_ORDER) and ``impacts`` the same model), as ``release_pairs`` keeps them."""

    counts: dict[str, int]
    names: list[str]
    verdicts: np.ndarray
    impacts: np.ndarray

    def columns(self) -> dict[str, object]:
        """The row's columns: names as JSON, verdicts one byte each, impacts little-endian float64."""
        return {"counts": self.counts, "names": self.names, "verdicts": self.verdicts.astype(np.uint8).tobytes(),
                "impacts": self.impacts.astype("<f8").tobytes()}


def judge_pairs(session: Session, configuration_id: int, pairs: list[tuple[int, int]]) -> list[PairVerdicts]:
    """What :func:`compare_versions` shows of each (base run, new run) of one configuration, to be kept; the runs'
    results are read once for all the pairs."""
    if not pairs:
        return []
    columns = _run_columns(session, sorted({run for pair in pairs for run in pair}))
    unchanged = VERDICT_ORDER.index(UNCHANGED.name)
    out = []
    for pair in pairs:
        paired = pair_columns(columns.take(np.flatnonzero(np.isin(columns.run_id, pair))), {configuration_id: pair})
        judged = judge(paired)
        kept = np.flatnonzero(judged.verdict != unchanged)
        out.append(PairVerdicts(counts=_counts([configuration_id], paired, judged)[configuration_id],
                                names=[paired.name[i] for i in kept.tolist()], verdicts=judged.verdict[kept],
                                impacts=judged.impact[kept]))
    return out


@dataclass(frozen=True, slots=True)
class StoredPair:
    """A kept pair as read back: the names stay JSON text until a model of theirs may be shown (most pairs have
    none among the first ``limit``; parsing every pair's names was a third of the read)."""

    counts: dict[str, int]
    names_json: str
    verdicts: np.ndarray
    impacts: np.ndarray


def stored_pairs(session: Session, runs: dict[int, tuple[int, int]]) -> dict[int, StoredPair]:
    """Configuration id -> its kept pair, for the (base, new) runs that are kept under today's criteria."""
    if not runs:
        return {}
    query = sa.select(ReleasePair.configuration_id, ReleasePair.counts, sa.cast(ReleasePair.names, sa.Text),
                      ReleasePair.verdicts, ReleasePair.impacts).where(
        sa.tuple_(ReleasePair.base_run_id, ReleasePair.new_run_id).in_(list(runs.values())),
        ReleasePair.criteria == CRITERIA)
    return {c: StoredPair(counts={v: int(counts.get(v, 0)) for v in VERDICT_ORDER}, names_json=names,
                          verdicts=np.frombuffer(verdicts, dtype=np.uint8).astype(np.int64),
                          impacts=np.frombuffer(impacts, dtype="<f8"))
            for c, counts, names, verdicts, impacts in session.execute(query) if c in runs}


def _stored_top(stored: dict[int, StoredPair], limit: int) -> list[tuple[int, float, str, int]]:
    """The first ``limit`` kept models of these pairs in the view's order, as (verdict, -impact, name,
    configuration id): by verdict and impact first, then the models tied with the last of those sorted as the live
    pairing sorts them (numpy's lexsort, names by code point)."""
    if not stored:
        return []
    pairs = list(stored.items())
    owner = np.concatenate([np.full(len(p.verdicts), k, dtype=np.int64) for k, (_, p) in enumerate(pairs)])
    position = np.concatenate([np.arange(len(p.verdicts)) for _, p in pairs])
    verdicts = np.concatenate([p.verdicts for _, p in pairs])
    impacts = np.concatenate([p.impacts for _, p in pairs])
    candidates = np.lexsort((-impacts, verdicts))
    if len(candidates) > limit:  # every model up to the limit-th's (verdict, impact), ties included
        edge = candidates[limit - 1]
        candidates = np.flatnonzero((verdicts < verdicts[edge])
                                    | ((verdicts == verdicts[edge]) & (-impacts <= -impacts[edge])))
    names_of = {k: json.loads(pairs[k][1].names_json) for k in np.unique(owner[candidates]).tolist()}
    names = [names_of[k][i] for k, i in zip(owner[candidates].tolist(), position[candidates].tolist(), strict=True)]
    configurations = np.array([pairs[k][0] for k in owner[candidates].tolist()], dtype=np.int64)
    order = np.lexsort((configurations, np.array(names, dtype=str), -impacts[candidates], verdicts[candidates]))
    return [(int(verdicts[candidates[j]]), -float(impacts[candidates[j]]), names[j], int(configurations[j]))
            for j in order[:limit].tolist()]
