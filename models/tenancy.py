"""Tables of the tenancy hierarchy: clusters, tenants, namespaces, topics, subscriptions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from models.base import Base, BigId, Json, Timestamp, utcnow


def _owned(parent: str) -> Any:
    """The rows a parent owns (``parent``: their side of the relationship): deleted with it
    by the database's cascade, never loaded lazily."""
    return relationship(
        back_populates=parent, lazy="raise", cascade="all, delete-orphan", passive_deletes=True
    )


class Cluster(Base):
    """The local cluster (Sluice runs one, named by settings, default ``standalone``)."""

    __tablename__ = "clusters"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    service_url: Mapped[str] = mapped_column(String(1024), default="")
    broker_service_url: Mapped[str] = mapped_column(String(1024), default="")
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class Tenant(Base):
    """A tenant with its admin roles and the clusters it may use."""

    __tablename__ = "tenants"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    admin_roles: Mapped[list[str]] = mapped_column(Json, default=list)
    allowed_clusters: Mapped[list[str]] = mapped_column(Json, default=list)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)

    namespaces: Mapped[list[Namespace]] = _owned("tenant")


class Namespace(Base):
    """A namespace; ``policies`` keeps Pulsar policy fields Sluice stores but does not model."""

    __tablename__ = "namespaces"
    __table_args__ = (UniqueConstraint("tenant_id", "name"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(255))
    policies: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)

    tenant: Mapped[Tenant] = relationship(back_populates="namespaces", lazy="raise")
    topics: Mapped[list[Topic]] = _owned("namespace")


class Topic(Base):
    """A persistent topic; ``partitions`` = 0 means non-partitioned."""

    __tablename__ = "topics"
    __table_args__ = (UniqueConstraint("namespace_id", "name"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    namespace_id: Mapped[int] = mapped_column(ForeignKey("namespaces.id", ondelete="CASCADE"))
    # Indexed alone too: change events name topics by full name, across namespaces.
    name: Mapped[str] = mapped_column(String(255), index=True)
    partitions: Mapped[int] = mapped_column(Integer, default=0)
    properties: Mapped[dict[str, str]] = mapped_column(Json, default=dict)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)

    namespace: Mapped[Namespace] = relationship(back_populates="topics", lazy="raise")
    subscriptions: Mapped[list[Subscription]] = _owned("topic")


class Subscription(Base):
    """A subscription on a topic (on every partition of a partitioned topic)."""

    __tablename__ = "subscriptions"
    __table_args__ = (UniqueConstraint("topic_id", "name"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    topic_id: Mapped[int] = mapped_column(ForeignKey("topics.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)

    topic: Mapped[Topic] = relationship(back_populates="subscriptions", lazy="raise")
