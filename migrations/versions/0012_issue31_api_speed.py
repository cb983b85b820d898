"""Issue 31, the API at 30M results: a model's history as an index-only scan.

- ``results.eager_activation_peak_mem`` / ``dynamo_activation_peak_mem``: perfdash's own activation peaks, stored
  at ingest beside the samples that also keep them; filled here from the stored samples. The history read them out
  of the samples JSON, which no index can carry.
- ``ix_results_series_history`` on (series_id, run_id) INCLUDE every column a model's history reads
  (service.models.HISTORY_INCLUDE), in place of ``ix_results_series_run`` (the same key): the history no longer
  reads one heap page a night (602 pages for 604 points at 30M results). SQLite has no INCLUDE: the plain key there.
- ``ix_runs_configuration_night`` INCLUDE (service.models.RUN_INCLUDE) the run's order, partition and commit: the
  previous-run probes of a summary and the runs side of a model's history read no heap page either (Postgres).
- Postgres: autovacuum visits ``results`` every 100,000 inserted rows (two nights of PyTorch's matrix) instead of
  every 20 % of the table (120 nights at 30M results): an index-only scan reads the heap for every row on a page the
  visibility map does not yet mark all-visible, i.e. every row inserted since the last vacuum.

After upgrading a database whose results carry samples, ``VACUUM (ANALYZE) results`` (or the next autovacuum) makes
the filled rows all-visible again.

Revision ID: 0012_issue31_api_speed
Revises: 0011_issue31_storage
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0012_issue31_api_speed"
# the lead renumbers at merge if another branch also adds a 0012
down_revision: str | None = "0011_issue31_storage"
branch_labels = None
depends_on = None

# A snapshot of service.models.HISTORY_INCLUDE when this revision was written (a migration does not follow the
# models).
_INCLUDE = ["accuracy", "passed", "speedup", "abs_latency", "compilation_latency", "compression_ratio",
            "eager_throughput", "compiled_throughput", "eager_peak_mem", "dynamo_peak_mem", "graph_breaks",
            "speedup_ci_low", "speedup_ci_high", "eager_activation_peak_mem", "dynamo_activation_peak_mem"]
_RUN_INCLUDE = ["started_at", "id", "partition_id", "total_partitions", "torch_git_commit"]
_PEAKS = ("eager_activation_peak_mem", "dynamo_activation_peak_mem")


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for name in _PEAKS:
        op.add_column("results", sa.Column(name, sa.Float(), nullable=True))
    if postgres:
        values = ", ".join(f"{name} = (samples ->> '{name}')::float8" for name in _PEAKS)
    else:
        values = ", ".join(f"{name} = json_extract(samples, '$.{name}')" for name in _PEAKS)
    op.execute(f"UPDATE results SET {values} WHERE samples IS NOT NULL")
    # the new index first, then the old one dropped: reads keep an index throughout (CREATE INDEX blocks writes only)
    op.create_index("ix_results_series_history", "results", ["series_id", "run_id"], postgresql_include=_INCLUDE)
    op.drop_index("ix_results_series_run", table_name="results")
    if postgres:  # elsewhere the same index without INCLUDE: nothing to change
        op.drop_index("ix_runs_configuration_night", table_name="runs")
        op.create_index("ix_runs_configuration_night", "runs", ["configuration_id", "night"],
                        postgresql_include=_RUN_INCLUDE)
        op.execute("ALTER TABLE results SET (autovacuum_vacuum_insert_scale_factor = 0, "
                   "autovacuum_vacuum_insert_threshold = 100000)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE results RESET (autovacuum_vacuum_insert_scale_factor, "
                   "autovacuum_vacuum_insert_threshold)")
        op.drop_index("ix_runs_configuration_night", table_name="runs")
        op.create_index("ix_runs_configuration_night", "runs", ["configuration_id", "night"])
    op.create_index("ix_results_series_run", "results", ["series_id", "run_id"])
    op.drop_index("ix_results_series_history", table_name="results")
    for name in reversed(_PEAKS):
        op.drop_column("results", name)
