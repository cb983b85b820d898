"""The Releases view's verdicts kept at ingest (issue 31): table ``release_pairs``.

Pairing two whole nights of PyTorch's matrix (~100,000 results) per request cost ~140 ms of Postgres CPU whatever
the read's shape, so the pairs the view is asked for are judged once, when their runs arrive: in each configuration,
**each release's last run against the configuration's latest run and against each newer release's last run** (the
default view, "release X -> latest", and "release X -> release Y", X itself included). A pair of any other runs (a
nightly as a side, a newer release as the base) is paired live by service.queries.releases, as before.

"Last run of a version" and "latest run" are service.queries.releases.last_runs' order: the latest night, then the
latest id. What a pair holds is service.queries.releases.judge_pairs', under the criteria's fingerprint (a hash of
perfdash.judgement.criteria_words). Runs never change once stored; a deleted run takes its pairs with it (foreign
keys ON DELETE CASCADE). :func:`refresh_configuration` brings one configuration's pairs to what its runs ask for: it
adds the missing pairs and drops those no longer asked for (an older latest run, other criteria). Ingest runs it in the
upload's transaction for each configuration that got a run (service.ingest.store.store_runs: like a run's summary, a
stored run has its pairs whatever post-ingest hooks run), the API after deleting a run, migration 0013 over every
configuration (:func:`refresh_all`), and bench/synthetic_history.py after a fill.
"""

from __future__ import annotations

from datetime import date

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.models import Configuration, ReleasePair, Run
from service.queries import torch_versions
from service.queries.releases import CRITERIA, judge_pairs


def wanted_pairs(session: Session, configuration_id: int) -> set[tuple[int, int]]:
    """The (base run, new run) pairs kept for a configuration."""
    last: dict[str, tuple[date, int]] = {}
    latest: tuple[date, int] | None = None
    for run_id, night, version in session.execute(
            sa.select(Run.id, Run.night, Run.torch_version).where(Run.configuration_id == configuration_id)):
        key = (night, run_id)
        latest = max(latest, key) if latest is not None else key
        if version is not None:
            last[version] = max(last.get(version, key), key)
    releases = [v for v in torch_versions.ordered(last) if torch_versions.is_release(v)]  # oldest first
    pairs: set[tuple[int, int]] = set()
    for i, base in enumerate(releases):
        assert latest is not None  # a configuration with a release has runs
        pairs.add((last[base][1], latest[1]))
        pairs.update((last[base][1], last[newer][1]) for newer in releases[i:])  # itself: a run against itself
    return pairs


def refresh_configuration(session: Session, configuration_id: int) -> int:
    """Bring one configuration's kept pairs to :func:`wanted_pairs`; returns the pairs judged. Two ingests of one
    configuration take turns on its row (Postgres), so a pair is never judged and inserted twice."""
    session.execute(sa.select(Configuration.id).where(Configuration.id == configuration_id).with_for_update())
    wanted = wanted_pairs(session, configuration_id)
    kept: set[tuple[int, int]] = set()
    dropped: list[int] = []
    for pair_id, base, new, criteria in session.execute(
            sa.select(ReleasePair.id, ReleasePair.base_run_id, ReleasePair.new_run_id, ReleasePair.criteria)
            .where(ReleasePair.configuration_id == configuration_id)):
        if criteria == CRITERIA and (base, new) in wanted:
            kept.add((base, new))
        else:
            dropped.append(pair_id)
    if dropped:
        session.execute(sa.delete(ReleasePair).where(ReleasePair.id.in_(dropped)))
    missing = sorted(wanted - kept)
    if not missing:
        return 0
    # one row a pair, the models packed in it; Core, not the ORM's bulk insert (slower, and nothing to load back)
    session.execute(ReleasePair.__table__.insert(), [
        {"configuration_id": configuration_id, "base_run_id": base, "new_run_id": new, "criteria": CRITERIA,
         **verdicts.columns()}
        for (base, new), verdicts in zip(missing, judge_pairs(session, configuration_id, missing), strict=True)])
    return len(missing)


def refresh_configurations(session: Session, configuration_ids: set[int]) -> int:
    """These configurations' pairs, in id order (two writers lock them in the same order); returns the pairs judged.
    Postgres only: the results are read as Postgres' binary forms (service.queries.releases._run_columns), so on
    SQLite nothing is kept and the view pairs live, as it did."""
    if session.get_bind().dialect.name != "postgresql":
        return 0
    return sum(refresh_configuration(session, c) for c in sorted(configuration_ids))


def refresh_all(session: Session) -> int:
    """Every configuration's pairs (the migration's backfill, or a repair); returns the pairs judged."""
    return refresh_configurations(session, set(session.scalars(sa.select(Configuration.id))))
