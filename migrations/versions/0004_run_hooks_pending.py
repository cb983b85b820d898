"""Runs remember whether their post-ingest hooks (detection) still have to run, so a run committed just before the
database went away is detected later instead of never.

Existing runs are not pending: their hooks ran (or were reported as failed) when they were ingested.

Revision ID: 0004_run_hooks_pending
Revises: 0003_speedup_interval
Create Date: 2026-11-24 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_run_hooks_pending"
down_revision: str | None = "0003_speedup_interval"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("hooks_pending", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.create_index("ix_runs_hooks_pending", ["id"], postgresql_where=sa.text("hooks_pending"),
                           sqlite_where=sa.text("hooks_pending"))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_hooks_pending")
        batch.drop_column("hooks_pending")
