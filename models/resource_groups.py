"""Resource groups (Pulsar's PIP-82): the stored groups, their attachments, and which group
applies to a topic.

A ``ResourceGroup`` row holds Pulsar's ``ResourceGroup`` body (publish and dispatch rates in
messages and bytes per second, and the replication rates Sluice stores but does not enforce;
<= 0 or -1 = unlimited).  A ``ResourceGroupAttachment`` ties a tenant, a namespace or a topic
to a group, with the member's ``weight`` in the group's fair split (a Sluice extension,
default 1).  ``resolve_group`` is the one pure function that says which group applies to a
topic (topic > namespace > tenant), for the admin service and the workers alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Integer, String, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base, BigId, Timestamp, utcnow
from models.errors import InvalidInput, PreconditionFailed
from models.tenancy import Namespace, Tenant, Topic
from sluice.protocol.names import TopicName

UNLIMITED = -1
DEFAULT_WEIGHT = 1
MAX_WEIGHT = 1000
# Pulsar's JSON fields, in its order, and the column each is stored in.
FIELDS: dict[str, str] = {
    "publishRateInMsgs": "publish_msgs",
    "publishRateInBytes": "publish_bytes",
    "dispatchRateInMsgs": "dispatch_msgs",
    "dispatchRateInBytes": "dispatch_bytes",
    "replicationDispatchRateInMsgs": "replication_msgs",
    "replicationDispatchRateInBytes": "replication_bytes",
}
LEVELS = ("tenant", "namespace", "topic")


class ResourceGroup(Base):
    """One resource group: Pulsar's ``ResourceGroup`` rates (-1 = unlimited)."""

    __tablename__ = "resource_groups"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    publish_msgs: Mapped[int] = mapped_column(BigInteger, default=UNLIMITED)
    publish_bytes: Mapped[int] = mapped_column(BigInteger, default=UNLIMITED)
    dispatch_msgs: Mapped[int] = mapped_column(BigInteger, default=UNLIMITED)
    dispatch_bytes: Mapped[int] = mapped_column(BigInteger, default=UNLIMITED)
    replication_msgs: Mapped[int] = mapped_column(BigInteger, default=UNLIMITED)
    replication_bytes: Mapped[int] = mapped_column(BigInteger, default=UNLIMITED)
    updated_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, onupdate=utcnow)

    def to_json(self) -> dict[str, int]:
        """Pulsar's ``ResourceGroup`` body, every field present."""
        return {name: int(getattr(self, column)) for name, column in FIELDS.items()}

    def rates(self) -> GroupRates:
        """The enforced rates as a value object."""
        return GroupRates(
            self.publish_msgs, self.publish_bytes, self.dispatch_msgs, self.dispatch_bytes, self.id
        )


class ResourceGroupAttachment(Base):
    """A tenant, a namespace (``namespace_id``) or a topic (``topic_id`` too) attached to a
    group.  ``scope_key`` makes one attachment per target; the rows go with their target
    (cascade), and a group is not deleted while rows name it (the service answers 409)."""

    __tablename__ = "resource_group_attachments"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    scope_key: Mapped[str] = mapped_column(String(64), unique=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("resource_groups.id"), index=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    namespace_id: Mapped[int | None] = mapped_column(
        ForeignKey("namespaces.id", ondelete="CASCADE"), index=True
    )
    topic_id: Mapped[int | None] = mapped_column(
        ForeignKey("topics.id", ondelete="CASCADE"), index=True
    )
    weight: Mapped[int] = mapped_column(Integer, default=DEFAULT_WEIGHT)
    updated_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, onupdate=utcnow)

    @staticmethod
    def key(tenant_id: int, namespace_id: int | None, topic_id: int | None) -> str:
        """The unique scope key of a target."""
        if topic_id is not None:
            return f"topic/{topic_id}"
        if namespace_id is not None:
            return f"namespace/{namespace_id}"
        return f"tenant/{tenant_id}"


# --- the domain -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupRates:
    """What a group enforces, per second; <= 0 = unlimited."""

    publish_msgs: int = UNLIMITED
    publish_bytes: int = UNLIMITED
    dispatch_msgs: int = UNLIMITED
    dispatch_bytes: int = UNLIMITED
    id: int = 0  # the group's row id (names its publish window in Redis)

    @property
    def dispatch_limited(self) -> bool:
        """True when the group limits dispatch in a dimension."""
        return self.dispatch_msgs > 0 or self.dispatch_bytes > 0

    @property
    def publish_limited(self) -> bool:
        """True when the group limits publishing in a dimension."""
        return self.publish_msgs > 0 or self.publish_bytes > 0


