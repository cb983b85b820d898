"""results.speedup_ci_low / speedup_ci_high: the 95 % confidence interval of each speedup (perfdash.confidence),
computed once at ingest from the raw samples so pages and comparisons never load the samples.

Also brings stored summaries to current runner.py's count (perfdash.metrics): a model whose accuracy is
model_fail_to_load or eager_fail_to_run leaves the total. Only ``total`` changes: such a model never passed, so it
was in no mean and not in ``passed``. Downgrading puts those models back into the total.

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


# Results of a run that its summary counted before this revision and that never ran: with any performance row in
# the run, only models with one (speedup not null) were counted; without, all were.
_NEVER_RAN = """
    SELECT count(*) FROM results r
    WHERE r.run_id = run_summaries.run_id
      AND r.accuracy IN ('model_fail_to_load', 'eager_fail_to_run')
      AND (r.speedup IS NOT NULL
           OR NOT EXISTS (SELECT 1 FROM results p WHERE p.run_id = r.run_id AND p.speedup IS NOT NULL))
"""


def upgrade() -> None:
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.add_column(sa.Column("speedup_ci_low", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("speedup_ci_high", sa.Float(), nullable=True))
    op.execute(f"UPDATE run_summaries SET total = total - ({_NEVER_RAN})")


def downgrade() -> None:
    op.execute(f"UPDATE run_summaries SET total = total + ({_NEVER_RAN})")
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.drop_column("speedup_ci_high")
        batch_op.drop_column("speedup_ci_low")
