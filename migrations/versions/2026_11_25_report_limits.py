"""rate report: limits weighted by time, per partition and per topic

The rate report's ``limit_msg_per_s`` and ``limit_byte_per_s`` were the topic's limit in the
window's last interval: they are kept, renamed ``limit_topic_at_end`` and
``byte_limit_topic_at_end`` (the backlog report's ``limit_msg_per_s`` too).  The new columns
are null in rows written before this revision; a report run over their windows recomputes
them.

Revision ID: 0004_report_limits
Revises: 0003
Create Date: 2026-11-25 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_report_limits"
down_revision = "0003"
branch_labels = None
depends_on = None

# New nullable columns of the rate report, in the model's order.
LIMIT_COLUMNS = [
    f"{prefix}{name}"
    for prefix in ("", "byte_")
    for name in (
        "limit_per_partition_avg",
        "limit_per_partition_min",
        "limit_per_partition_max",
        "limit_topic_avg",
        "limit_topic_min",
        "limit_topic_max",
        "limited_share",
    )
]
ALLOWED = ("allowed_msgs", "allowed_bytes")


def upgrade() -> None:
    with op.batch_alter_table("rate_report") as batch:
        batch.alter_column("limit_msg_per_s", new_column_name="limit_topic_at_end")
        batch.alter_column("limit_byte_per_s", new_column_name="byte_limit_topic_at_end")
        batch.add_column(sa.Column("partitions", sa.Integer(), nullable=True))
        for name in (*LIMIT_COLUMNS, *ALLOWED):
            batch.add_column(sa.Column(name, sa.Float(), nullable=True))
    with op.batch_alter_table("backlog_report") as batch:
        batch.alter_column("limit_msg_per_s", new_column_name="limit_topic_at_end")


def downgrade() -> None:
    with op.batch_alter_table("backlog_report") as batch:
        batch.alter_column("limit_topic_at_end", new_column_name="limit_msg_per_s")
    with op.batch_alter_table("rate_report") as batch:
        for name in (*ALLOWED, *reversed(LIMIT_COLUMNS)):
            batch.drop_column(name)
        batch.drop_column("partitions")
        batch.alter_column("byte_limit_topic_at_end", new_column_name="limit_byte_per_s")
        batch.alter_column("limit_topic_at_end", new_column_name="limit_msg_per_s")
