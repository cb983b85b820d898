"""Runs stored before the manifest grew fields keep their content hash, so re-posting their files is a no-op."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from service.ingest.files import IngestDefaults, bundles_from_files

NIGHT1 = Path(__file__).resolve().parents[1] / "web" / "data" / "night1"

# Digests computed by the ingest code of commit 0493c6d (before environment, memory_definitions, backend and
# config.warmup existed) on tests/web/data/night1 (CSVs and manifests) with the defaults below; the store compares
# new uploads to them.
DIGESTS_AT_0493C6D = {
    "inductor_huggingface_float32_inference_cpu": "e2bc614a2407ae8c91c86476e3ffbeb7f5c778309eb3b9697162d7c1efacd941",
    "inductor_timm_models_float32_inference_cpu": "fa4d306736f7d4d4b75da3ec295bc58e790c5c6655e0f75dce2e1dfcee4c21f1",
}


def test_old_runs_hash_as_they_did_when_they_were_stored():
    # the samples file was added to the fixture later
    files = {p.name: p.read_bytes() for p in NIGHT1.iterdir() if p.is_file() and not p.name.endswith(".jsonl")}
    defaults = IngestDefaults(timestamp=datetime(2026, 1, 1, tzinfo=UTC), machine="m", commit="c")
    got = {b.manifest.config.key().stem: b.file_order_sha256 for b in bundles_from_files(files, defaults)}
    assert got == DIGESTS_AT_0493C6D
