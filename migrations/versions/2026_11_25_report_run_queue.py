"""report runs: recorded when queued, with the task that runs them

A run is now recorded when it is queued: ``queued_at`` (earlier runs: their start),
``task_id`` (the Celery task; null for earlier runs), and ``started_at`` stays null until an
attempt starts.

Revision ID: 0005_report_run_queue
Revises: 0004_report_limits
Create Date: 2026-11-25 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_report_run_queue"
down_revision = "0004_report_limits"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("report_runs") as batch:
        batch.add_column(sa.Column("task_id", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("queued_at", sa.DateTime(timezone=True), nullable=True))
        batch.alter_column("started_at", existing_type=sa.DateTime(timezone=True), nullable=True)
        batch.create_index("ix_report_runs_task_id", ["task_id"], unique=False)
    op.execute("UPDATE report_runs SET queued_at = started_at")
    with op.batch_alter_table("report_runs") as batch:
        batch.alter_column("queued_at", existing_type=sa.DateTime(timezone=True), nullable=False)


def downgrade() -> None:
    op.execute("UPDATE report_runs SET started_at = queued_at WHERE started_at IS NULL")
    with op.batch_alter_table("report_runs") as batch:
        batch.drop_index("ix_report_runs_task_id")
        batch.alter_column("started_at", existing_type=sa.DateTime(timezone=True), nullable=False)
        batch.drop_column("queued_at")
        batch.drop_column("task_id")
