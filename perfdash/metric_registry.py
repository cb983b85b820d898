"""The metrics perfdash stores, shows, compares and watches: one entry each, read by every consumer.

Two kinds:

- :data:`RESULT_METRICS`: a number per model and run. Its ``name`` is everything at once: the column of table
  ``results``, the field of the API's results and history points, the key of the model page's chart data, and (for a
  PyTorch metric) the column of PyTorch's performance CSV (``PerformanceRow``) or (for perfdash's own) the field of
  the samples file (``ModelSamples``). The ingest, the ORM columns, the API models, the model page, compare and
  detection iterate this tuple; adding a metric is an entry here, a migration adding its column, and a test.
- :data:`SUMMARY_METRICS`: a suite's executive-summary number (perfdash.metrics.SuiteSummary), in the order of
  PyTorch's executive summary (benchmarks/dynamo/runner.py): passrate, geomean speedup (clipped, unclipped), mean
  compile time, mean memory compression ratio.

Minimum effects are DESIGN.md's ("speedup and memory 5 %, compile time 10 %"): a relative change under them is noise
for detection, compare and the colours of the pages. Warning limits and targets are PyTorch's dashboard's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum


class Better(StrEnum):
    """Which way a metric improves; its string is what the bisection contract carries (``higher`` / ``lower``)."""

    LOWER = "lower"
    HIGHER = "higher"

    def is_regression(self, change: float) -> bool:
        """Whether a change (new minus old, relative or absolute) goes the worse way."""
        return change < 0 if self is Better.HIGHER else change > 0


class Source(StrEnum):
    """Where a result metric's value comes from at ingest."""

    PERFORMANCE_CSV = "performance"  # the column of PyTorch's performance CSV (PerformanceRow attribute)
    SAMPLES = "samples"  # perfdash's samples file (ModelSamples attribute): PyTorch's CSVs have no such column


class Display(StrEnum):
    TIMES = "times"  # 1.23x
    NUMBER = "number"  # 12.345


def _text(value: float | None, display: Display, digits: int) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}x" if display is Display.TIMES else f"{value:.{digits}f}"


def relative_change(base: float | None, new: float | None) -> float | None:
    """``new / base - 1``; None when either is missing or the base is not positive."""
    if base is None or new is None or base <= 0:
        return None
    return new / base - 1.0


@dataclass(frozen=True, slots=True)
class ResultMetric:
    name: str  # result column, API field, chart key, CSV column / samples field
    label: str  # "compile time"
    unit: str  # "x", "ms", "s", "samples/s"
    heading: str  # a table column's heading, "compile s"
    better: Better
    min_effect: float  # relative change that counts (detection, compare, colours)
    source: Source
    display: Display
    digits: int
    detected: bool  # change-point detection watches it (and so bisection may be asked about it)
    # Only some runs measure it (training throughput): the model page shows its chart and column where a value exists.
    optional: bool = False
    warn_below: float | None = None  # the dashboard's per-model warning limits
    warn_above: float | None = None
    # The metric whose move this one follows on the same night: a slowdown moves a model's speedup and its latency
    # together, one regression to a reader, so the leader's A/B answers both and only the leader gets an issue.
    follows: str | None = None

    @property
    def title(self) -> str:
        return f"{self.label} ({self.unit})"

    def text(self, value: float | None) -> str:
        return _text(value, self.display, self.digits)

    def text_of(self, result: object) -> str:
        """The text of this metric's value on a result-like object (a plain getattr: Jinja's ``attr`` filter costs
        a ``getattr_static`` per cell, a third of a long model page's render)."""
        return self.text(getattr(result, self.name))

    @property
    def csv_heading(self) -> str:
        """The heading of a table in PyTorch's terms: the column name, with its unit unless a ratio."""
        return self.name if self.unit == "x" else f"{self.name} ({self.unit})"

    def plain_text(self, value: float | None) -> str:
        """The number alone (no ``x``), as the report's CSV-like tables show it."""
        return "-" if value is None else f"{value:.{self.digits}f}"


