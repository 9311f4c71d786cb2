"""permission grants: produce/consume actions of a role on a namespace or topic

Revision ID: 0006_permission_grants
Revises: 0005_report_run_queue
Create Date: 2026-11-26 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006_permission_grants"
down_revision = "0005_report_run_queue"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "permission_grants",
        sa.Column("id", ID, nullable=False),
        sa.Column("scope_key", sa.String(length=700), nullable=False),
        sa.Column("namespace_id", ID, nullable=False),
        sa.Column("topic_id", ID, nullable=True),
        sa.Column("role", sa.String(length=255), nullable=False),
        sa.Column(
            "actions",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["namespace_id"],
            ["namespaces.id"],
            name=op.f("fk_permission_grants_namespace_id_namespaces"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["topic_id"],
            ["topics.id"],
            name=op.f("fk_permission_grants_topic_id_topics"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_permission_grants")),
        sa.UniqueConstraint("scope_key", name=op.f("uq_permission_grants_scope_key")),
    )
    for column in ("namespace_id", "topic_id", "role"):
        op.create_index(
            op.f(f"ix_permission_grants_{column}"), "permission_grants", [column], unique=False
        )


def downgrade() -> None:
    for column in ("role", "topic_id", "namespace_id"):
        op.drop_index(op.f(f"ix_permission_grants_{column}"), table_name="permission_grants")
    op.drop_table("permission_grants")
