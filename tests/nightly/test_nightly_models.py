"""The whole local nightly on real tiny models: perfdash run for each suite, ingest, detect, report.

Compiles three tiny models (three compiles each: performance, accuracy, memory): marked slow. Two nights and their
comparison are covered on result files in test_nightly.py.
"""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from perfdash.cli import build_parser, main

# One tiny model per suite, built by the suites' own builders (nothing downloaded): TorchBench's lennard_jones (an MLP,
# torchbenchmark), and small configs of the others.
TINY_MODELS = {
    "torchbench": """
[[model]]
name = "lennard_jones"
batch_size = 2
builder = "torchbenchmark:lennard_jones"
""",
    "huggingface": """
[[model]]
name = "BertForMaskedLM"
batch_size = 2
builder = "hf:BertForMaskedLM"
options = { seq_len = 16, config = { hidden_size = 32, num_hidden_layers = 1, num_attention_heads = 2, \
intermediate_size = 64, vocab_size = 128, max_position_embeddings = 32 } }
""",
    "timm_models": """
[[model]]
name = "lcnet_050"
batch_size = 2
builder = "timm:lcnet_050"
options = { input_size = [3, 32, 32] }
""",
}


def _registered() -> set[str]:
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_a_night_of_tiny_models_end_to_end(tmp_path: Path) -> None:
    missing = {"run", "ingest", "detect", "report"} - _registered()
    if missing:
        pytest.skip(f"not registered yet: {', '.join(sorted(missing))}")
    import sqlalchemy as sa

    from service.models import Result, Run

    files = []
    for suite, text in TINY_MODELS.items():
        path = tmp_path / f"{suite}.toml"
        path.write_text(text)
        files += ["--models-file", f"{suite}={path}"]
    database = tmp_path / "perfdash.db"
    url = f"sqlite:///{database}"
    before = os.environ.get("DATABASE_URL")
    try:
        code = main(["nightly", "--database-url", url, "--results-dir", str(tmp_path / "night"),
                     "--report", str(tmp_path / "report.md"), "--no-serve", "--repeat", "3", "--timeout", "600",
                     *files])
        assert code == 0
    finally:
        if before is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = before

    produced = sorted(p.name for p in (tmp_path / "night").iterdir())
    for suite in TINY_MODELS:
        assert f"inductor_{suite}_float32_inference_cpu_performance.csv" in produced
        assert f"inductor_{suite}_float32_inference_cpu_accuracy.csv" in produced
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        runs = connection.execute(sa.select(Run.id, Run.night)).all()
        results = connection.execute(sa.select(Result)).mappings().all()
    engine.dispose()
    nights = {night for _, night in runs}
    assert len(runs) == 3 and len(nights) == 1
    assert nights.pop() in (datetime.now(UTC).date(), datetime.now(UTC).date() - timedelta(days=1))
    assert len(results) == 3
    # Every model has a status and a measurement (tiny models compile fine; a failure row would have speedup 0).
    assert all(r["accuracy"] is not None and r["speedup"] is not None for r in results), results
    report = (tmp_path / "report.md").read_text()
    for model in ("lennard_jones", "BertForMaskedLM", "lcnet_050"):
        assert model in report
