"""View-model rules that need no browser: which group Trends starts from, the text of the model tables' cells."""

from __future__ import annotations

from datetime import date

from perfdash.metric_registry import RESULT_METRICS, shown_metrics
from service.models import Configuration
from service.queries.history import ModelPoint
from service.web.views import RunModelRow, first_group_filter, model_table, point_rows


def config(device: str, dtype: str, mode: str, threads: str = "all-cores") -> Configuration:
    return Configuration(suite="timm_models", backend="inductor", variant="", device=device, dtype=dtype, mode=mode,
                         thread_config=threads)


def test_trends_start_from_the_first_summary_group_gpu_first() -> None:
    configs = [config("cpu", "float32", "inference"), config("cuda", "bfloat16", "inference"),
               config("cuda", "amp", "training"), config("cpu", "float32", "inference", "single-thread")]
    assert first_group_filter(configs) == {"device": "cuda", "dtype": "bfloat16", "mode": "inference",
                                           "thread_config": "all-cores"}


def test_one_group_needs_no_starting_filter() -> None:
    assert first_group_filter([config("cpu", "float32", "inference"), config("cpu", "float32", "inference")]) is None


def point(run_id: int, passed: bool, speedup: float | None, **values: object) -> ModelPoint:
    return ModelPoint(run_id=run_id, night=date(2026, 1, run_id), started_at=None, torch_git_commit="abcdef0123456789",
                      accuracy=None if passed else "fail_accuracy", passed=passed, speedup=speedup,
                      eager_peak_mem=None, dynamo_peak_mem=None, graph_breaks=run_id - 1, **values)


def test_model_page_rows_are_the_latest_runs_newest_first_with_a_failures_speedup_blank() -> None:
    points = [point(1, True, 1.5, abs_latency=2.0), point(2, False, 1.7, abs_latency=3.25),
              point(3, True, 1.25, abs_latency=1.5, speedup_ci_low=1.2, speedup_ci_high=1.3,
                    eager_activation_peak_mem=0.5, dynamo_activation_peak_mem=0.25)]
    metrics = shown_metrics({m.name: [getattr(p, m.name) for p in points] for m in RESULT_METRICS})
    rows = point_rows(points, metrics, limit=2)
    assert [r.run_id for r in rows] == [3, 2]
    newest, failed = rows
    assert newest.lead == ("speedup", "1.25x") and newest.interval == "1.20–1.30x"
    assert newest.cells[0] == ("abs_latency", "1.500") and newest.activation == "0.5000 / 0.2500"
    assert newest.commit == "abcdef0123" and newest.graph_breaks == "2"
    # a failure's speedup is not shown (nor its interval); its other numbers are, as measured
    assert failed.lead == ("speedup", "-") and failed.interval == "" and failed.status == "fail_accuracy"
    assert failed.cells[0] == ("abs_latency", "3.250") and failed.activation == "-"
    assert [name for name, _ in newest.cells] == [m.name for m in metrics[1:]]


def model_row(name: str, **values: float | None) -> RunModelRow:
    return RunModelRow(name=name, series_id=1, batch_size=8, status="pass", passed=True, speedup=1.0,
                       values={m.name: values.get(m.name) for m in RESULT_METRICS}, graph_breaks=0, warnings=(),
                       error=None, is_new=False, base_status=None, base_speedup=None, delta=None, delta_class="",
                       speedup_ci="")


def test_a_model_tables_cells_follow_its_columns_and_an_unmeasured_metric_has_none() -> None:
    rows = [model_row("a", abs_latency=2.5, compiled_throughput=640.0), model_row("b", abs_latency=None)]
    metrics, table = model_table(rows)
    names = [m.name for m in metrics]
    assert "compiled_throughput" in names and "eager_throughput" not in names and "speedup" not in names
    (a, a_cells), (b, b_cells) = table
    assert (a.name, b.name) == ("a", "b")
    assert a_cells[names.index("abs_latency")] == ("2.5", "2.500")
    assert a_cells[names.index("compiled_throughput")] == ("640.0", "640.0")
    assert b_cells[names.index("abs_latency")] == ("", "-") and len(b_cells) == len(metrics)
    # without a throughput in any row, no throughput column
    assert "compiled_throughput" not in [m.name for m in model_table(rows[1:])[0]]
