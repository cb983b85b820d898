"""results.speedup_ci_low / speedup_ci_high: the 95 % confidence interval of each speedup (perfdash.confidence),
computed once at ingest from the raw samples so pages and comparisons never load the samples.

Revision ID: 0003_speedup_interval
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003_speedup_interval"
down_revision: str | None = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.add_column(sa.Column("speedup_ci_low", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("speedup_ci_high", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.drop_column("speedup_ci_high")
        batch_op.drop_column("speedup_ci_low")
