"""resource groups: the groups (Pulsar's PIP-82 rates) and the tenants, namespaces and topics
attached to them, with each member's weight

Revision ID: 0008_resource_groups
Revises: 0007_topic_name_index
Create Date: 2026-11-28 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.shapes import (
    ID,
    cascading_key,
    create_column_indexes,
    drop_column_indexes,
    id_column,
    primary_key,
    timestamp,
)

revision = "0008_resource_groups"
down_revision = "0007_topic_name_index"
branch_labels = None
depends_on = None

RATES = (
    "publish_msgs",
    "publish_bytes",
    "dispatch_msgs",
    "dispatch_bytes",
    "replication_msgs",
    "replication_bytes",
)
ATTACHMENT_INDEXES = ("group_id", "namespace_id", "tenant_id", "topic_id")


def upgrade() -> None:
    op.create_table(
        "resource_groups",
        id_column(),
        sa.Column("name", sa.String(length=255), nullable=False),
        *(sa.Column(rate, sa.BigInteger(), nullable=False) for rate in RATES),
        timestamp("updated_at"),
        primary_key("resource_groups"),
        sa.UniqueConstraint("name", name=op.f("uq_resource_groups_name")),
    )
    table = "resource_group_attachments"
    op.create_table(
        table,
        id_column(),
        sa.Column("scope_key", sa.String(length=64), nullable=False),
        sa.Column("group_id", ID, nullable=False),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("namespace_id", ID, nullable=True),
        sa.Column("topic_id", ID, nullable=True),
        sa.Column("weight", sa.Integer(), nullable=False),
        timestamp("updated_at"),
        sa.ForeignKeyConstraint(
            ["group_id"],
            ["resource_groups.id"],
            name=op.f(f"fk_{table}_group_id_resource_groups"),
        ),
        cascading_key(table, "tenant_id", "tenants"),
        cascading_key(table, "namespace_id", "namespaces"),
        cascading_key(table, "topic_id", "topics"),
        primary_key(table),
        sa.UniqueConstraint("scope_key", name=op.f(f"uq_{table}_scope_key")),
    )
    create_column_indexes(table, ATTACHMENT_INDEXES)


def downgrade() -> None:
    drop_column_indexes("resource_group_attachments", ATTACHMENT_INDEXES[::-1])
    op.drop_table("resource_group_attachments")
    op.drop_table("resource_groups")
