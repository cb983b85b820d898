"""A bisection request carries its series' own between-run noise (issue 39 item 2): ``series_noise_cv`` (the robust
CV of the series' metric over the runs before the finding's change, relative) and ``series_noise_runs`` (the runs it
rests on), both null where the series has no estimate, which is what every request stored before this revision had.

Additive: the rows already stored keep null, so the bisect tool treats them as before (no prior).

Revision ID: 0015_series_noise_of_requests
Revises: 0014_audit_refusals
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0015_series_noise_of_requests"
# the lead renumbers at merge if another branch also adds a 0015
down_revision: str | None = "0014_audit_refusals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bisection_requests") as batch_op:
        batch_op.add_column(sa.Column("series_noise_cv", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("series_noise_runs", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("bisection_requests") as batch_op:
        batch_op.drop_column("series_noise_runs")
        batch_op.drop_column("series_noise_cv")
