"""Tables of stored policies: dispatch rates, flow controls, permission grants and broker config
overrides."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base, BigId, Json, Timestamp, utcnow
from models.dispatch_rate import DispatchRate

# The two rate kinds Pulsar stores at namespace and topic level.
DISPATCH_RATE = "dispatchRate"
SUBSCRIPTION_DISPATCH_RATE = "subscriptionDispatchRate"


class ScopedPolicy:
    """Columns every namespace/topic policy table shares: where the value applies.

    A row belongs to a namespace, and to one topic of it when ``topic_id`` is set; both
    cascade on delete.  ``scope_key`` is unique per (target, kind); each table builds it.
    """

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    scope_key: Mapped[str] = mapped_column(String(700), unique=True)
    namespace_id: Mapped[int] = mapped_column(
        ForeignKey("namespaces.id", ondelete="CASCADE"), index=True
    )
    topic_id: Mapped[int | None] = mapped_column(
        ForeignKey("topics.id", ondelete="CASCADE"), index=True
    )
    updated_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, onupdate=utcnow)


class DispatchRatePolicy(ScopedPolicy, Base):
    """One stored ``DispatchRate``.

    Level is given by which ids are set: namespace only; namespace + topic; namespace + topic +
    subscription (PIP-152; ``kind`` is then always ``dispatchRate``).  ``scope_key`` makes the
    (level, target, kind) triple unique on every database, NULLs included.
    """

    __tablename__ = "dispatch_rate_policies"

    subscription: Mapped[str | None] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(32))
    msg: Mapped[int] = mapped_column(BigInteger)
    byte: Mapped[int] = mapped_column(BigInteger)
    relative: Mapped[bool] = mapped_column(Boolean)
    period: Mapped[int] = mapped_column(Integer)

    @staticmethod
    def key(namespace_id: int, topic_id: int | None, subscription: str | None, kind: str) -> str:
        """The unique scope key of a (target, kind) pair."""
        return f"{namespace_id}/{topic_id or ''}/{kind}/{subscription or ''}"

    def to_rate(self) -> DispatchRate:
        """The stored value as a domain object."""
        return DispatchRate(
            msg=self.msg, byte=self.byte, relative=self.relative, period=self.period
        )

    @classmethod
    def columns_for(cls, rate: DispatchRate) -> dict[str, Any]:
        """Column values that store ``rate``."""
        return {
            "msg": rate.msg,
            "byte": rate.byte,
            "relative": rate.relative,
            "period": rate.period,
        }

    def stored_json(self) -> dict[str, Any]:
        """The stored rate as Pulsar's JSON."""
        return self.to_rate().to_json()


class StoredValue:
    """A table whose ``value`` column holds the stored value as it is: a broker setting's
    rendered text, a flow policy's JSON (``models.flow.value_to_json``)."""

    value: Any

    @classmethod
    def columns_for(cls, value: Any) -> dict[str, Any]:
        """Column values that store ``value``."""
        return {"value": value}

    def stored_json(self) -> Any:
        """The stored value (text or JSON)."""
        return self.value


class BrokerConfigOverride(StoredValue, Base):
    """A dynamic broker setting changed at runtime; the value is stored as text."""

    __tablename__ = "broker_config"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, onupdate=utcnow)


class FlowPolicy(StoredValue, ScopedPolicy, Base):
    """One stored flow-control policy at namespace or topic level (``models.flow``).

    ``kind`` is ``backlogQuota.<type>``, ``maxUnackedMessagesPerSubscription``,
    ``maxUnackedMessagesPerConsumer`` or ``messageTTL``; ``value`` is its JSON (an object for
    quotas, an integer otherwise).  ``scope_key`` makes (level, target, kind) unique.
    """

    __tablename__ = "flow_policies"

    kind: Mapped[str] = mapped_column(String(64))
    value: Mapped[Any] = mapped_column(Json)

    @staticmethod
    def key(namespace_id: int, topic_id: int | None, kind: str) -> str:
        """The unique scope key of a (target, kind) pair."""
        return f"{namespace_id}/{topic_id or ''}/{kind}"


class PermissionGrant(ScopedPolicy, Base):
    """The actions one role is granted on a namespace, or on one topic of it (``topic_id``).

    A topic grant is stored under the base topic, so it covers every partition.  ``actions``
    is the sorted JSON list of the granted ``models.permissions.Action`` values (Pulsar's
    ``AuthAction``; Sluice grants ``produce`` and ``consume``); it may be empty, as in Pulsar.
    The grant goes with its namespace or topic (and so with its tenant): both cascade.
    ``scope_key`` makes (target, role) unique.
    """

    __tablename__ = "permission_grants"

    role: Mapped[str] = mapped_column(String(255), index=True)
    actions: Mapped[list[str]] = mapped_column(Json)

    @staticmethod
    def key(namespace_id: int, topic_id: int | None, role: str) -> str:
        """The unique scope key of a (target, role) pair."""
        return f"{namespace_id}/{topic_id or ''}/{role}"

    @classmethod
    def columns_for(cls, actions: list[str]) -> dict[str, Any]:
        """Column values that store ``actions`` (already sorted action names)."""
        return {"actions": list(actions)}

    def stored_json(self) -> dict[str, Any]:
        """The grant as the audit log shows it: the role and its actions."""
        return {"role": self.role, "actions": list(self.actions)}


class SubscriptionPermission(ScopedPolicy, Base):
    """The roles that may use one subscription name in a namespace (Pulsar's
    ``auth_policies.subscription_auth_roles``); ``topic_id`` is always None.

    ``roles`` is the sorted JSON list of role names; an empty list restricts nothing, as in
    Pulsar.  The row goes with its namespace (cascade).  ``scope_key`` makes (namespace,
    subscription) unique.
    """

    __tablename__ = "subscription_permissions"

    subscription: Mapped[str] = mapped_column(String(255))
    roles: Mapped[list[str]] = mapped_column(Json)

    @staticmethod
    def key(namespace_id: int, subscription: str) -> str:
        """The unique scope key of a (namespace, subscription) pair."""
        return f"{namespace_id}//{subscription}"

    @classmethod
    def columns_for(cls, roles: list[str]) -> dict[str, Any]:
        """Column values that store ``roles`` (already sorted role names)."""
        return {"roles": list(roles)}

    def stored_json(self) -> dict[str, Any]:
        """The role list as the audit log shows it."""
        return {"subscription": self.subscription, "roles": list(self.roles)}
