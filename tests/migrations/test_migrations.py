"""Migrations upgrade and downgrade cleanly on PostgreSQL and SQLite, and match the models."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from migrations import downgrade, upgrade
from models.db import make_sync_engine
from models.orm import Base
from tests.conftest import create_database, drop_database

TABLES = {
    "audit_log",
    "broker_config",
    "clusters",
    "dispatch_rate_policies",
    "flow_policies",
    "namespaces",
    "outbox_events",
    "permission_grants",
    "subscriptions",
    "tenants",
    "topics",
}


@pytest.fixture(params=["postgresql", "sqlite"])
def empty_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'sluice.db'}"
        return
    url = create_database("sluice_migr")
    yield url
    drop_database(url)


def tables(url: str) -> set[str]:
    engine = make_sync_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade(empty_url):
    upgrade(empty_url)
    assert tables(empty_url) >= TABLES
    downgrade(empty_url, "base")
    assert tables(empty_url) == set()
    upgrade(empty_url)
    assert tables(empty_url) >= TABLES


def test_models_match_migrations(empty_url):
    upgrade(empty_url)
    engine = make_sync_engine(empty_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()
