"""Summary metrics exactly as PyTorch's compilers dashboard defines them (benchmarks/dynamo/runner.py).

Which models a suite's summary counts (runner.py ``ParsePerformanceLogs.extract_df``, which walks the performance
CSV's models and looks each one up in the accuracy CSV):

- a model whose accuracy status is ``model_fail_to_load`` or ``eager_fail_to_run`` is dropped from the suite
  altogether (runner.py replaces its performance row by an empty frame): it never ran, so it is not a compiler
  failure and is in no total and no mean;
- a performance row with no accuracy row counts with speedup 0 (runner.py: ``acc_row.empty`` -> 0.0);
- any other status but ``pass``/``pass_due_to_skip`` counts with speedup 0;
- a model with an accuracy row but no performance row is not in the total (runner.py iterates the performance CSV);
- without any accuracy file, perfdash counts the speedups as they are (runner.py cannot run without one);
- without any performance row (an accuracy-only run, PyTorch's ``--accuracy``), the passrate is the accuracy
  passrate, as PyTorch's dashboard shows for its accuracy CSVs: models whose status passes over the models that ran;
  the speed, compile and memory figures are absent, not zero, and no model is warned about as "failed to run";
- a model written twice in one file: perfdash keeps the last row and says so at ingest (see
  perfdash.duplicates); runner.py has no rule (its lookup multiplies the rows), so there is nothing to mirror.

The numbers:

- passrate: models with (accuracy-gated) speedup > 0 over the models counted above, shown ``91%, 49/54``;
- geomean speedup: geometric mean of the passing speedups, each clipped up to 1.0 first, shown ``1.04x``
  (the unclipped geomean is computed beside it);
- compile time: arithmetic mean of compilation_latency over models whose accuracy passed and whose compile time is
  > 0 (runner.py gates this column by accuracy, not by speedup), seconds, shown ``17.21``;
- peak memory compression ratio: likewise the mean of compression_ratio > 0 over accuracy-passing models, ``1.23x``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import geometric_mean  # not scipy.stats.gmean: importing scipy.stats cost every perfdash run 1.5-2.6 s
from typing import Protocol

from perfdash.contract import ModelResult, accuracy_gate
from perfdash.metric_registry import COMPILATION_LATENCY, COMPRESSION_RATIO, PASSRATE, SPEEDUP, SummaryMetric

# Accuracy statuses of a model that never ran: runner.py leaves it out of the suite's total.
NEVER_RAN_STATUSES: frozenset[str] = frozenset({"model_fail_to_load", "eager_fail_to_run"})



@dataclass(frozen=True, slots=True)
class SuiteSummary:
    passed: int
    total: int
    geomean_speedup: float | None  # clipped; None when nothing passed
    geomean_speedup_unclipped: float | None
    mean_compile_time_s: float | None
    mean_compression_ratio: float | None

    @property
    def passrate(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def passrate_text(self) -> str:
        # PyTorch rounds the percentage to a whole number before printing it.
        return f"{round(100 * self.passrate)}%, {self.passed}/{self.total}"

    @property
    def geomean_text(self) -> str:
        return _times(self.geomean_speedup)

    @property
    def geomean_unclipped_text(self) -> str:
        return _times(self.geomean_speedup_unclipped)

    @property
    def compile_time_text(self) -> str:
        return "-" if self.mean_compile_time_s is None else f"{self.mean_compile_time_s:.2f}"

    @property
    def compression_text(self) -> str:
        return _times(self.mean_compression_ratio)

    def value_of(self, metric: SummaryMetric) -> float | None:
        """A summary metric's number; None where there is none (a passrate of no models)."""
        if metric is PASSRATE and not self.total:
            return None
        return getattr(self, metric.value_attr)

    def text_of(self, metric: SummaryMetric) -> str:
        return getattr(self, metric.text_attr)

    @classmethod
    def of(cls, stored: StoredSummary) -> SuiteSummary:
        """A stored summary (a run_summaries row, an API summary, a history point) with the dashboard's texts."""
        return cls(passed=stored.passed, total=stored.total, geomean_speedup=stored.geomean_speedup,
                   geomean_speedup_unclipped=stored.geomean_speedup_unclipped,
                   mean_compile_time_s=stored.mean_compile_time_s, mean_compression_ratio=stored.mean_compression_ratio)


class StoredSummary(Protocol):
    """The numbers of a summary as the service stores them (the columns of SuiteSummary)."""

    @property
    def passed(self) -> int: ...
    @property
    def total(self) -> int: ...
    @property
    def geomean_speedup(self) -> float | None: ...
    @property
    def geomean_speedup_unclipped(self) -> float | None: ...
    @property
    def mean_compile_time_s(self) -> float | None: ...
    @property
    def mean_compression_ratio(self) -> float | None: ...


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


