"""Retention of raw samples (issue 31): when a run's raw timings were dropped by `perfdash db compact-samples`
(service/retention.py); NULL while the run keeps them. A nullable column without a default: Postgres adds it to
the catalogue only, whatever the size of ``runs``.

Revision ID: 0011_samples_retention
Revises: 0010_code_fingerprint
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0011_samples_retention"
# the lead renumbers at merge if another branch also adds a 0011
down_revision: str | None = "0010_code_fingerprint"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("samples_compacted_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "samples_compacted_at")
