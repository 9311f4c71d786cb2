"""initial

Revision ID: 0001
Revises:
Create Date: 2026-11-22 22:43:46.889001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.shapes import (
    ID,
    cascading_key,
    create_column_indexes,
    create_scoped_policy_table,
    drop_column_indexes,
    id_column,
    json_column,
    primary_key,
    timestamp,
)

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_log",
        id_column(),
        timestamp("at"),
        sa.Column("role", sa.String(length=255), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("entity_type", sa.String(length=64), nullable=False),
        sa.Column("entity", sa.String(length=700), nullable=False),
        json_column("before", nullable=True),
        json_column("after", nullable=True),
        primary_key("audit_log"),
    )
    create_column_indexes("audit_log", ("at",))
    op.create_index(
        "ix_audit_log_entity_at", "audit_log", ["entity_type", "entity", "at"], unique=False
    )
    op.create_table(
        "broker_config",
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        timestamp("updated_at"),
        primary_key("broker_config", "name"),
    )
    op.create_table(
        "clusters",
        id_column(),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("service_url", sa.String(length=1024), nullable=False),
        sa.Column("broker_service_url", sa.String(length=1024), nullable=False),
        timestamp("created_at"),
        primary_key("clusters"),
        sa.UniqueConstraint("name", name=op.f("uq_clusters_name")),
    )
    op.create_table(
        "outbox_events",
        id_column(),
        timestamp("created_at"),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("entity", sa.String(length=700), nullable=False),
        json_column("payload"),
        timestamp("published_at", nullable=True),
        primary_key("outbox_events"),
    )
    create_column_indexes("outbox_events", ("published_at",))
    op.create_table(
        "tenants",
        id_column(),
        sa.Column("name", sa.String(length=255), nullable=False),
        json_column("admin_roles"),
        json_column("allowed_clusters"),
        timestamp("created_at"),
        primary_key("tenants"),
        sa.UniqueConstraint("name", name=op.f("uq_tenants_name")),
    )
    _create_named_child("namespaces", "tenant_id", "tenants", json_column("policies"))
    _create_named_child(
        "topics",
        "namespace_id",
        "namespaces",
        sa.Column("partitions", sa.Integer(), nullable=False),
        json_column("properties"),
    )
    create_scoped_policy_table(
        "dispatch_rate_policies",
        sa.Column("subscription", sa.String(length=255), nullable=True),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("msg", sa.BigInteger(), nullable=False),
        sa.Column("byte", sa.BigInteger(), nullable=False),
        sa.Column("relative", sa.Boolean(), nullable=False),
        sa.Column("period", sa.Integer(), nullable=False),
    )
    create_column_indexes("dispatch_rate_policies", ("namespace_id", "topic_id"))
    _create_named_child("subscriptions", "topic_id", "topics")


def _create_named_child(table: str, parent: str, parents: str, *columns: sa.Column) -> None:
    """A table of rows named within their parent (``parent``: the key of a row of
    ``parents``), with ``columns`` after the name; rows go with their parent."""
    op.create_table(
        table,
        id_column(),
        sa.Column(parent, ID, nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        *columns,
        timestamp("created_at"),
        cascading_key(table, parent, parents),
        primary_key(table),
        sa.UniqueConstraint(parent, "name", name=op.f(f"uq_{table}_{parent}_name")),
    )


def downgrade() -> None:
    op.drop_table("subscriptions")
    drop_column_indexes("dispatch_rate_policies", ("topic_id", "namespace_id"))
    op.drop_table("dispatch_rate_policies")
    op.drop_table("topics")
    op.drop_table("namespaces")
    op.drop_table("tenants")
    drop_column_indexes("outbox_events", ("published_at",))
    op.drop_table("outbox_events")
    op.drop_table("clusters")
    op.drop_table("broker_config")
    op.drop_index("ix_audit_log_entity_at", table_name="audit_log")
    drop_column_indexes("audit_log", ("at",))
    op.drop_table("audit_log")
