"""Issue 31, PyTorch's whole matrix on one Postgres:

- ``runs.samples_compacted_at``: when a run's raw timings were dropped by `perfdash db compact-samples`
  (service/retention.py); NULL while the run keeps them. Nullable without a default: Postgres only records it in
  the catalogue, whatever the size of ``runs``.
- ``run_summaries.warnings_count``: the number of a summary's warnings, stored at ingest, filled here for the rows
  already stored. Lists and the night summary show the count; counting it from the JSON in every read parsed ~4 kB a
  run (70 ms of a night's summary at PyTorch's matrix).

Revision ID: 0011_issue31_storage
Revises: 0010_code_fingerprint
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0011_issue31_storage"
# the lead renumbers at merge if another branch also adds a 0011
down_revision: str | None = "0010_code_fingerprint"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("samples_compacted_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("run_summaries", sa.Column("warnings_count", sa.Integer(), nullable=True))
    op.execute("UPDATE run_summaries SET warnings_count = json_array_length(warnings)")


def downgrade() -> None:
    op.drop_column("run_summaries", "warnings_count")
    op.drop_column("runs", "samples_compacted_at")
