"""Bisection requests point at their configuration instead of copying it (issue 17).

``bisection_requests`` held copies of eight configuration columns (suite, backend, variant, compile_mode, dtype, mode,
device, threads). It now holds ``configuration_id``; the API still sends the bisect tool those axes, read from the
configuration (perfdash.bisection.REQUEST_AXES). Model and batch size stay: they are the series', not the
configuration's.

Data: a request made for a finding points at the finding's configuration; a request made with explicit fields points
at the stored configuration with those axes (of several, one per machine, the one that ran last). A request whose
axes match no stored configuration stops the upgrade with the request ids and nothing changed: the schema cannot hold
it any more, and dropping it would lose its result. The downgrade copies the axes back from the configurations.

Revision ID: 0007_bisection_configuration
Revises: 0006_training_throughput
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0007_bisection_configuration"
down_revision: str | None = "0006_training_throughput"
branch_labels = None
depends_on = None

# The copied columns as migration 0002 created them (name, type, nullable): written out, not imported, so this
# migration keeps meaning what it meant when later code changes.
COPIED = (
    ("suite", sa.String(length=32), False),
    ("backend", sa.String(length=32), False),
    ("variant", sa.String(length=64), False),
    ("compile_mode", sa.String(length=32), False),
    ("dtype", sa.String(length=16), False),
    ("mode", sa.String(length=16), False),
    ("device", sa.String(length=16), False),
    ("threads", sa.Integer(), True),
)
_NAMES = tuple(name for name, _, _ in COPIED)

_requests = sa.table("bisection_requests", sa.column("id", sa.Integer()), sa.column("finding_id", sa.Integer()),
                     sa.column("configuration_id", sa.Integer()), *(sa.column(n, t) for n, t, _ in COPIED))
_findings = sa.table("findings", sa.column("id", sa.Integer()), sa.column("configuration_id", sa.Integer()))
_configurations = sa.table("configurations", sa.column("id", sa.Integer()), *(sa.column(n, t) for n, t, _ in COPIED))
_runs = sa.table("runs", sa.column("id", sa.Integer()), sa.column("configuration_id", sa.Integer()))


def _point_at_configurations(connection: sa.Connection) -> None:
    connection.execute(_requests.update().where(_requests.c.finding_id.is_not(None)).values(
        configuration_id=sa.select(_findings.c.configuration_id).where(_findings.c.id == _requests.c.finding_id)
        .scalar_subquery()))
    unmatched = []
    rows = connection.execute(sa.select(_requests.c.id, *(_requests.c[n] for n in _NAMES))
                              .where(_requests.c.configuration_id.is_(None))).all()
    for row in rows:
        query = sa.select(_configurations.c.id).join(_runs, _runs.c.configuration_id == _configurations.c.id)
        for name in _NAMES:
            value = getattr(row, name)
            column = _configurations.c[name]
            query = query.where(column.is_(None) if value is None else column == value)
        found = connection.scalar(query.group_by(_configurations.c.id)
                                  .order_by(sa.func.max(_runs.c.id).desc()).limit(1))
        if found is None:
            unmatched.append(row.id)
        else:
            connection.execute(_requests.update().where(_requests.c.id == row.id).values(configuration_id=found))
    if unmatched:
        raise RuntimeError(f"bisection requests {unmatched} name a configuration no stored run has; ingest a run of "
                           "it, or delete the requests, then upgrade again (nothing was changed)")


def upgrade() -> None:
    with op.batch_alter_table("bisection_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("configuration_id", sa.Integer(), nullable=True))
    _point_at_configurations(op.get_bind())
    with op.batch_alter_table("bisection_requests", schema=None) as batch_op:
        batch_op.alter_column("configuration_id", existing_type=sa.Integer(), nullable=False)
        batch_op.create_foreign_key(batch_op.f("fk_bisection_requests_configuration_id_configurations"),
                                    "configurations", ["configuration_id"], ["id"])
        batch_op.create_index(batch_op.f("ix_bisection_requests_configuration_id"), ["configuration_id"],
                              unique=False)
        for name in _NAMES:
            batch_op.drop_column(name)


def downgrade() -> None:
    with op.batch_alter_table("bisection_requests", schema=None) as batch_op:
        for name, type_, _ in COPIED:
            batch_op.add_column(sa.Column(name, type_, nullable=True))
    op.get_bind().execute(_requests.update().values({
        name: sa.select(_configurations.c[name]).where(_configurations.c.id == _requests.c.configuration_id)
        .scalar_subquery() for name in _NAMES}))
    with op.batch_alter_table("bisection_requests", schema=None) as batch_op:
        for name, type_, nullable in COPIED:
            if not nullable:
                batch_op.alter_column(name, existing_type=type_, nullable=False)
        batch_op.drop_index(batch_op.f("ix_bisection_requests_configuration_id"))
        batch_op.drop_constraint(batch_op.f("fk_bisection_requests_configuration_id_configurations"),
                                 type_="foreignkey")
        batch_op.drop_column("configuration_id")