@dataclass(frozen=True, slots=True)
class GatedResult:
    """The values of one model that the summary needs, after accuracy gating."""

    name: str
    speedup: float  # gated: 0 when the model failed
    compilation_latency: float | None
    compression_ratio: float | None
    # The accuracy gate alone (None: unknown, then speedup > 0 stands in). runner.py gates compile time and memory
    # by accuracy, not by speedup: a model whose accuracy passed counts with any compile time / ratio > 0.
    accuracy_passed: bool | None = None

    @property
    def gate(self) -> bool:
        return self.accuracy_passed if self.accuracy_passed is not None else self.speedup > 0

    @classmethod
    def from_result(cls, result: ModelResult) -> GatedResult:
        perf = result.performance
        return cls(
            name=result.name,
            speedup=result.gated_speedup,
            compilation_latency=perf.compilation_latency if perf else None,
            compression_ratio=perf.compression_ratio if perf else None,
            accuracy_passed=accuracy_gate(result.accuracy),
        )


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def summarize(outcomes: Sequence[GatedResult]) -> SuiteSummary:
    """As runner.py's passrate/geomean/comp_time/memory: speedup means over gated speedups > 0; compile time and
    memory over the accuracy-passing models whose value is > 0 (runner.py's ``get_passing_entries`` on the gated
    compilation_latency / compression_ratio columns)."""
    passing = [o for o in outcomes if o.speedup > 0]
    speedups = [o.speedup for o in passing]
    compile_times = [o.compilation_latency for o in outcomes
                     if o.gate and o.compilation_latency is not None and o.compilation_latency > 0]
    ratios = [o.compression_ratio for o in outcomes
              if o.gate and o.compression_ratio is not None and o.compression_ratio > 0]
    return SuiteSummary(
        passed=len(passing),
        total=len(outcomes),
        geomean_speedup=geometric_mean([max(s, 1.0) for s in speedups]) if speedups else None,
        geomean_speedup_unclipped=geometric_mean(speedups) if speedups else None,
        mean_compile_time_s=_mean(compile_times),
        mean_compression_ratio=_mean(ratios),
    )


def counted_results(results: Sequence[ModelResult]) -> list[ModelResult]:
    """The models runner.py's summary counts (see the module docstring): the performance CSV's models, less those
    that never ran (``model_fail_to_load``, ``eager_fail_to_run``)."""
    if any(r.performance is not None for r in results):
        results = [r for r in results if r.performance is not None]
    return [r for r in results if r.accuracy not in NEVER_RAN_STATUSES]


def accuracy_only(results: Sequence[ModelResult]) -> bool:
    """Results of a run that measured no performance at all (see the module docstring)."""
    return bool(results) and all(r.performance is None for r in results)


def summarize_results(results: Sequence[ModelResult]) -> SuiteSummary:
    counted = counted_results(results)
    if accuracy_only(results):
        return SuiteSummary(passed=sum(accuracy_gate(r.accuracy) for r in counted), total=len(counted),
                            geomean_speedup=None, geomean_speedup_unclipped=None, mean_compile_time_s=None,
                            mean_compression_ratio=None)
    return summarize([GatedResult.from_result(r) for r in counted])


@dataclass(frozen=True, slots=True)
class ModelWarning:
    name: str
    reason: str


def model_warnings(results: Sequence[ModelResult]) -> list[ModelWarning]:
    """Per-model warnings of the dashboard: accuracy not passing, and the limits of perfdash.metric_registry (speedup
    < 0.95, compile > 120 s, memory < 0.9)."""
    speedup_limit, compile_limit = SPEEDUP.warn_below, COMPILATION_LATENCY.warn_above
    ratio_limit = COMPRESSION_RATIO.warn_below
    assert speedup_limit is not None and compile_limit is not None and ratio_limit is not None
    out: list[ModelWarning] = []
    performance_measured = not accuracy_only(results)
    for r in results:
        if not accuracy_gate(r.accuracy):
            out.append(ModelWarning(r.name, f"accuracy {r.accuracy}"))
            continue
        if not performance_measured:
            continue
        perf = r.performance
        if perf is None or perf.speedup == 0:
            out.append(ModelWarning(r.name, "failed to run"))
            continue
        if perf.speedup < speedup_limit:
            out.append(ModelWarning(r.name, f"speedup {perf.speedup:.2f}x < {speedup_limit}x"))
        if perf.compilation_latency is not None and perf.compilation_latency > compile_limit:
            out.append(ModelWarning(r.name, f"compile {perf.compilation_latency:.0f} s > {compile_limit:.0f} s"))
        if perf.compression_ratio is not None and 0 < perf.compression_ratio < ratio_limit:
            out.append(ModelWarning(r.name, f"memory ratio {perf.compression_ratio:.2f}x < {ratio_limit}x"))
    return out
