"""reports

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 07:30:09.967338
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.shapes import (
    create_report_table,
    drop_report_table,
    id_column,
    json_column,
    primary_key,
    timestamp,
)

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_report_table(
        "backlog_report",
        sa.Column("intervals", sa.Integer(), nullable=False),
        sa.Column("backlog_msgs", sa.BigInteger(), nullable=False),
        sa.Column("backlog_bytes", sa.BigInteger(), nullable=False),
        sa.Column("max_backlog_msgs", sa.BigInteger(), nullable=False),
        sa.Column("growth_per_s", sa.Float(), nullable=False),
        sa.Column("publish_rate", sa.Float(), nullable=False),
        sa.Column("dispatch_rate", sa.Float(), nullable=False),
        sa.Column("limit_msg_per_s", sa.Float(), nullable=True),
        sa.Column("drain_rate", sa.Float(), nullable=True),
        sa.Column("drain_seconds", sa.Float(), nullable=True),
        sa.Column("drain_status", sa.String(length=8), nullable=False),
        sa.Column("growth_rank", sa.Integer(), nullable=False),
    )
    create_report_table(
        "rate_report",
        sa.Column("intervals", sa.Integer(), nullable=False),
        sa.Column("msg_out", sa.BigInteger(), nullable=False),
        sa.Column("bytes_out", sa.BigInteger(), nullable=False),
        *(
            sa.Column(name, sa.Float(), nullable=False)
            for name in ("avg_rate", "peak_rate", "p50_rate", "p95_rate", "avg_byte_rate")
        ),
        sa.Column("limit_msg_per_s", sa.Float(), nullable=True),
        sa.Column("limit_byte_per_s", sa.Float(), nullable=True),
        sa.Column("limit_limiter", sa.String(length=16), nullable=True),
        sa.Column("limit_source", sa.String(length=16), nullable=True),
        sa.Column("utilisation", sa.Float(), nullable=True),
        *(
            sa.Column(f"throttled{level}_share", sa.Float(), nullable=False)
            for level in ("", "_broker", "_topic", "_subscription")
        ),
        sa.Column("throttled_by", sa.String(length=16), nullable=True),
    )
    op.create_table(
        "report_runs",
        id_column(),
        sa.Column("job", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        timestamp("started_at"),
        timestamp("finished_at", nullable=True),
        timestamp("window_from", nullable=True),
        timestamp("window_to", nullable=True),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        json_column("params"),
        primary_key("report_runs"),
    )
    op.create_index(
        "ix_report_runs_job_started", "report_runs", ["job", "started_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_report_runs_job_started", table_name="report_runs")
    op.drop_table("report_runs")
    drop_report_table("rate_report")
    drop_report_table("backlog_report")
