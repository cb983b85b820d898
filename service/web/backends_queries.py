"""Queries of the Backends page: the inference configurations that can stand side by side, and each one's latest night.

Each is one or two indexed statements, like service/web/queries.py; nothing here formats.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.models import Configuration, Result, Run


def inference_configurations(session: Session) -> list[Configuration]:
    """Every inference configuration with at least one run, in a stable order."""
    has_run = sa.exists().where(Run.configuration_id == Configuration.id)
    return list(session.scalars(sa.select(Configuration).where(Configuration.mode == "inference", has_run)
                                .order_by(Configuration.suite, Configuration.device, Configuration.dtype,
                                          Configuration.backend, Configuration.variant, Configuration.id)))


@dataclass(frozen=True, slots=True)
class LatestResults:
    night: date
    run_id: int  # the night's last run (the suite page of the configuration)
    results: tuple[Result, ...]  # one per (model, batch size); a later run of the night wins


def latest_results(session: Session, configuration_ids: list[int]) -> dict[int, LatestResults]:
    """The latest night of each configuration with its results (samples not loaded: the table needs medians)."""
    if not configuration_ids:
        return {}
    nights = dict(session.execute(sa.select(Run.configuration_id, sa.func.max(Run.night))
                                  .where(Run.configuration_id.in_(configuration_ids))
                                  .group_by(Run.configuration_id)).all())
    runs = session.execute(sa.select(Run.id, Run.configuration_id, Run.night)
                           .where(sa.tuple_(Run.configuration_id, Run.night).in_(list(nights.items())))
                           .order_by(Run.id)).all()
    run_config = {run_id: config_id for run_id, config_id, _ in runs}
    by_config: dict[int, dict[tuple[str, int], Result]] = {config_id: {} for config_id in nights}
    last_run = {config_id: run_id for run_id, config_id, _ in runs}
    if run_config:
        for result in session.scalars(sa.select(Result).where(Result.run_id.in_(list(run_config)))
                                      .order_by(Result.run_id)):
            by_config[run_config[result.run_id]][(result.name, result.batch_size)] = result
    return {config_id: LatestResults(night=nights[config_id], run_id=last_run[config_id],
                                     results=tuple(by_config[config_id].values()))
            for config_id in nights if config_id in last_run}
