"""report priority levels: the rate and backlog reports per message priority

Revision ID: 0011_report_priority_levels
Revises: 0010_subscription_permissions
Create Date: 2026-12-01 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_report_priority_levels"
down_revision = "0010_subscription_permissions"
branch_labels = None
depends_on = None

TABLES = ("rate_report", "backlog_report")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("priority_levels", sa.Text(), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("priority_levels")