@dataclass(frozen=True, slots=True)
class SummaryMetric:
    key: str  # stable name: finding metric, chart key, CSS data attribute
    label: str  # the dashboard's heading
    chart_title: str  # the trend chart's title, "mean compile time (s)"
    heading: str  # a table column's heading, "compile s"
    pytorch_title: str  # the heading of PyTorch's executive summary (report, `perfdash summary`)
    value_attr: str  # attribute of SuiteSummary and column of run_summaries
    text_attr: str  # SuiteSummary's text of it ("91%, 49/54", "1.04x")
    better: Better
    min_effect: float  # relative change that colours a summary cell; detection's minimum for the geomean
    delta_format: str  # format of the report's change against the previous run
    on_dashboard: bool = True  # one of the four HUD metrics (the unclipped geomean is shown beside, not as one)
    target: float | None = None  # below it a cell is flagged (PyTorch's HUD targets)
    percent: bool = False  # a share, shown in percent

    @property
    def target_text(self) -> str:
        if self.target is None:
            return ""
        return f"{100 * self.target:g} %" if self.percent else f"{self.target:g}x"


# Speedup first: the pages gate it by accuracy and put its confidence interval beside it.
SPEEDUP = ResultMetric(
    name="speedup", label="speedup", unit="x", heading="speedup", better=Better.HIGHER, min_effect=0.05,
    source=Source.PERFORMANCE_CSV, display=Display.TIMES, digits=2, detected=True, warn_below=0.95)
ABS_LATENCY = ResultMetric(
    name="abs_latency", label="latency", unit="ms", heading="latency ms", better=Better.LOWER, min_effect=0.05,
    source=Source.PERFORMANCE_CSV, display=Display.NUMBER, digits=3, detected=True, follows=SPEEDUP.name)
COMPILATION_LATENCY = ResultMetric(
    name="compilation_latency", label="compile time", unit="s", heading="compile s", better=Better.LOWER,
    min_effect=0.10, source=Source.PERFORMANCE_CSV, display=Display.NUMBER, digits=1, detected=True,
    warn_above=120.0)
COMPRESSION_RATIO = ResultMetric(
    name="compression_ratio", label="peak memory compression ratio", unit="x", heading="memory ratio",
    better=Better.HIGHER, min_effect=0.05, source=Source.PERFORMANCE_CSV, display=Display.TIMES, digits=2,
    detected=True, warn_below=0.9)
# Training throughput, samples per second of each side (perfdash.contract.throughput). Not watched by detection yet:
# the compiled side's moves are the speedup's, which alerts already.
EAGER_THROUGHPUT = ResultMetric(
    name="eager_throughput", label="eager throughput", unit="samples/s", heading="eager samples/s",
    better=Better.HIGHER, min_effect=0.05, source=Source.SAMPLES, display=Display.NUMBER, digits=1, detected=False,
    optional=True)
COMPILED_THROUGHPUT = ResultMetric(
    name="compiled_throughput", label="compiled throughput", unit="samples/s", heading="compiled samples/s",
    better=Better.HIGHER, min_effect=0.05, source=Source.SAMPLES, display=Display.NUMBER, digits=1, detected=False,
    optional=True)

RESULT_METRICS: tuple[ResultMetric, ...] = (SPEEDUP, ABS_LATENCY, COMPILATION_LATENCY, COMPRESSION_RATIO,
                                            EAGER_THROUGHPUT, COMPILED_THROUGHPUT)
DETECTED_METRICS: tuple[ResultMetric, ...] = tuple(m for m in RESULT_METRICS if m.detected)
# The metrics whose between-run noise and minimum detectable effect the pages and the API show (perfdash.noise, read
# by service/queries/noise.py): those the alert policy watches, since a detectable change is the policy's.
NOISE_METRICS: tuple[ResultMetric, ...] = DETECTED_METRICS

PASSRATE = SummaryMetric(
    key="passrate", label="Passrate", chart_title="passrate (%)", heading="passrate", pytorch_title="Passrate",
    value_attr="passrate", text_attr="passrate_text", better=Better.HIGHER, min_effect=0.05, delta_format="+.0%",
    target=0.90, percent=True)
