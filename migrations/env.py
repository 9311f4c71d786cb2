"""Alembic environment: runs migrations online against the configured database URL."""

from __future__ import annotations

from alembic import context

from models.db import is_sqlite, make_sync_engine
from models.orm import Base
from models.settings import Settings

config = context.config
url = config.attributes.get("database_url") or Settings().effective_database_url


def run_migrations_online() -> None:
    """Run every pending migration in one transaction per revision."""
    engine = make_sync_engine(url)
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            render_as_batch=is_sqlite(url),
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run_migrations_online()
