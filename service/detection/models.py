"""Tables of detection and bisection requests (migration 0002), on service.models' Base (the GitHub ledger of
migration 0002 is service.github.models).

- ``ChangePoint``: a stored level change of one metric of one series (or of a configuration's suite geomean when
  ``series_id`` is NULL); the newest one is the baseline later detection starts from.
- ``Finding``: what a person should look at — a status change, a performance change point, or a suite-level drop —
  found when a given run arrived. ``key`` makes detection idempotent (running it twice stores nothing new).
- ``BisectionRequest``: the agreed bisection contract (perfdash.bisection; one per finding and purpose: ``confirm``
  re-measures a candidate's last good and first bad builds side by side, ``bisect`` finds the culprit), with its
  result once the bisect job reports. Migration 0005 added ``purpose`` and the findings' ``confirmation`` state;
  0007 made it point at its configuration instead of copying the configuration's columns.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.models import Base, Configuration, Run, Series


class ChangePointRow(Base):
    __tablename__ = "change_points"
    __table_args__ = (
        sa.UniqueConstraint("configuration_id", "series_id", "metric", "run_id", name="uq_change_points_identity"),
        sa.Index("ix_change_points_series_metric", "series_id", "metric"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    configuration_id: Mapped[int] = mapped_column(sa.ForeignKey("configurations.id"))
    series_id: Mapped[int | None] = mapped_column(sa.ForeignKey("series.id"))  # NULL: the suite's geomean
    metric: Mapped[str] = mapped_column(sa.String(32))
    run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"))  # first run of the new level
    previous_run_id: Mapped[int | None] = mapped_column(sa.ForeignKey("runs.id", ondelete="SET NULL"))  # last old
    good_commit: Mapped[str | None] = mapped_column(sa.String(64))
    bad_commit: Mapped[str | None] = mapped_column(sa.String(64))
    before_mean: Mapped[float]
    after_mean: Mapped[float]
    change_pct: Mapped[float]
    p_value: Mapped[float]
    n_before: Mapped[int]
    n_after: Mapped[int]
    regression: Mapped[bool]
    created_at: Mapped[datetime] = mapped_column(server_default=sa.func.now())


class Finding(Base):
    __tablename__ = "findings"
    __table_args__ = (sa.Index("ix_findings_run", "run_id"), sa.Index("ix_findings_series", "series_id"))

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(sa.String(200), unique=True)  # idempotency of detection
    kind: Mapped[str] = mapped_column(sa.String(16))  # status | performance | summary
    category: Mapped[str] = mapped_column(sa.String(16))  # regression | improvement | new_failure | fixed
    configuration_id: Mapped[int] = mapped_column(sa.ForeignKey("configurations.id"), index=True)
    series_id: Mapped[int | None] = mapped_column(sa.ForeignKey("series.id"))
    run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"))  # the run that showed it
    change_point_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("change_points.id", ondelete="CASCADE"), unique=True
    )
    model: Mapped[str | None] = mapped_column(sa.String(200))
    metric: Mapped[str | None] = mapped_column(sa.String(32))  # speedup | abs_latency | ... | accuracy | passrate
    old_status: Mapped[str | None] = mapped_column(sa.String(64))
    new_status: Mapped[str | None] = mapped_column(sa.String(64))
    old_value: Mapped[float | None]
    new_value: Mapped[float | None]
    change_pct: Mapped[float | None]
    p_value: Mapped[float | None]
    good_commit: Mapped[str | None] = mapped_column(sa.String(64))
    bad_commit: Mapped[str | None] = mapped_column(sa.String(64))
    summary: Mapped[str] = mapped_column(sa.Text)
    acknowledged_at: Mapped[datetime | None]
    acknowledged_by: Mapped[str | None] = mapped_column(sa.String(200))
    ack_note: Mapped[str | None] = mapped_column(sa.Text)
    # none | pending (a candidate) | confirmed | not_reproduced | error: see service.detection.confirmation
    confirmation: Mapped[str] = mapped_column(sa.String(16), default="none", server_default="none", index=True)
    confirmation_result: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)  # the A/B figures
    # did the generated code change between the two runs compared (service.detection.code_change; migration 0010)
    code_change: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    created_at: Mapped[datetime] = mapped_column(server_default=sa.func.now())

    configuration: Mapped[Configuration] = relationship(lazy="joined")
    series: Mapped[Series | None] = relationship(lazy="joined")
    run: Mapped[Run] = relationship(lazy="joined")
    change_point: Mapped[ChangePointRow | None] = relationship(lazy="joined")

    @property
    def acknowledged(self) -> bool:
        return self.acknowledged_at is not None


class BisectionRequest(Base):
    __tablename__ = "bisection_requests"
    __table_args__ = (sa.UniqueConstraint("finding_id", "purpose", name="uq_bisection_requests_finding_purpose"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    status: Mapped[str] = mapped_column(sa.String(16), index=True)  # pending | running | done
    # bisect: find the culprit; confirm: only measure good and bad side by side (a candidate's A/B re-measurement)
    purpose: Mapped[str] = mapped_column(sa.String(16), default="bisect", server_default="bisect")
    finding_id: Mapped[int | None] = mapped_column(sa.ForeignKey("findings.id", ondelete="SET NULL"))
    # what to measure: one model (at a batch size) of a stored configuration, whose axes the bisect tool receives
    configuration_id: Mapped[int] = mapped_column(sa.ForeignKey("configurations.id"), index=True)
    model: Mapped[str] = mapped_column(sa.String(200))
    batch_size: Mapped[int | None]
    metric: Mapped[str] = mapped_column(sa.String(32))
    direction: Mapped[str] = mapped_column(sa.String(8))  # higher | lower: which way is better
    good_commit: Mapped[str] = mapped_column(sa.String(64))
    bad_commit: Mapped[str] = mapped_column(sa.String(64))
    threshold_pct: Mapped[float]
    result: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    created_at: Mapped[datetime] = mapped_column(server_default=sa.func.now())
    updated_at: Mapped[datetime | None]

    configuration: Mapped[Configuration] = relationship(lazy="joined")
