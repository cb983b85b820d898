"""The Releases view's verdicts kept at ingest (service/release_verdicts.py, migration 0013) give the answers of the
live pairing, and the migration's backfill keeps what ingest keeps.

A random history (three configurations, releases, a re-run of a release, nightlies, two runs in one night, models
coming and going, failures, confidence intervals from raw samples, impacts that tie) goes through the real ingest
path into Postgres. Every view (each base version against each version and ``latest``; several limits; a filter) is
computed with the kept verdicts, then again with the tables emptied in the same transaction: the live pairing, as
before issue 31's table. The two answers must be equal, field for field.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from perfdash.manifest import MachineInfo, Manifest, RunConfig
from service.db import session_scope
from service.ingest.payload import RunPayload, bundle_from_payload
from service.ingest.upload import ingest
from service.migrate import downgrade, upgrade
from service.models import ReleasePair, Run
from service.queries import releases
from service.queries.filters import ConfigFilter
from service.release_verdicts import refresh_configurations, wanted_pairs
from service.settings import Settings

MACHINE = MachineInfo(host="rv-01", device="cpu", cpu_model="Verdict Xeon", cpu_count=8)
CONFIGS = (RunConfig(suite="timm_models", backend="inductor", threads=8),
           RunConfig(suite="huggingface", backend="inductor", threads=8),
           RunConfig(suite="torchbench", backend="inductor", mode="training", threads=8))
# (night, torch version, configurations that run it: indexes into CONFIGS); two runs of 2.5.0 (the last is the one
# compared), two runs of configuration 0 on one night (the later id is the latest), configuration 2 on releases only
NIGHTS = (
    ("2025-01-01", "2.4.0", (0, 1, 2)),
    ("2025-01-02", "2.5.0.dev20250102+cpu", (0, 1)),
    ("2025-01-03", "2.5.0.dev20250103+cpu", (0, 1)),
    ("2025-01-04", "2.5.0", (0, 1, 2)),
    ("2025-01-05", "2.5.0", (0, 1, 2)),
    ("2025-01-06", "2.6.0.dev20250106+cpu", (0, 1)),
    ("2025-01-07", "2.6.0", (0, 1, 2)),
    ("2025-01-08", "2.7.0.dev20250108+cpu", (0, 1)),
    ("2025-01-08", "2.7.0.dev20250108+cpu", (0,)),
)
# names whose code-point order differs from a locale's (upper case first, an accent, an underscore)
MODELS = ("Zeta_net", "alpha", "alpha_2", "beta", "Émile", "gamma", "m_a", "mB", "omega", "resnet", "vit", "yolo")
FAILURES = ("fail_accuracy", "fail_to_run", "eager_fail_to_run")


def _payload(config: RunConfig, night: str, version: str, hour: int, rng: random.Random) -> RunPayload:
    start = datetime.fromisoformat(f"{night}T0{hour}:00:00+00:00").astimezone(UTC)
    results = []
    for name in MODELS:
        if rng.random() < 0.15:  # not in this run
            continue
        if rng.random() < 0.15:
            results.append({"name": name, "batch_size": 8, "accuracy": rng.choice(FAILURES), "speedup": 0.0,
                            "abs_latency": 0.0, "compilation_latency": 0.0, "compression_ratio": 0.0})
            continue
        # few distinct values, so that impacts tie and the order falls to the name and the configuration
        speedup = rng.choice((1.0, 1.2, 1.5))
        row = {"name": name, "batch_size": 8, "accuracy": "pass", "speedup": speedup, "abs_latency": 20.0 / speedup,
               "compilation_latency": rng.choice((20.0, 30.0)), "compression_ratio": rng.choice((1.0, 1.2)),
               "eager_peak_mem": 1.0, "dynamo_peak_mem": rng.choice((0.8, 1.0))}
        if rng.random() < 0.5:  # raw samples: the speedup's confidence interval (within_noise)
            eager = [20.0 + rng.random() * 4 for _ in range(5)]
            row |= {"eager_ms": eager, "compiled_ms": [e / speedup * (0.9 + 0.2 * rng.random()) for e in eager]}
        results.append(row)
    manifest = Manifest(config=config, machine=MACHINE, torch_version=version, torch_git_commit=f"{hour}" * 40,
                        start_time=start, end_time=start + timedelta(minutes=30))
    return RunPayload.model_validate({"manifest": manifest.model_dump(mode="json"), "results": results})


@pytest.fixture
def history(fresh_postgres: str) -> Iterator[str]:
    upgrade(fresh_postgres)
    rng = random.Random(31)
    seen: set[tuple[str, int]] = set()
    with session_scope(Settings(database_url=fresh_postgres)) as session:
        for night, version, configs in NIGHTS:
            hour = 3 if any((night, c) in seen for c in configs) else 1
            bundles = [bundle_from_payload(_payload(CONFIGS[c], night, version, hour, rng)) for c in configs]
            seen.update((night, c) for c in configs)
            ingest(session, bundles)  # the real ingest path, one upload a night
    yield fresh_postgres


def _views(session) -> dict[tuple, dict]:
    known = releases.versions(session)
    answers = {}
    for base in known:
        for new in [*known, releases.LATEST]:
            for limit in (1, 3, 7, 20, 100):
                answers[(base, new, limit)] = releases.compare_versions(session, base, new, limit=limit).model_dump()
            answers[(base, new, "suite")] = releases.compare_versions(
                session, base, new, ConfigFilter(suite="huggingface"), limit=5).model_dump()
    return answers


def _kept(session) -> list:
    return sorted((c, b, n, k, sorted(counts.items()), names, verdicts, impacts)
                  for c, b, n, k, counts, names, verdicts, impacts in session.execute(sa.select(
                      ReleasePair.configuration_id, ReleasePair.base_run_id, ReleasePair.new_run_id,
                      ReleasePair.criteria, ReleasePair.counts, ReleasePair.names, ReleasePair.verdicts,
                      ReleasePair.impacts)))


def _assert_kept_equals_live(session) -> int:
    """Every view with the kept verdicts, then live (the tables emptied, rolled back); returns the views that read
    kept pairs."""
    kept_reads = 0
    for base in releases.versions(session):
        before = releases.last_runs(session, base, ConfigFilter())
        after = releases.last_runs(session, releases.LATEST, ConfigFilter())
        runs = {c: (before[c].id, after[c].id) for c in set(before) & set(after)}
        kept_reads += bool(releases.stored_pairs(session, runs))
    with_kept = _views(session)
    session.execute(sa.delete(ReleasePair))
    live = _views(session)
    session.rollback()
    assert with_kept.keys() == live.keys()
    for view, answer in with_kept.items():
        assert answer == live[view], view
    return kept_reads


def test_kept_verdicts_answer_as_the_live_pairing(history: str) -> None:
    with session_scope(Settings(database_url=history)) as session:
        pairs = _kept(session)
        # each release's last run against the latest run and every newer release's: 3 + 2 + 1 + (2.4.0 -> 2.5.0,
        # 2.4.0 -> 2.6.0, 2.5.0 -> 2.6.0) per configuration, less those where the latest run is 2.6.0's
        assert len(pairs) > 12 and any(names for *_, names, _, _ in pairs)
        assert {k for _, _, _, k, *_ in pairs} == {releases.CRITERIA}
        for configuration_id in {c for c, *_ in pairs}:
            assert {(b, n) for c, b, n, *_ in pairs if c == configuration_id} == wanted_pairs(session,
                                                                                              configuration_id)
        assert _assert_kept_equals_live(session) == 3  # 2.4.0, 2.5.0, 2.6.0 -> latest read the kept pairs

        # a deleted latest run (as DELETE /api/v1/runs/{id} does): its pairs go, the new latest gets its own
        latest = session.scalar(sa.select(Run).where(Run.configuration_id == pairs[0][0])
                                .order_by(Run.night.desc(), Run.id.desc()).limit(1))
        session.execute(sa.delete(Run).where(Run.id == latest.id))
        refresh_configurations(session, {latest.configuration_id})
        session.commit()
        assert latest.id not in {r for _, b, n, *_ in _kept(session) for r in (b, n)}
        _assert_kept_equals_live(session)


def test_the_migration_backfills_what_ingest_keeps(history: str) -> None:
    with session_scope(Settings(database_url=history)) as session:
        kept_by_ingest = _kept(session)
    assert kept_by_ingest
    downgrade(history, "0012_issue31_api_speed")
    upgrade(history)
    with session_scope(Settings(database_url=history)) as session:
        assert _kept(session) == kept_by_ingest
