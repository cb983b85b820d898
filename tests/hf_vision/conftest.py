"""One real hf_vision run (two tiny models, batch size 1, this CPU) shared by the page tests, plus the derived files
that give the page a second night and a second compile mode without compiling again."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from perfdash.contract import AccuracyRow, PerformanceRow, append_row
from perfdash.manifest import Manifest

DATA = Path(__file__).parent / "data"


def _load_web_harness():  # type: ignore[no-untyped-def]
    """tests/web/conftest.py: the dashboard's browser harness (live server, Postgres, Chromium), reused as is."""
    path = Path(__file__).parents[1] / "web" / "conftest.py"
    spec = importlib.util.spec_from_file_location("perfdash_tests_web_harness", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


web = _load_web_harness()
TINY = DATA / "tiny.toml"
MODELS = "^(ResNet|Segformer)_"  # one classification and one segmentation row
STEM = "inductor_hf_vision_float32_inference_cpu"


def _env() -> dict[str, str]:
    # A persistent Inductor cache outside the clone (as `make test` sets it) keeps the compiles warm between runs.
    cache = Path(os.environ.get("PERFDASH_CACHE_DIR", Path.home() / ".cache" / "perfdash"))
    env = dict(os.environ)
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache / "inductor"))
    env.setdefault("TMPDIR", str(cache / "tmp"))
    Path(env["TMPDIR"]).mkdir(parents=True, exist_ok=True)
    return env


@pytest.fixture(scope="session")
def vision_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`perfdash run --suite hf_vision` for real: two tiny models at batch size 1; returns the results directory.
    PERFDASH_HF_VISION_RESULTS=DIR reuses the files of an earlier such run (to iterate on the page quickly)."""
    reuse = os.environ.get("PERFDASH_HF_VISION_RESULTS")
    if reuse:
        return Path(reuse)
    out = tmp_path_factory.mktemp("hf_vision") / "results"
    command = [sys.executable, "-m", "perfdash.cli", "run", "--suite", "hf_vision", "--models-file", str(TINY),
               "--batch-size", "1", "--filter", MODELS, "--repeat", "5", "--warmup", "1", "--timeout", "600",
               "--output-dir", str(out), "--no-progress"]
    done = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def derive(source: Path, target: Path, *, days_earlier: int = 0, compile_mode: str | None = None,
           oom: tuple[tuple[str, int], ...] = ()) -> Path:
    """A copy of a run's files as another night and/or compile mode: same rows, moved manifest and file names.
    Only the page's night axis and mode selector need these; every number still comes from the real run. ``oom``
    adds (row name, batch size) rows as the runner writes a model that ran out of memory (a CPU cannot be made to)."""
    target.mkdir(parents=True)
    manifest = Manifest.read(source / f"{STEM}_manifest.json")
    config = manifest.config
    stem = STEM
    if compile_mode is not None:
        variant = compile_mode.replace("-", "_")
        config = config.model_copy(update={"compile_mode": compile_mode, "variant": variant})
        stem = STEM.replace("inductor_", f"inductor_{variant}_", 1)
    assert manifest.start_time is not None
    shift = timedelta(days=days_earlier)
    manifest = manifest.model_copy(update={
        "config": config, "start_time": manifest.start_time - shift,
        "end_time": manifest.end_time - shift if manifest.end_time else None})
    manifest.write(target / f"{stem}_manifest.json")
    for kind in ("performance.csv", "accuracy.csv", "samples.jsonl"):
        shutil.copyfile(source / f"{STEM}_{kind}", target / f"{stem}_{kind}")
    for name, batch_size in oom:
        append_row(target / f"{stem}_performance.csv", PerformanceRow.failure("cpu", name))
        append_row(target / f"{stem}_accuracy.csv", AccuracyRow(dev="cpu", name=name, batch_size=batch_size,
                                                                accuracy="OOM"))
    return target


@pytest.fixture(scope="session")
def vision_server(vision_run: Path, postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The app on a fresh Postgres holding the real run (latest night), the same rows one night earlier, and the
    same rows filed under compile mode reduce-overhead with ResNet out of memory at batch size 16."""
    base = tmp_path_factory.mktemp("derived")
    url = web.fresh_database(postgres_url)
    web.ingest_dir(url, derive(vision_run, base / "earlier", days_earlier=1))
    web.ingest_dir(url, vision_run)
    web.ingest_dir(url, derive(vision_run, base / "reduce_overhead", compile_mode="reduce-overhead",
                                         oom=(("ResNet_bs16", 16),)))
    server = web.start_server(url)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def empty_server(postgres_url: str) -> Iterator[object]:
    """The app on an empty database."""
    server = web.start_server(web.fresh_database(postgres_url))
    yield server
    server.stop()
