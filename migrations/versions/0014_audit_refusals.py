"""The audit log keeps refused attempts too (issue 40): ``outcome`` (done | refused) and the peer's address.

Additive: the rows already stored are writes that happened (``done``), from an address nobody kept (``""``).

Revision ID: 0014_audit_refusals
Revises: 0013_issue31_release_verdicts
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0014_audit_refusals"
# the lead renumbers at merge if another branch also adds a 0014
down_revision: str | None = "0013_issue31_release_verdicts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit_log") as batch_op:
        batch_op.add_column(sa.Column("outcome", sa.String(length=16), server_default="done", nullable=False))
        batch_op.add_column(sa.Column("client", sa.String(length=64), server_default="", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("audit_log") as batch_op:
        batch_op.drop_column("client")
        batch_op.drop_column("outcome")
