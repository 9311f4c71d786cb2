"""flow policies: backlog quotas, max unacked messages, message TTL

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "flow_policies",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("scope_key", sa.String(length=700), nullable=False),
        sa.Column(
            "namespace_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("topic_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column(
            "value",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["namespace_id"],
            ["namespaces.id"],
            name=op.f("fk_flow_policies_namespace_id_namespaces"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["topic_id"],
            ["topics.id"],
            name=op.f("fk_flow_policies_topic_id_topics"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_flow_policies")),
        sa.UniqueConstraint("scope_key", name=op.f("uq_flow_policies_scope_key")),
    )
    op.create_index(
        op.f("ix_flow_policies_namespace_id"), "flow_policies", ["namespace_id"], unique=False
    )
    op.create_index(op.f("ix_flow_policies_topic_id"), "flow_policies", ["topic_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_flow_policies_topic_id"), table_name="flow_policies")
    op.drop_index(op.f("ix_flow_policies_namespace_id"), table_name="flow_policies")
    op.drop_table("flow_policies")
