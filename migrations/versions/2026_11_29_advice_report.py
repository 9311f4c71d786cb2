"""advice report: what the limit advisor measured per subscription over a run's span

Revision ID: 0009_advice_report
Revises: 0008_resource_groups
Create Date: 2026-11-28 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa

from migrations.shapes import create_report_table, drop_report_table, timestamp

revision = "0009_advice_report"
down_revision = "0008_resource_groups"
branch_labels = None
depends_on = None

_FLOATS = (
    "span_seconds",
    "publish_rate_avg",
    "publish_rate_p95",
    "dispatch_rate_avg",
    "dispatch_rate_peak",
)


def upgrade() -> None:
    create_report_table(
        "advice_report",
        timestamp("span_end"),
        sa.Column("intervals", sa.Integer(), nullable=False),
        *(sa.Column(name, sa.Float(), nullable=False) for name in _FLOATS[:1]),
        sa.Column("partitions", sa.Integer(), nullable=False),
        *(sa.Column(name, sa.Float(), nullable=False) for name in _FLOATS[1:]),
        sa.Column("limit_topic_at_end", sa.Float(), nullable=True),
        sa.Column("limit_per_partition_at_end", sa.Float(), nullable=True),
        sa.Column("limit_limiter", sa.String(length=16), nullable=True),
        sa.Column("limit_source", sa.String(length=16), nullable=True),
        sa.Column("limited_share", sa.Float(), nullable=False),
        sa.Column("throttled_share", sa.Float(), nullable=False),
        sa.Column("throttled_seconds", sa.Float(), nullable=False),
        sa.Column("peak_utilisation", sa.Float(), nullable=True),
        sa.Column("backlog_msgs", sa.BigInteger(), nullable=False),
        sa.Column("backlog_bytes", sa.BigInteger(), nullable=False),
        sa.Column("backlog_avg", sa.Float(), nullable=False),
        sa.Column("max_backlog_msgs", sa.BigInteger(), nullable=False),
        sa.Column("growth_per_s", sa.Float(), nullable=False),
        sa.Column("capacity", sa.Float(), nullable=True),
        sa.Column("capacity_intervals", sa.Integer(), nullable=False),
        sa.Column("ack_rate_peak", sa.Float(), nullable=True),
        sa.Column("consumers", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    drop_report_table("advice_report")
