"""Column and table shapes the revisions repeat: the id column, JSON documents, foreign keys
that cascade, the policy tables keyed by scope, and the report tables' common columns.

A revision built from these creates, to the letter, what its literal statements did (the
migration tests compare the upgraded schema with the models).  Revisions import this module
by its full name (``migrations.shapes``): Alembic loads revision files by path.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSON_DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def id_column() -> sa.Column:
    """The surrogate key every table but ``broker_config`` has."""
    return sa.Column("id", ID, nullable=False)


def json_column(name: str, *, nullable: bool = False) -> sa.Column:
    """A JSON document (JSONB on PostgreSQL)."""
    return sa.Column(name, JSON_DOCUMENT, nullable=nullable)


def timestamp(name: str, *, nullable: bool = False) -> sa.Column:
    """A moment, with its time zone."""
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def cascading_key(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    """``table.column`` references ``target.id``; deleting the target deletes the row."""
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.id"], name=op.f(f"fk_{table}_{column}_{target}"), ondelete="CASCADE"
    )


def primary_key(table: str, column: str = "id") -> sa.PrimaryKeyConstraint:
    return sa.PrimaryKeyConstraint(column, name=op.f(f"pk_{table}"))


def create_scoped_policy_table(table: str, *columns: sa.Column) -> None:
    """A policy table with one row per scope (``scope_key``: a namespace, a topic, ...):
    ``columns`` between the scope and ``updated_at``; rows go with their namespace or topic."""
    op.create_table(
        table,
        id_column(),
        sa.Column("scope_key", sa.String(length=700), nullable=False),
        sa.Column("namespace_id", ID, nullable=False),
        sa.Column("topic_id", ID, nullable=True),
        *columns,
        timestamp("updated_at"),
        cascading_key(table, "namespace_id", "namespaces"),
        cascading_key(table, "topic_id", "topics"),
        primary_key(table),
        sa.UniqueConstraint("scope_key", name=op.f(f"uq_{table}_scope_key")),
    )


def create_column_indexes(table: str, columns: tuple[str, ...]) -> None:
    """One index per column, named by convention (``ix_<table>_<column>``)."""
    for column in columns:
        op.create_index(op.f(f"ix_{table}_{column}"), table, [column], unique=False)


def drop_column_indexes(table: str, columns: tuple[str, ...]) -> None:
    """Drop the indexes ``create_column_indexes`` made, in the order given."""
    for column in columns:
        op.drop_index(op.f(f"ix_{table}_{column}"), table_name=table)


def create_report_table(table: str, *columns: sa.Column) -> None:
    """A report table: ``columns``, then the run, window and subscription each row
    describes; indexed for lookups by namespace and window, and by run."""
    op.create_table(
        table,
        id_column(),
        *columns,
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("window", sa.String(length=8), nullable=False),
        timestamp("window_start"),
        sa.Column("tenant", sa.String(length=255), nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.Column("topic", sa.String(length=700), nullable=False),
        sa.Column("subscription", sa.String(length=255), nullable=False),
        primary_key(table),
    )
    op.create_index(
        f"ix_{table}_lookup", table, ["tenant", "namespace", "window", "window_start"], unique=False
    )
    op.create_index(f"ix_{table}_run", table, ["run_id"], unique=False)


def drop_report_table(table: str) -> None:
    """Drop a table ``create_report_table`` made, its indexes first."""
    op.drop_index(f"ix_{table}_run", table_name=table)
    op.drop_index(f"ix_{table}_lookup", table_name=table)
    op.drop_table(table)
