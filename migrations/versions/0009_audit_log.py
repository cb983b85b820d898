"""The audit log (issue 29): every write through the API, with the name of the token that made it.

Revision ID: 0009_audit_log
Revises: 0008_releases_index
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0009_audit_log"
# the lead renumbers at merge if another branch also adds a 0009
down_revision: str | None = "0008_releases_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("token_name", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("action", sa.String(length=120), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("detail", sa.String(length=500), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_at"), "audit_log", ["at"], unique=False)
    op.create_index(op.f("ix_audit_log_token_name"), "audit_log", ["token_name"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_audit_log_token_name"), table_name="audit_log")
    op.drop_index(op.f("ix_audit_log_at"), table_name="audit_log")
    op.drop_table("audit_log")
