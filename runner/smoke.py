"""``scripts/gpu-smoke``: one command for the day a GPU is lent. Every CUDA path of perfdash once, through the same
machinery as ``perfdash run`` and ``perfdash scale`` (runner.api.run_suite, runner.scale.run_scaling), then one table:
what ran, its status, peak memory, speedup and which of the GPU settings of PyTorch's harness were in force (TF32,
the reduced-precision SDPA math, Inductor's CUDA graphs, cold compile caches).

Cells on CUDA, each a run of its own (performance, small repeat counts: the smoke checks that paths run, it measures
nothing worth keeping):

- one small model per suite (runner/data/gpu_smoke.toml) in float32, amp and bfloat16, inference and training, with
  CUDA graphs (the headline series) and without (``inductor_no_cudagraphs``);
- hf_vision's ResNet (microsoft/resnet-50's architecture), float32 inference;
- ONNX Runtime's CUDA execution provider and TensorRT (float16 engines) on the small torchbench model;
- DistributedDataParallel over nccl at world size 1, and 2 where there are two GPUs.

Without a GPU the CUDA cells are listed as not run, with the reason, and one tiny CPU cell runs instead, so the
command and its table are checked on any machine (tests/runner/test_gpu_smoke.py). A time budget (default 7 min)
stops starting cells once spent; the cells left are listed as not run. Rows also go to ``smoke.json`` beside the
results.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.gpu_settings import in_force
from runner.options import RunOptions, cuda_device_present

if TYPE_CHECKING:
    from runner.scale import ScaleOptions

MODELS = Path(__file__).parent / "data" / "gpu_smoke.toml"
SUITE_MODELS: dict[str, str] = {"torchbench": "resnet18", "huggingface": "BertForMaskedLM",
                                "timm_models": "resnet10t"}
DTYPES = ("float32", "amp", "bfloat16")
MODES = ("inference", "training")
# Start no cell after 7 minutes: with a cell's own timeout (CELL_TIMEOUT_S) the command stays within the 10 minutes a
# GPU session's command has.
DEFAULT_BUDGET_S = 420.0
CELL_TIMEOUT_S = 150.0
NOT_RUN = "not run"


@dataclass(frozen=True, slots=True)
class Cell:
    """One thing the smoke runs: a ``perfdash run`` configuration of one model, or a DDP scaling run."""

    name: str
    device: str
    run: RunOptions | None = None
    ddp_world: int = 0  # > 0: DDP over nccl up to this world size (runner.scale)


@dataclass(frozen=True, slots=True)
class Row:
    cell: str
    device: str
    status: str
    peak_mem_gb: str = "-"  # eager / compiled: CUDA max_memory_allocated(), CPU resident set (PyTorch's columns)
    speedup: str = "-"
    settings: str = "-"
    seconds: float | None = None
    note: str = ""
    settings_in_force: dict[str, bool] = field(default_factory=dict)


def _suite_cell(out: Path, suite: str, dtype: str, mode: str, cudagraphs: bool, repeat: int, warmup: int) -> Cell:
    options = RunOptions(suite=suite, device="cuda", dtype=dtype, mode=mode, disable_cudagraphs=not cudagraphs,
                         models_file=MODELS, only=SUITE_MODELS[suite], performance=True, repeat=repeat,
                         warmup=warmup, cold_start=True, output_dir=out / "cuda", timeout_s=CELL_TIMEOUT_S)
    graphs = "" if cudagraphs else " no_cudagraphs"
    return Cell(name=f"{suite} {SUITE_MODELS[suite]} {dtype} {mode}{graphs}", device="cuda", run=options)


def plan(out: Path, gpus: int, repeat: int = 5, warmup: int = 2) -> list[Cell]:
    """Every CUDA cell, in the order they run (the suite matrix first: it is what the nightly's GPU cells run)."""
    cells = [_suite_cell(out, suite, dtype, mode, cudagraphs, repeat, warmup)
             for suite in SUITE_MODELS for dtype in DTYPES for mode in MODES for cudagraphs in (True, False)]
    common: dict[str, Any] = {"device": "cuda", "performance": True, "repeat": repeat, "warmup": warmup,
                              "cold_start": True, "output_dir": out / "cuda", "timeout_s": CELL_TIMEOUT_S}
    cells.append(Cell(name="hf_vision ResNet_bs1 (resnet-50) float32 inference", device="cuda",
                      run=RunOptions(suite="hf_vision", only="ResNet_bs1", **common)))
    for backend, dtype in (("onnxruntime", "float32"), ("tensorrt", "float16")):
        cells.append(Cell(name=f"{backend} resnet18 {dtype} inference", device="cuda",
                          run=RunOptions(suite="torchbench", backend=backend, dtype=dtype, models_file=MODELS,
                                         only="resnet18", **common)))
    world = 2 if gpus >= 2 else 1
    cells.append(Cell(name=f"DDP nccl resnet18 training, world size 1..{world}", device="cuda", ddp_world=world))
    return cells


def cpu_cell(out: Path, backend: str) -> Cell:
    """The tiny CPU cell run when there is no GPU: the same path, a CPU configuration."""
    return Cell(name=f"timm_models resnet10t float32 inference ({backend}, CPU)", device="cpu",
                run=RunOptions(suite="timm_models", device="cpu", backend=backend, models_file=MODELS,
                               only="resnet10t", performance=True, repeat=3, warmup=1, output_dir=out / "cpu",
                               timeout_s=600.0))


def _settings(env: dict[str, str], cold_start: bool) -> tuple[str, dict[str, bool]]:
    flags = {**in_force(env), "cold_caches": cold_start}
    text = " ".join(name for name, on in flags.items() if on) or "none"
    return text, flags


def planned(cell: Cell) -> str:
    """The settings a cell would run with, from its configuration alone (no GPU needed to say)."""
    if cell.run is not None:
        return _settings(cell.run.worker_env(), cell.run.cold_start)[0]
    return _settings(ddp_options(cell, Path("ddp")).run_options(Path("ddp")).worker_env(), False)[0]


def ddp_options(cell: Cell, out: Path) -> ScaleOptions:
    """The DDP cell as ``perfdash scale`` options: the small torchbench model, nccl up to the cell's world size."""
    from runner.scale import ScaleOptions

    return ScaleOptions(suite="torchbench", model="resnet18", nproc=cell.ddp_world, device="cuda",
                        models_file=MODELS, repeat=5, warmup=2, output_dir=out / "ddp", timeout_s=CELL_TIMEOUT_S)


def run_suite_cell(cell: Cell) -> Row:
    from runner.api import run_suite

    assert cell.run is not None
    report = run_suite(cell.run)
    settings, flags = _settings(report.config.env, report.config.cold_start)
    [outcome] = report.outcomes or [None]
    result = next((r for r in report.results if r.name == cell.run.only), None)
    perf = result.performance if result is not None else None
    status = outcome.status if outcome is not None else "resumed"
    ran = perf is not None and not perf.is_failure
    peak = f"{perf.eager_peak_mem or 0:.3f} / {perf.dynamo_peak_mem or 0:.3f}" if ran and perf else "-"
    speedup = f"{perf.speedup:.2f}x" if ran and perf else "-"
    note = (outcome.error or "")[:160] if outcome is not None else ""
    return Row(cell=cell.name, device=cell.device, status=status, peak_mem_gb=peak, speedup=speedup,
               settings=settings, note=note, settings_in_force=flags)


def run_ddp_cell(cell: Cell, out: Path) -> Row:
    from runner.scale import check, run_scaling

    options = check(ddp_options(cell, out))
    report = run_scaling(options)
    statuses = ", ".join(f"W{p.world_size} {p.status}" for p in report.points)
    speedups = ", ".join(f"W{p.world_size} {p.speedup:.2f}x" for p in report.points if p.speedup is not None)
    env = options.run_options(out / "ddp").worker_env()
    settings, flags = _settings(env, False)
    errors = "; ".join(p.error for p in report.points if p.error)[:160]
    ok = all(p.status == "pass" for p in report.points) and report.points
    return Row(cell=cell.name, device=cell.device, status="pass" if ok else statuses, speedup=speedups or "-",
               settings=settings, note=errors or statuses, settings_in_force=flags)


def run_cells(cells: list[Cell], out: Path, budget_s: float) -> list[Row]:
    """Run each cell in order until the budget is spent; a cell that raises is its error row, never the end."""
    rows: list[Row] = []
    start = time.perf_counter()
    for cell in cells:
        if time.perf_counter() - start > budget_s:
            rows.append(Row(cell=cell.name, device=cell.device, status=NOT_RUN,
                            settings=f"(would be) {planned(cell)}", note="time budget spent"))
            continue
        began = time.perf_counter()
        try:
            row = run_ddp_cell(cell, out) if cell.ddp_world else run_suite_cell(cell)
        except Exception as exc:  # noqa: BLE001 - the smoke reports every cell, whatever one of them does
            row = Row(cell=cell.name, device=cell.device, status="error", note=f"{type(exc).__name__}: {exc}"[:200])
        rows.append(Row(**{**asdict(row), "seconds": time.perf_counter() - began}))
        print(f"gpu-smoke: {row.cell}: {row.status}", file=sys.stderr, flush=True)
    return rows


def render(rows: list[Row]) -> str:
    """The table, as plain text (a log, a closing note)."""
    headings = ("cell", "device", "status", "peak mem GB eager/compiled", "speedup", "settings in force", "s",
                "note")
    table = [[r.cell, r.device, r.status, r.peak_mem_gb, r.speedup, r.settings,
              "-" if r.seconds is None else f"{r.seconds:.0f}", r.note] for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in table)) for i, h in enumerate(headings)]
    widths[-1] = len(headings[-1])  # the note is last and left unpadded
    lines = ["  ".join(h.ljust(w) for h, w in zip(headings, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in table]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu-smoke", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", type=Path, default=Path("results/gpu-smoke"))
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="SECONDS",
                        help="start no cell after this many seconds (default %(default)s; each cell has "
                             f"{CELL_TIMEOUT_S:.0f} s: a GPU day's command has 10 minutes)")
    parser.add_argument("--cpu", action="store_true", help="behave as on a machine without a GPU (the test's mode)")
    parser.add_argument("--cpu-backend", default="inductor", help="the CPU cell's backend (default %(default)s)")
    args = parser.parse_args(argv)
    from runner.scale import gpu_count

    gpu = cuda_device_present() and not args.cpu
    for old in ("cuda", "cpu", "ddp"):  # the smoke's own results of an earlier run: measured again, not resumed
        shutil.rmtree(args.output_dir / old, ignore_errors=True)
    cells = plan(args.output_dir, gpu_count() if gpu else 0)
    if gpu:
        rows = run_cells(cells, args.output_dir, args.budget)
    else:
        why = "--cpu" if args.cpu else "no CUDA device on this machine"
        print(f"gpu-smoke: {why}: the {len(cells)} CUDA cells are skipped; one CPU cell runs instead", flush=True)
        rows = [Row(cell=c.name, device=c.device, status=NOT_RUN, settings=f"(would be) {planned(c)}", note=why)
                for c in cells]
        rows += run_cells([cpu_cell(args.output_dir, args.cpu_backend)], args.output_dir, args.budget)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "smoke.json").write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n",
                                                encoding="utf-8")
    print(render(rows))
    ran = [r for r in rows if r.status != NOT_RUN]
    return 0 if ran and all(r.status in ("pass", "pass_due_to_skip") for r in ran) else 1


if __name__ == "__main__":  # scripts/gpu-smoke runs it as python -m runner.smoke
    sys.exit(main())
