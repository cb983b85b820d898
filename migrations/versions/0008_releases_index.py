"""Runs by torch version (issue 15, the Releases view).

The Releases view finds each configuration's last run of a torch version, and lists the versions that have runs.
Without an index both scan every run: on three years of synthetic history (19,746 runs, bench/pages.py) 11.8 ms for
one version's runs (0.13 ms with it, the view does it twice) and 18 ms for the distinct versions (9 ms, an index-only
scan), growing with the history.

Revision ID: 0008_releases_index
Revises: 0007_bisection_configuration
"""

from __future__ import annotations

from alembic import op

revision: str = "0008_releases_index"
# the lead sets this to "0007_bisection_configuration" at merge (that migration is written on another branch)
down_revision: str | None = "0007_bisection_configuration"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_runs_torch_version", "runs", ["torch_version", "configuration_id"])


def downgrade() -> None:
    op.drop_index("ix_runs_torch_version", table_name="runs")
