"""Issue 31: the Releases view's verdicts kept at ingest (service/release_verdicts.py), created and filled here.

``release_pairs``: per configuration, each release's last run judged against the latest run and against each newer
release's last run: the verdict counts, and the models whose verdict is not ``unchanged`` (names, verdicts, impacts:
what the view sorts by, packed in the row), under the criteria's fingerprint (a hash of
perfdash.judgement.criteria_words).

The backfill judges every configuration's pairs with today's code (service.release_verdicts.refresh_all): at
PyTorch's matrix a live comparison of two whole nights cost ~140 ms of Postgres per request. When this code's schema
has moved on (a later migration adds a result metric the judgement reads), it leaves the tables empty: the view
pairs live until each configuration's next ingest fills its pairs (a pair that is not kept is always paired live).

Revision ID: 0013_issue31_release_verdicts
Revises: 0012_issue31_api_speed
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

revision: str = "0013_issue31_release_verdicts"
down_revision: str | None = "0012_issue31_api_speed"
branch_labels = None
depends_on = None

logger = logging.getLogger("alembic.runtime.migration")


def upgrade() -> None:
    op.create_table(
        "release_pairs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("configuration_id", sa.Integer(), nullable=False),
        sa.Column("base_run_id", sa.Integer(), nullable=False),
        sa.Column("new_run_id", sa.Integer(), nullable=False),
        sa.Column("criteria", sa.String(length=64), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("names", sa.JSON(), nullable=False),
        sa.Column("verdicts", sa.LargeBinary(), nullable=False),
        sa.Column("impacts", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["configuration_id"], ["configurations.id"],
                                name=op.f("fk_release_pairs_configuration_id_configurations"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["base_run_id"], ["runs.id"], name=op.f("fk_release_pairs_base_run_id_runs"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["new_run_id"], ["runs.id"], name=op.f("fk_release_pairs_new_run_id_runs"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_release_pairs")),
        sa.UniqueConstraint("base_run_id", "new_run_id", "criteria", name="uq_release_pairs_runs_criteria"),
    )
    op.create_index("ix_release_pairs_configuration_id", "release_pairs", ["configuration_id"])
    op.create_index(op.f("ix_release_pairs_new_run_id"), "release_pairs", ["new_run_id"])
    _backfill()


def _backfill() -> None:
    from sqlalchemy.orm import Session

    from service.models import ReleasePair, Result
    from service.release_verdicts import refresh_all

    bind = op.get_bind()
    inspector = sa.inspect(bind)
    missing = [f"{table.name}.{column.name}" for table in (Result.__table__, ReleasePair.__table__)
               for column in table.columns
               if column.name not in {c["name"] for c in inspector.get_columns(table.name)}]
    if missing:
        logger.info("release_pairs left empty (filled by ingest): this code reads %s, not there yet", missing)
        return
    session = Session(bind=bind)
    try:
        judged = refresh_all(session)
        session.flush()
    finally:
        session.close()
    logger.info("release_pairs: %d pairs judged", judged)


def downgrade() -> None:
    op.drop_index(op.f("ix_release_pairs_new_run_id"), table_name="release_pairs")
    op.drop_index("ix_release_pairs_configuration_id", table_name="release_pairs")
    op.drop_table("release_pairs")