def parse_group_body(body: Any) -> dict[str, int]:
    """The fields a ``PUT`` body sets (only those sent; null = not sent), checked: an object
    of integers.  400 otherwise, naming the field (a body that does not decode)."""
    if not isinstance(body, dict):
        raise InvalidInput("ResourceGroup body must be a JSON object")
    values: dict[str, int] = {}
    for name, value in body.items():
        if name not in FIELDS:
            raise InvalidInput(f"Unknown ResourceGroup field {name}")
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput(f"{name} must be an integer")
        if not -(2**63) <= value < 2**63:
            raise InvalidInput(f"{name} is out of range")
        values[name] = value
    return values


def check_weight(weight: int | None) -> int:
    """A member's weight: 1..1000 (default 1); 412 otherwise."""
    if weight is None:
        return DEFAULT_WEIGHT
    if not 1 <= weight <= MAX_WEIGHT:
        raise PreconditionFailed(f"weight must be between 1 and {MAX_WEIGHT}")
    return weight


@dataclass(frozen=True, slots=True)
class Attachment:
    """One attachment: the group's name and the member's weight."""

    group: str
    weight: int = DEFAULT_WEIGHT


@dataclass(frozen=True, slots=True)
class GroupBinding:
    """The group that applies to a topic: which one, the member that brought it (its level
    and name: ``tenant:acme``, ``namespace:acme/orders``, ``topic:persistent://...``), the
    member's weight and the group's rates."""

    group: str
    level: str
    member: str
    weight: int
    rates: GroupRates

    @property
    def member_id(self) -> str:
        """The member as the group's limiter knows it."""
        return f"{self.level}:{self.member}"


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """Every group's rates and every attachment, keyed by tenant, ``tenant/ns`` and base
    topic full name.  Pure data."""

    groups: Mapping[str, GroupRates] = field(default_factory=dict)
    tenants: Mapping[str, Attachment] = field(default_factory=dict)
    namespaces: Mapping[str, Attachment] = field(default_factory=dict)
    topics: Mapping[str, Attachment] = field(default_factory=dict)

    def binding_for(self, topic: TopicName) -> GroupBinding | None:
        """The group that applies to a topic or any of its partitions."""
        base = topic.base
        return resolve_group(
            self.groups,
            self.tenants.get(base.tenant),
            self.namespaces.get(base.namespace_name),
            self.topics.get(base.full),
            base,
        )


def resolve_group(
    groups: Mapping[str, GroupRates],
    tenant: Attachment | None,
    namespace: Attachment | None,
    topic: Attachment | None,
    name: TopicName,
) -> GroupBinding | None:
    """Topic > namespace > tenant: the most specific attachment wins (an attachment naming a
    group that no longer exists is skipped)."""
    candidates = (
        ("topic", name.base.full, topic),
        ("namespace", name.base.namespace_name, namespace),
        ("tenant", name.base.tenant, tenant),
    )
    for level, member, attachment in candidates:
        if attachment is not None and attachment.group in groups:
            return GroupBinding(
                attachment.group, level, member, attachment.weight, groups[attachment.group]
            )
    return None


async def load_group_snapshot(session: AsyncSession) -> GroupSnapshot:
    """Every group and attachment, read in two queries (the tables are small: one row per
    group, one per attached target)."""
    rows = (await session.execute(select(ResourceGroup))).scalars().all()
    by_id = {row.id: row.name for row in rows}
    groups = {row.name: row.rates() for row in rows}
    query = (
        select(
            ResourceGroupAttachment.group_id,
            ResourceGroupAttachment.weight,
            Tenant.name,
            Namespace.name,
            Topic.name,
        )
        .join(Tenant, ResourceGroupAttachment.tenant_id == Tenant.id)
        .outerjoin(Namespace, ResourceGroupAttachment.namespace_id == Namespace.id)
        .outerjoin(Topic, ResourceGroupAttachment.topic_id == Topic.id)
    )
    tenants: dict[str, Attachment] = {}
    namespaces: dict[str, Attachment] = {}
    topics: dict[str, Attachment] = {}
    for group_id, weight, tenant, namespace, topic in await session.execute(query):
        attachment = Attachment(by_id[group_id], weight)
        if topic is not None:
            topics[TopicName(tenant, namespace, topic).full] = attachment
        elif namespace is not None:
            namespaces[f"{tenant}/{namespace}"] = attachment
        else:
            tenants[tenant] = attachment
    return GroupSnapshot(groups, tenants, namespaces, topics)


GROUP_LIMITER = "resourceGroup"


def with_group(
    rate: float | None, limiter: str | None, group_rate: int
) -> tuple[float | None, str | None]:
    """One dimension's binding rate and limiter once the group's rate joins them: the lowest
    wins (a group rate <= 0 does not limit).  The group's rate is for the whole group, so it
    binds a partition whenever it is below what the partition's own limiters allow."""
    if group_rate <= 0 or (rate is not None and rate <= group_rate):
        return rate, limiter
    return float(group_rate), GROUP_LIMITER
