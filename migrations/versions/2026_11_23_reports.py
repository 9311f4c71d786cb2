"""reports

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 07:30:09.967338
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "backlog_report",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
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
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("window", sa.String(length=8), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tenant", sa.String(length=255), nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.Column("topic", sa.String(length=700), nullable=False),
        sa.Column("subscription", sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_backlog_report")),
    )
    op.create_index(
        "ix_backlog_report_lookup",
        "backlog_report",
        ["tenant", "namespace", "window", "window_start"],
        unique=False,
    )
    op.create_index("ix_backlog_report_run", "backlog_report", ["run_id"], unique=False)
    op.create_table(
        "rate_report",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("intervals", sa.Integer(), nullable=False),
        sa.Column("msg_out", sa.BigInteger(), nullable=False),
        sa.Column("bytes_out", sa.BigInteger(), nullable=False),
        sa.Column("avg_rate", sa.Float(), nullable=False),
        sa.Column("peak_rate", sa.Float(), nullable=False),
        sa.Column("p50_rate", sa.Float(), nullable=False),
        sa.Column("p95_rate", sa.Float(), nullable=False),
        sa.Column("avg_byte_rate", sa.Float(), nullable=False),
        sa.Column("limit_msg_per_s", sa.Float(), nullable=True),
        sa.Column("limit_byte_per_s", sa.Float(), nullable=True),
        sa.Column("limit_limiter", sa.String(length=16), nullable=True),
        sa.Column("limit_source", sa.String(length=16), nullable=True),
        sa.Column("utilisation", sa.Float(), nullable=True),
        sa.Column("throttled_share", sa.Float(), nullable=False),
        sa.Column("throttled_broker_share", sa.Float(), nullable=False),
        sa.Column("throttled_topic_share", sa.Float(), nullable=False),
        sa.Column("throttled_subscription_share", sa.Float(), nullable=False),
        sa.Column("throttled_by", sa.String(length=16), nullable=True),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("window", sa.String(length=8), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tenant", sa.String(length=255), nullable=False),
        sa.Column("namespace", sa.String(length=255), nullable=False),
        sa.Column("topic", sa.String(length=700), nullable=False),
        sa.Column("subscription", sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rate_report")),
    )
    op.create_index(
        "ix_rate_report_lookup",
        "rate_report",
        ["tenant", "namespace", "window", "window_start"],
        unique=False,
    )
    op.create_index("ix_rate_report_run", "rate_report", ["run_id"], unique=False)
    op.create_table(
        "report_runs",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("job", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("window_from", sa.DateTime(timezone=True), nullable=True),
        sa.Column("window_to", sa.DateTime(timezone=True), nullable=True),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column(
            "params",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_report_runs")),
    )
    op.create_index(
        "ix_report_runs_job_started", "report_runs", ["job", "started_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_report_runs_job_started", table_name="report_runs")
    op.drop_table("report_runs")
    op.drop_index("ix_rate_report_run", table_name="rate_report")
    op.drop_index("ix_rate_report_lookup", table_name="rate_report")
    op.drop_table("rate_report")
    op.drop_index("ix_backlog_report_run", table_name="backlog_report")
    op.drop_index("ix_backlog_report_lookup", table_name="backlog_report")
    op.drop_table("backlog_report")
