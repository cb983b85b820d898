"""Alerts people act on (issue 16): candidates confirmed by A/B re-measurement, environment shifts, run environments.

- ``findings.confirmation``: ``none`` (needs no confirmation: status changes, improvements, suite findings,
  environment and missing-data findings), ``pending`` (a candidate: a model's performance regression waiting for its
  A/B re-measurement), ``confirmed``, ``not_reproduced``, ``error``; ``findings.confirmation_result`` keeps the A/B
  figures. Existing findings get ``none``: they were reported under the old rule and stay as they were.
- ``bisection_requests.purpose``: ``bisect`` (as before) or ``confirm`` (measure last good and first bad side by side
  only); one request per finding and purpose (was: per finding).
- ``runs.environment``: what the manifest says about the machine's software beyond the configuration (kernel,
  microcode, perfdash version, allocator settings ...), compared night to night to name an environment change.

Revision ID: 0005_alert_confirmation
Revises: 0004_run_hooks_pending
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0005_alert_confirmation"
down_revision: str | None = "0004_run_hooks_pending"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("findings", schema=None) as batch_op:
        batch_op.add_column(sa.Column("confirmation", sa.String(length=16), server_default="none", nullable=False))
        batch_op.add_column(sa.Column("confirmation_result", sa.JSON(), nullable=True))
        batch_op.create_index(batch_op.f("ix_findings_confirmation"), ["confirmation"], unique=False)
    with op.batch_alter_table("bisection_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("purpose", sa.String(length=16), server_default="bisect", nullable=False))
        batch_op.drop_constraint("uq_bisection_requests_finding_id", type_="unique")
        batch_op.create_unique_constraint("uq_bisection_requests_finding_purpose", ["finding_id", "purpose"])
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("environment", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("environment")
    # Confirmation requests have no place in the old schema (one request per finding).
    op.execute("DELETE FROM bisection_requests WHERE purpose = 'confirm'")
    with op.batch_alter_table("bisection_requests", schema=None) as batch_op:
        batch_op.drop_constraint("uq_bisection_requests_finding_purpose", type_="unique")
        batch_op.create_unique_constraint("uq_bisection_requests_finding_id", ["finding_id"])
        batch_op.drop_column("purpose")
    with op.batch_alter_table("findings", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_findings_confirmation"))
        batch_op.drop_column("confirmation_result")
        batch_op.drop_column("confirmation")
