"""subscription permissions: the roles that may use a subscription name in a namespace

Revision ID: 0010_subscription_permissions
Revises: 0009_advice_report
Create Date: 2026-11-30 09:00:00.000000
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

revision = "0010_subscription_permissions"
down_revision = "0009_advice_report"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_scoped_policy_table(
        "subscription_permissions",
        sa.Column("subscription", sa.String(length=255), nullable=False),
        json_column("roles"),
    )
    create_column_indexes("subscription_permissions", ("namespace_id", "topic_id"))


def downgrade() -> None:
    drop_column_indexes("subscription_permissions", ("topic_id", "namespace_id"))
    op.drop_table("subscription_permissions")
