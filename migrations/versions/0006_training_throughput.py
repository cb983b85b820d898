"""Training throughput and distributed runs (issue 15).

- ``results.eager_throughput`` / ``results.compiled_throughput``: samples per second of each side, from perfdash's
  samples file (PyTorch's CSVs have no such column); empty for runs stored before and for PyTorch's own files.
- ``configurations.world_size`` / ``configurations.distributed_backend``: a DistributedDataParallel run's number of
  processes and its process-group backend (gloo, nccl), part of the series; existing configurations are single
  process runs (1, empty).

Revision ID: 0006_training_throughput
Revises: 0005_alert_confirmation
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006_training_throughput"
down_revision: str | None = "0005_alert_confirmation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.add_column(sa.Column("eager_throughput", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("compiled_throughput", sa.Float(), nullable=True))
    with op.batch_alter_table("configurations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("world_size", sa.Integer(), server_default="1", nullable=False))
        batch_op.add_column(sa.Column("distributed_backend", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("configurations", schema=None) as batch_op:
        batch_op.drop_column("distributed_backend")
        batch_op.drop_column("world_size")
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.drop_column("compiled_throughput")
        batch_op.drop_column("eager_throughput")
