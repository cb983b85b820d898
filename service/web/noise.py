"""View models of series noise (issue 39 item 3): the model page's noise table, the suite page's noise per model and
the summary's flag of series too noisy to catch a 5 % change. The figures are service/queries/noise.py's; the texts
service/web/format.py's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from perfdash.metric_registry import NOISE_METRICS, result_metric
from service.queries.noise import NoiseOut, SeriesFigures
from service.queries.runs import RunLite
from service.web import format as fmt
from service.web.views import config_label, group_title, suite_order

LEAD = NOISE_METRICS[0]  # the suite table's noise columns sit beside its lead metric (speedup)


@dataclass(frozen=True, slots=True)
class NoiseRow:
    """One metric's noise in one series, as text."""

    metric: str
    label: str
    noise: str
    detects: str
    basis: str
    flag: str  # "cannot catch 5 %" or ""

    @classmethod
    def of(cls, noise: NoiseOut) -> NoiseRow:
        return cls(metric=noise.metric, label=result_metric(noise.metric).label, noise=fmt.noise_cv(noise),
                   detects=fmt.detectable(noise), basis=fmt.noise_basis(noise), flag=fmt.catch_text(noise))


def noise_rows(noise: Sequence[NoiseOut]) -> list[NoiseRow]:
    """The model page's noise table: every noise metric of the series."""
    return [NoiseRow.of(n) for n in noise]


def lead_noise(figures: Mapping[int, SeriesFigures]) -> dict[int, NoiseRow]:
    """series id -> its lead metric's noise row (the suite page's model table)."""
    return {sid: NoiseRow.of(n) for sid, f in figures.items() if (n := f.of(LEAD.name)) is not None}


LISTED = 12  # models named per configuration in the summary's flag; the suite page's noise column has them all


@dataclass(frozen=True, slots=True)
class NoisyModel:
    name: str
    series_id: int
    rows: tuple[NoiseRow, ...]  # the metrics it cannot catch its target in

    @property
    def text(self) -> str:
        return ", ".join(f"{r.label} {r.detects}" for r in self.rows)


@dataclass(frozen=True, slots=True)
class NoisyConfiguration:
    """A configuration's latest run with series too noisy to catch a 5 % change (the summary's flag)."""

    suite: str
    label: str
    group: str
    run_id: int
    count: int  # series that cannot catch their target in some metric
    total: int  # series of the run with figures
    models: tuple[NoisyModel, ...]  # the first LISTED of them by name


def too_noisy(latest: Sequence[RunLite],
              figures: Mapping[int, tuple[int, Mapping[int, SeriesFigures]]]) -> list[NoisyConfiguration]:
    """One row per configuration whose latest run has series too noisy to catch their target, by group, suite and
    configuration. ``figures``: the read's configuration id -> (latest run id, series id -> figures)."""
    runs = {run.id: run for run in latest}
    out = []
    for run_id, series in figures.values():
        run = runs.get(run_id)
        flagged = sorted((f for f in series.values() if f.too_noisy), key=lambda f: f.name)
        if run is None or not flagged:  # run None: it became the latest between the two reads
            continue
        c = run.configuration
        models = tuple(NoisyModel(name=f.name, series_id=f.series_id,
                                  rows=tuple(NoiseRow.of(n) for n in f.cannot_catch)) for f in flagged[:LISTED])
        out.append(NoisyConfiguration(suite=c.suite, label=config_label(c), group=group_title(c), run_id=run_id,
                                      count=len(flagged), total=len(series), models=models))
    suites = suite_order({s.suite for s in out})
    return sorted(out, key=lambda s: (s.group, suites.index(s.suite), s.label))
