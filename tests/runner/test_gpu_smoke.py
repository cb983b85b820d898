"""scripts/gpu-smoke runs on any machine: without a GPU (or with --cpu) it lists every CUDA cell as not run, with the
settings it would have, and runs one tiny CPU cell through perfdash run's machinery; its table says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from runner.smoke import DTYPES, MODES, NOT_RUN, SUITE_MODELS, plan

REPO = Path(__file__).resolve().parents[2]


def test_the_plan_covers_every_cuda_path(tmp_path: Path) -> None:
    cells = plan(tmp_path, gpus=1)
    suites = [c for c in cells if c.run is not None and c.run.suite in SUITE_MODELS and c.run.backend == "inductor"]
    assert Counter((c.run.suite, c.run.dtype, c.run.mode, c.run.disable_cudagraphs) for c in suites if c.run) == \
        {(s, d, m, g): 1 for s in SUITE_MODELS for d in DTYPES for m in MODES for g in (False, True)}
    assert all(c.device == "cuda" and c.run and c.run.cold_start for c in cells if c.run)
    others = {(c.run.suite, c.run.backend, c.run.dtype) for c in cells if c.run and c not in suites}
    assert others == {("hf_vision", "inductor", "float32"), ("torchbench", "onnxruntime", "float32"),
                      ("torchbench", "tensorrt", "float16")}
    assert [c.ddp_world for c in cells if c.ddp_world] == [1]
    assert [c.ddp_world for c in plan(tmp_path, gpus=2) if c.ddp_world] == [2]


def test_on_cpu_the_cuda_rows_are_marked_not_run_and_one_cpu_cell_runs(tmp_path: Path) -> None:
    out = tmp_path / "smoke"
    # run by name, as a user runs it, in this test's environment (PERFDASH_VENV: the checkout's own .venv otherwise)
    done = subprocess.run([str(REPO / "scripts" / "gpu-smoke"), "--cpu", "--cpu-backend",
                           "aot_eager", "--output-dir", str(out)], capture_output=True, text=True, timeout=600,
                          cwd=REPO, check=False, env={**os.environ, "PERFDASH_VENV": sys.prefix})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "the 40 CUDA cells are skipped" in done.stdout
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("cell "))
    assert "status" in lines[header] and "peak mem GB" in lines[header] and "settings in force" in lines[header]
    table = lines[header + 2:]
    cuda_lines = [line for line in table if "  cuda  " in line]
    assert len(cuda_lines) == 40 and all(f"  {NOT_RUN}  " in line for line in cuda_lines)
    [cpu_line] = [line for line in table if "  cpu  " in line]
    assert "  pass  " in cpu_line
    rows = json.loads((out / "smoke.json").read_text(encoding="utf-8"))
    cuda = [r for r in rows if r["device"] == "cuda"]
    assert {r["status"] for r in cuda} == {NOT_RUN} and not any(r["settings_in_force"] for r in cuda)
    headline = next(r for r in cuda if r["cell"] == "torchbench resnet18 float32 inference")
    no_graphs = next(r for r in cuda if r["cell"] == "torchbench resnet18 float32 inference no_cudagraphs")
    assert headline["settings"] == "(would be) tf32 sdpa_reduced cudagraphs cold_caches"
    assert no_graphs["settings"] == "(would be) tf32 sdpa_reduced cold_caches"
    [cpu] = [r for r in rows if r["device"] == "cpu"]
    assert cpu["status"] == "pass" and cpu["speedup"].endswith("x") and " / " in cpu["peak_mem_gb"]
    assert cpu["settings_in_force"] == {"tf32": False, "sdpa_reduced": False, "cudagraphs": False,
                                        "cold_caches": False}


def test_every_cell_names_a_model_its_suite_has(tmp_path: Path) -> None:
    """The cells' model selections resolve (checked on CPU with Inductor: the CUDA checks need a GPU)."""
    import dataclasses

    from runner.options import validate
    from runner.smoke import ddp_options

    for cell in plan(tmp_path, gpus=1):
        if cell.run is None:  # the DDP cell: its ranks' single-process options
            cell = dataclasses.replace(cell, run=ddp_options(cell, tmp_path).run_options(tmp_path))
        on_cpu = dataclasses.replace(cell.run, device="cpu", backend="inductor", dtype="float32",
                                     disable_cudagraphs=False)
        _, [model] = validate(on_cpu)
        assert model.name == cell.run.only