GEOMEAN = SummaryMetric(
    key="geomean", label="Geometric mean speedup", chart_title="geomean speedup (x)", heading="geomean speedup",
    pytorch_title="Geometric mean speedup", value_attr="geomean_speedup", text_attr="geomean_text",
    better=SPEEDUP.better, min_effect=SPEEDUP.min_effect, delta_format="+.2f", target=0.95)
GEOMEAN_UNCLIPPED = SummaryMetric(
    key="geomean_unclipped", label="Geometric mean speedup, unclipped", chart_title="unclipped geomean speedup (x)",
    heading="geomean unclipped", pytorch_title="Geometric mean speedup, unclipped",
    value_attr="geomean_speedup_unclipped", text_attr="geomean_unclipped_text", better=SPEEDUP.better,
    min_effect=SPEEDUP.min_effect, delta_format="+.2f", on_dashboard=False)
# A suite's mean compile time colours at 5 % like the other summary cells (per model, detection wants 10 %).
COMPILE_TIME = SummaryMetric(
    key="compile_time", label="Mean compilation time (s)", chart_title="mean compile time (s)", heading="compile s",
    pytorch_title="Mean compilation time (seconds)", value_attr="mean_compile_time_s", text_attr="compile_time_text",
    better=COMPILATION_LATENCY.better, min_effect=0.05, delta_format="+.2f")
MEMORY = SummaryMetric(
    key="memory", label="Peak memory footprint compression ratio", chart_title="memory compression ratio (x)",
    heading="memory ratio", pytorch_title="Peak memory footprint compression ratio (higher is better)",
    value_attr="mean_compression_ratio", text_attr="compression_text", better=COMPRESSION_RATIO.better,
    min_effect=COMPRESSION_RATIO.min_effect, delta_format="+.2f", target=0.9)

SUMMARY_METRICS: tuple[SummaryMetric, ...] = (PASSRATE, GEOMEAN, GEOMEAN_UNCLIPPED, COMPILE_TIME, MEMORY)
DASHBOARD_METRICS: tuple[SummaryMetric, ...] = tuple(m for m in SUMMARY_METRICS if m.on_dashboard)

# Detection's absolute alert on the passrate: this many percentage points (as a fraction) fewer models passing than
# the previous run.
PASSRATE_ALERT_DROP = 0.05

# Bisection can also be asked about a model's accuracy status (pass is better than fail); it is no number column.
ACCURACY = "accuracy"
BISECT_METRICS: tuple[str, ...] = (*(m.name for m in DETECTED_METRICS), ACCURACY)


def result_metric(name: str) -> ResultMetric:
    for metric in RESULT_METRICS:
        if metric.name == name:
            return metric
    raise KeyError(f"no result metric {name!r}: one of {', '.join(m.name for m in RESULT_METRICS)}")


def leader_of(name: str | None) -> str | None:
    """The metric whose move ``name`` follows (ResultMetric.follows); None for a leader, a summary metric's key,
    ``accuracy`` or no metric."""
    return next((m.follows for m in RESULT_METRICS if m.name == name), None)


def followers_of(name: str | None) -> tuple[str, ...]:
    """The metrics that follow ``name``'s move (their findings are answered by its A/B and its issue)."""
    return tuple(m.name for m in RESULT_METRICS if name is not None and m.follows == name)


def shown_metrics(columns: Mapping[str, Iterable[float | None]]) -> list[ResultMetric]:
    """The metrics a table or chart shows of these values (metric name -> its values), in registry order: all, less
    the optional ones (training throughput) that no value has."""
    return [m for m in RESULT_METRICS if not m.optional or any(v is not None for v in columns.get(m.name, ()))]


def better_of(name: str) -> Better:
    """Which way is better for a finding's metric: a result metric, a summary metric's key, or ``accuracy``."""
    if name == ACCURACY:
        return Better.HIGHER
    for summary in SUMMARY_METRICS:
        if summary.key == name:
            return summary.better
    return result_metric(name).better


def min_effect_of(name: str) -> float:
    """The minimum relative effect of a result metric or a summary metric's key; none (0) for ``accuracy``, whose
    change is a status change."""
    if name == ACCURACY:
        return 0.0
    for summary in SUMMARY_METRICS:
        if summary.key == name:
            return summary.min_effect
    return result_metric(name).min_effect
