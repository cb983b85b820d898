"""A configuration's runs by torch commit prefix (issue 31, PyTorch's whole matrix on one Postgres).

The Compare page's "two commits" form and the runs filter find a configuration's runs whose commit starts with what
was typed (``LIKE 'ab12%'``). The commit's own index (ix_runs_torch_git_commit) cannot serve a prefix match under a
non-C collation, so Postgres read every run of the configuration and filtered them: 314 heap blocks, 11 ms on a
configuration with 314 runs (bench/README.md, issue 31), growing with the history. This index holds
(configuration_id, torch_git_commit) with the pattern operator class on Postgres, which a prefix LIKE uses
whatever the database's collation; a plain index elsewhere.

Revision ID: 0011_runs_commit_prefix
Revises: 0009_audit_log
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0011_runs_commit_prefix"
# the lead renumbers at merge (another branch adds a 0010)
down_revision: str | None = "0009_audit_log"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_runs_configuration_commit", "runs",
                    ["configuration_id", sa.text("torch_git_commit varchar_pattern_ops")]
                    if op.get_context().dialect.name == "postgresql" else ["configuration_id", "torch_git_commit"])


def downgrade() -> None:
    op.drop_index("ix_runs_configuration_commit", table_name="runs")
