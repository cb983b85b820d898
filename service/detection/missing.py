"""Missing data: configurations that reported the night before and not tonight.

A dashboard that stays green because nothing arrived is the failure users fear most, so the morning report says
which configurations are missing. Nothing is stored: the answer depends only on which runs exist, and it changes by
itself when a late run arrives. (A suite whose model count dropped is a stored finding: see detector.MODELS_DROP.)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.models import Configuration, Run


@dataclass(frozen=True, slots=True)
class MissingConfiguration:
    configuration_id: int
    suite: str
    backend: str
    description: str  # dtype, mode, device, threads, machine
    last_night: date  # the night it last reported
    last_run_id: int


def missing_configurations(session: Session, night: date) -> list[MissingConfiguration]:
    """Configurations with a run on the last night before ``night`` that had any run, and none on ``night``."""
    previous_night = session.scalar(sa.select(sa.func.max(Run.night)).where(Run.night < night))
    if previous_night is None:
        return []
    tonight = sa.select(Run.configuration_id).where(Run.night == night)
    rows = session.execute(
        sa.select(Configuration, sa.func.max(Run.id)).join(Run, Run.configuration_id == Configuration.id)
        .where(Run.night == previous_night, Configuration.id.not_in(tonight))
        .group_by(Configuration.id).order_by(Configuration.suite, Configuration.id)).unique().all()
    return [MissingConfiguration(
        configuration_id=c.id, suite=c.suite, backend=c.backend_variant,
        description=f"{c.dtype}, {c.mode}, {c.device}, {c.thread_config}, {c.machine.fingerprint}",
        last_night=previous_night, last_run_id=run_id) for c, run_id in rows]
