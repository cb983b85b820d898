"""Detection, GitHub reporting and bisection requests: change points, findings, the GitHub posts ledger, bisections.

Tables of service/models.py. Findings are acknowledged on the finding itself (note, who, when); a note
also goes to the annotations table of 0001 so the dashboard shows it.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 21:52:26.721182
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "change_points",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("configuration_id", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.Integer(), nullable=True),
        sa.Column("metric", sa.String(length=32), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("previous_run_id", sa.Integer(), nullable=True),
        sa.Column("good_commit", sa.String(length=64), nullable=True),
        sa.Column("bad_commit", sa.String(length=64), nullable=True),
        sa.Column("before_mean", sa.Double(), nullable=False),
        sa.Column("after_mean", sa.Double(), nullable=False),
        sa.Column("change_pct", sa.Double(), nullable=False),
        sa.Column("p_value", sa.Double(), nullable=False),
        sa.Column("n_before", sa.Integer(), nullable=False),
        sa.Column("n_after", sa.Integer(), nullable=False),
        sa.Column("regression", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["configuration_id"], ["configurations.id"], name=op.f("fk_change_points_configuration_id_configurations")
        ),
        sa.ForeignKeyConstraint(
            ["previous_run_id"], ["runs.id"], name=op.f("fk_change_points_previous_run_id_runs"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_change_points_run_id_runs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["series_id"], ["series.id"], name=op.f("fk_change_points_series_id_series")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_change_points")),
        sa.UniqueConstraint("configuration_id", "series_id", "metric", "run_id", name="uq_change_points_identity"),
    )
    with op.batch_alter_table("change_points", schema=None) as batch_op:
        batch_op.create_index("ix_change_points_series_metric", ["series_id", "metric"], unique=False)

    op.create_table(
        "findings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("category", sa.String(length=16), nullable=False),
        sa.Column("configuration_id", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.Integer(), nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("change_point_id", sa.Integer(), nullable=True),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("metric", sa.String(length=32), nullable=True),
        sa.Column("old_status", sa.String(length=64), nullable=True),
        sa.Column("new_status", sa.String(length=64), nullable=True),
        sa.Column("old_value", sa.Double(), nullable=True),
        sa.Column("new_value", sa.Double(), nullable=True),
        sa.Column("change_pct", sa.Double(), nullable=True),
        sa.Column("p_value", sa.Double(), nullable=True),
        sa.Column("good_commit", sa.String(length=64), nullable=True),
        sa.Column("bad_commit", sa.String(length=64), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("acknowledged_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("acknowledged_by", sa.String(length=200), nullable=True),
        sa.Column("ack_note", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["change_point_id"],
            ["change_points.id"],
            name=op.f("fk_findings_change_point_id_change_points"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["configuration_id"], ["configurations.id"], name=op.f("fk_findings_configuration_id_configurations")
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_findings_run_id_runs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["series_id"], ["series.id"], name=op.f("fk_findings_series_id_series")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_findings")),
        sa.UniqueConstraint("change_point_id", name=op.f("uq_findings_change_point_id")),
        sa.UniqueConstraint("key", name=op.f("uq_findings_key")),
    )
    with op.batch_alter_table("findings", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_findings_configuration_id"), ["configuration_id"], unique=False)
        batch_op.create_index("ix_findings_run", ["run_id"], unique=False)
        batch_op.create_index("ix_findings_series", ["series_id"], unique=False)

    op.create_table(
        "bisection_requests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("finding_id", sa.Integer(), nullable=True),
        sa.Column("suite", sa.String(length=32), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("backend", sa.String(length=32), nullable=False),
        sa.Column("variant", sa.String(length=64), nullable=False),
        sa.Column("compile_mode", sa.String(length=32), nullable=False),
        sa.Column("dtype", sa.String(length=16), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("device", sa.String(length=16), nullable=False),
        sa.Column("threads", sa.Integer(), nullable=True),
        sa.Column("batch_size", sa.Integer(), nullable=True),
        sa.Column("metric", sa.String(length=32), nullable=False),
        sa.Column("direction", sa.String(length=8), nullable=False),
        sa.Column("good_commit", sa.String(length=64), nullable=False),
        sa.Column("bad_commit", sa.String(length=64), nullable=False),
        sa.Column("threshold_pct", sa.Double(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["finding_id"], ["findings.id"], name=op.f("fk_bisection_requests_finding_id_findings"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bisection_requests")),
        sa.UniqueConstraint("finding_id", name=op.f("uq_bisection_requests_finding_id")),
    )
    with op.batch_alter_table("bisection_requests", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_bisection_requests_status"), ["status"], unique=False)

    op.create_table(
        "github_posts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("repository", sa.String(length=200), nullable=False),
        sa.Column("issue_number", sa.Integer(), nullable=True),
        sa.Column("comment_id", sa.BigInteger(), nullable=True),
        sa.Column("html_url", sa.String(length=500), nullable=True),
        sa.Column("title", sa.String(length=300), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("body_sha256", sa.String(length=64), nullable=False),
        sa.Column("posted_sha256", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("finding_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("posted_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["finding_id"], ["findings.id"], name=op.f("fk_github_posts_finding_id_findings"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_github_posts")),
        sa.UniqueConstraint("kind", "key", "repository", name="uq_github_posts_identity"),
    )


def downgrade() -> None:
    op.drop_table("github_posts")
    with op.batch_alter_table("bisection_requests", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_bisection_requests_status"))

    op.drop_table("bisection_requests")
    with op.batch_alter_table("findings", schema=None) as batch_op:
        batch_op.drop_index("ix_findings_series")
        batch_op.drop_index("ix_findings_run")
        batch_op.drop_index(batch_op.f("ix_findings_configuration_id"))

    op.drop_table("findings")
    with op.batch_alter_table("change_points", schema=None) as batch_op:
        batch_op.drop_index("ix_change_points_series_metric")

    op.drop_table("change_points")
