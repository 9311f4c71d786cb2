"""topics: index on the topic name alone

Topics are looked up by full name (tenant, namespace, local name) for a batch of change
events: the workers when they apply catalog events, the admin service's policy cache when a
write names topics.  The unique (namespace_id, name) index cannot serve a lookup by name
across namespaces, so each such query read the whole table (about 10 ms at 50,000 topics).

Revision ID: 0007_topic_name_index
Revises: 0006_permission_grants
Create Date: 2026-11-27 09:00:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0007_topic_name_index"
down_revision = "0006_permission_grants"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(op.f("ix_topics_name"), "topics", ["name"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_topics_name"), table_name="topics")
