"""View models of series noise (issue 39 item 3): the model page's noise table, the suite page's noise per model and
the summary's flag of series too noisy to catch a 5 % change. The figures are service/queries/noise.py's; the texts
service/web/format.py's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from perfdash.metric_registry import NOISE_METRICS, result_metric
from service.queries.noise import NoiseOut, SeriesFigures, SeriesNoiseOut
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


@dataclass(frozen=True, slots=True)
class NoisySeries:
    """A series of a configuration's latest run that cannot catch its target in one metric (the summary's flag)."""

    suite: str
    label: str
    group: str
    name: str
    series_id: int
    run_id: int
    row: NoiseRow


def too_noisy(latest: Sequence[RunLite], flagged: Sequence[SeriesNoiseOut]) -> list[NoisySeries]:
    """Every (series, metric) of the latest runs that cannot catch its target (``flagged``: the read's answer), by
    group, suite, configuration and model."""
    runs = {run.id: run for run in latest}
    out: list[NoisySeries] = []
    for s in flagged:
        run = runs.get(s.run_id)
        if run is None:  # a run that became the latest between the two reads: shown on the next load
            continue
        c = run.configuration
        out.extend(NoisySeries(suite=c.suite, label=config_label(c), group=group_title(c), name=s.name,
                               series_id=s.series_id, run_id=run.id, row=NoiseRow.of(n)) for n in s.noise)
    suites = suite_order({s.suite for s in out})
    return sorted(out, key=lambda s: (s.group, suites.index(s.suite), s.label, s.name, s.row.metric))
