"""The table ``perfdash scale`` prints: per world size the global throughput, the scaling factor and the launch's
costs (launch: until the slowest rank started its first phase, i.e. interpreter start and imports; init group:
init_process_group; first step: DDP's first eager step)."""

from __future__ import annotations

from rich.table import Table

from runner.scale import ScalingReport


def _number(value: float | None, fmt: str) -> str:
    return format(value, fmt) if value is not None else "-"


def scaling_table(report: ScalingReport) -> Table:
    o = report.options
    where = f"{o.cores_per_rank} core(s) per rank" if o.device == "cpu" else "one GPU per rank"
    table = Table(title=f"{o.model}: {o.backend} {o.dtype} training on {o.device}, DDP, {where}, "
                        f"batch per rank {report.points[0].batch_size if report.points else '-'}",
                  title_justify="left")
    for column in ("world size", "status", "eager samples/s", "compiled samples/s", "eager scaling",
                   "compiled scaling", "speedup", "launch s", "init group s", "first step s"):
        table.add_column(column, justify="left" if column == "status" else "right")
    for p in report.points:
        table.add_row(str(p.world_size), p.status, _number(p.eager_throughput, ",.1f"),
                      _number(p.compiled_throughput, ",.1f"), _number(p.eager_scaling, ".2f"),
                      _number(p.compiled_scaling, ".2f"), _number(p.speedup, ".2f"), _number(p.launch_s, ".1f"),
                      _number(p.init_process_group_s, ".2f"), _number(p.first_step_s, ".2f"))
    return table
