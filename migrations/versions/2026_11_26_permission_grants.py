"""permission grants: produce/consume actions of a role on a namespace or topic

Revision ID: 0006_permission_grants
Revises: 0005_report_run_queue
Create Date: 2026-11-26 09:00:00.000000
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

revision = "0006_permission_grants"
down_revision = "0005_report_run_queue"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_scoped_policy_table(
        "permission_grants",
        sa.Column("role", sa.String(length=255), nullable=False),
        json_column("actions"),
    )
    create_column_indexes("permission_grants", ("namespace_id", "topic_id", "role"))


def downgrade() -> None:
    drop_column_indexes("permission_grants", ("role", "topic_id", "namespace_id"))
    op.drop_table("permission_grants")
