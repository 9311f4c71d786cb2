"""Declarative base and column types shared by every table.

Types are chosen to work on PostgreSQL (production) and SQLite (standalone): ``BigId`` is
BIGINT on PostgreSQL and INTEGER (so it auto-increments) on SQLite; ``Json`` is JSONB on
PostgreSQL.  Timestamps are timezone-aware UTC and set by Python, not by the database.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import JSON, BigInteger, DateTime, Integer, MetaData, TypeDecorator
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase

BigId = BigInteger().with_variant(Integer(), "sqlite")
Json = JSON().with_variant(JSONB(), "postgresql")


class Timestamp(TypeDecorator[datetime]):
    """Timezone-aware UTC on every database (SQLite keeps naive UTC text underneath)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def epoch_ms(moment: datetime) -> int:
    """Milliseconds since the epoch of an aware time (the unit of Redis-side timestamps)."""
    return int(moment.timestamp() * 1000)


class Base(DeclarativeBase):
    """Base class of every ORM table."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
