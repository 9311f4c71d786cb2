"""flow policies: backlog quotas, max unacked messages, message TTL

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.shapes import (
    create_column_indexes,
    create_scoped_policy_table,
    drop_column_indexes,
    json_column,
)

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_scoped_policy_table(
        "flow_policies",
        sa.Column("kind", sa.String(length=64), nullable=False),
        json_column("value"),
    )
    create_column_indexes("flow_policies", ("namespace_id", "topic_id"))


def downgrade() -> None:
    drop_column_indexes("flow_policies", ("topic_id", "namespace_id"))
    op.drop_table("flow_policies")
