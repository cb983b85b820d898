"""Initial schema: machines, configurations, runs, series, results, run summaries, annotations.

Indexes follow the queries (service/queries): runs by (configuration, night) and night; results by (run, name)
and (series, run).

Revision ID: 0001
Revises:
Create Date: 2026-11-22 21:35:16.312424
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "machines",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(length=300), nullable=False),
        sa.Column("device", sa.String(length=16), nullable=False),
        sa.Column("cpu_model", sa.String(length=200), nullable=True),
        sa.Column("cpu_count", sa.Integer(), nullable=True),
        sa.Column("gpu_name", sa.String(length=200), nullable=True),
        sa.Column("gpu_driver", sa.String(length=64), nullable=True),
        sa.Column("cuda_version", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_machines")),
        sa.UniqueConstraint("fingerprint", name=op.f("uq_machines_fingerprint")),
    )
    op.create_table(
        "configurations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("machine_id", sa.Integer(), nullable=False),
        sa.Column("suite", sa.String(length=32), nullable=False),
        sa.Column("backend", sa.String(length=32), nullable=False),
        sa.Column("variant", sa.String(length=64), nullable=False),
        sa.Column("compile_mode", sa.String(length=32), nullable=False),
        sa.Column("dtype", sa.String(length=16), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("device", sa.String(length=16), nullable=False),
        sa.Column("threads", sa.Integer(), nullable=True),
        sa.Column("thread_config", sa.String(length=32), nullable=False),
        sa.Column("batch_size_override", sa.Integer(), nullable=True),
        sa.Column("dynamic_shapes", sa.Boolean(), nullable=False),
        sa.Column("env", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["machine_id"], ["machines.id"], name=op.f("fk_configurations_machine_id_machines")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_configurations")),
        sa.UniqueConstraint("key", name=op.f("uq_configurations_key")),
    )
    with op.batch_alter_table("configurations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_configurations_machine_id"), ["machine_id"], unique=False)

    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_key", sa.String(length=64), nullable=False),
        sa.Column("content_sha256", sa.String(length=64), nullable=False),
        sa.Column("configuration_id", sa.Integer(), nullable=False),
        sa.Column("night", sa.Date(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("torch_version", sa.String(length=64), nullable=True),
        sa.Column("torch_git_commit", sa.String(length=64), nullable=True),
        sa.Column("suite_versions", sa.JSON(), nullable=False),
        sa.Column("host", sa.String(length=200), nullable=True),
        sa.Column("jenkins_url", sa.String(length=500), nullable=True),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("command", sa.Text(), nullable=True),
        sa.Column("partition_id", sa.Integer(), nullable=False),
        sa.Column("total_partitions", sa.Integer(), nullable=False),
        sa.Column("ingested_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["configuration_id"], ["configurations.id"], name=op.f("fk_runs_configuration_id_configurations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("run_key", name=op.f("uq_runs_run_key")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index("ix_runs_configuration_night", ["configuration_id", "night"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_night"), ["night"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_torch_git_commit"), ["torch_git_commit"], unique=False)

    op.create_table(
        "series",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("configuration_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["configuration_id"], ["configurations.id"], name=op.f("fk_series_configuration_id_configurations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_series")),
        sa.UniqueConstraint("configuration_id", "name", "batch_size", name="uq_series_identity"),
    )
    op.create_table(
        "annotations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("configuration_id", sa.Integer(), nullable=True),
        sa.Column("series_id", sa.Integer(), nullable=True),
        sa.Column("night", sa.Date(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("author", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["configuration_id"], ["configurations.id"], name=op.f("fk_annotations_configuration_id_configurations")
        ),
        sa.ForeignKeyConstraint(["series_id"], ["series.id"], name=op.f("fk_annotations_series_id_series")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_annotations")),
    )
    with op.batch_alter_table("annotations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_annotations_configuration_id"), ["configuration_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_annotations_night"), ["night"], unique=False)
        batch_op.create_index(batch_op.f("ix_annotations_series_id"), ["series_id"], unique=False)

    op.create_table(
        "results",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.Column("accuracy", sa.String(length=64), nullable=True),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("speedup", sa.Double(), nullable=True),
        sa.Column("abs_latency", sa.Double(), nullable=True),
        sa.Column("compilation_latency", sa.Double(), nullable=True),
        sa.Column("compression_ratio", sa.Double(), nullable=True),
        sa.Column("eager_peak_mem", sa.Double(), nullable=True),
        sa.Column("dynamo_peak_mem", sa.Double(), nullable=True),
        sa.Column("calls_captured", sa.Integer(), nullable=True),
        sa.Column("unique_graphs", sa.Integer(), nullable=True),
        sa.Column("graph_breaks", sa.Integer(), nullable=True),
        sa.Column("unique_graph_breaks", sa.Integer(), nullable=True),
        sa.Column("samples", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_results_run_id_runs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["series_id"], ["series.id"], name=op.f("fk_results_series_id_series")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_results")),
        sa.UniqueConstraint("run_id", "name", name="uq_results_run_name"),
    )
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.create_index("ix_results_series_run", ["series_id", "run_id"], unique=False)

    op.create_table(
        "run_summaries",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("passed", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("geomean_speedup", sa.Double(), nullable=True),
        sa.Column("geomean_speedup_unclipped", sa.Double(), nullable=True),
        sa.Column("mean_compile_time_s", sa.Double(), nullable=True),
        sa.Column("mean_compression_ratio", sa.Double(), nullable=True),
        sa.Column("warnings", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_run_summaries_run_id_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_run_summaries")),
    )


def downgrade() -> None:
    op.drop_table("run_summaries")
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.drop_index("ix_results_series_run")

    op.drop_table("results")
    with op.batch_alter_table("annotations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_annotations_series_id"))
        batch_op.drop_index(batch_op.f("ix_annotations_night"))
        batch_op.drop_index(batch_op.f("ix_annotations_configuration_id"))

    op.drop_table("annotations")
    op.drop_table("series")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_torch_git_commit"))
        batch_op.drop_index(batch_op.f("ix_runs_night"))
        batch_op.drop_index("ix_runs_configuration_night")

    op.drop_table("runs")
    with op.batch_alter_table("configurations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_configurations_machine_id"))

    op.drop_table("configurations")
    op.drop_table("machines")
