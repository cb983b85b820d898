"""Generated code per model and run (issue 28): Inductor's code fingerprint, the top kernels of a profile and the
packed source for the code diff; and on each finding whether the code changed between the runs it compares.

Revision ID: 0010_code_fingerprint
Revises: 0009_audit_log
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0010_code_fingerprint"
# the lead renumbers at merge if another branch also adds a 0010
down_revision: str | None = "0009_audit_log"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "generated_code",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("graphs", sa.Integer(), nullable=False),
        sa.Column("kernels", sa.Integer(), nullable=False),
        sa.Column("kernel_digests", sa.JSON(), nullable=False),
        sa.Column("kernel_times", sa.JSON(), nullable=False),
        sa.Column("source", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_generated_code_run_id_runs"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "name", name=op.f("pk_generated_code")),
    )
    op.add_column("findings", sa.Column("code_change", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("findings", "code_change")
    op.drop_table("generated_code")
