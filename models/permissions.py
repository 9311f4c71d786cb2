"""Produce and consume grants (Pulsar's permissions), and the one rule that reads them.

A role is granted a set of actions on a namespace (every topic of it) or on one topic (the
topic and all its partitions ``...-partition-N``); the grants live in the
``permission_grants`` table (``models.policies.PermissionGrant``).  As in Pulsar, what a role
may do on a topic is the union of its namespace grant and its topic grant.

* ``Action``: ``produce`` or ``consume`` (Pulsar's ``AuthAction`` also has ``functions``,
  ``sources``, ``sinks`` and ``packages``; Sluice has none of those, ``parse_actions`` refuses
  them).
* ``Grant``: where one role's actions apply: ``topic`` is None for a namespace grant, else the
  base topic's full name ``persistent://tenant/ns/topic``.
* ``allowed(grants, topic_full_name, action)``: pure; True when one of ``grants`` (a single
  role's) covers the action on the topic or partition.
* ``grants_for_role(session, role)`` and ``all_grants(session)``: coroutines reading the
  table through an SQLAlchemy ``AsyncSession`` (the admin API's session type,
  ``models.db.make_session_factory``); they read, never write, and leave the transaction to
  the caller.  Grants come sorted by tenant, namespace, then topic (namespace grant first).

Subscription permissions (Pulsar's ``permissions/subscription``) narrow ``consume`` further:
a namespace may list the roles that may use a subscription name
(``models.policies.SubscriptionPermission``); ``subscription_allowed`` is the rule,
``parse_roles`` reads a list of roles, ``subscription_roles`` reads the stored list.

Super-users need no grant; a tenant's admin roles manage the grants (``api.auth``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from models.errors import InvalidInput, PreconditionFailed, SluiceError
from models.json_body import shown
from models.policies import PermissionGrant, SubscriptionPermission
from models.tenancy import Namespace, Tenant, Topic
from sluice.protocol.names import MAX_NAME_LENGTH, TopicName, has_control_character

MAX_ROLE_LENGTH = MAX_NAME_LENGTH
# Pulsar's AuthAction values that Sluice does not grant: it runs no functions, connectors or
# package store.
UNSUPPORTED_ACTIONS = frozenset({"functions", "sources", "sinks", "packages"})


class Action(StrEnum):
    """What a grant allows on a topic."""

    PRODUCE = "produce"
    CONSUME = "consume"


@dataclass(frozen=True, slots=True)
class Grant:
    """One role's actions on a namespace (``topic`` None) or on one base topic."""

    tenant: str
    namespace: str
    topic: str | None
    actions: frozenset[Action]


def allowed(grants: Iterable[Grant], topic_full_name: str, action: Action | str) -> bool:
    """True when one of ``grants`` (all of one role) allows ``action`` on the topic.

    A namespace grant covers every topic of its namespace; a topic grant covers the topic and
    its partitions.  A malformed topic name or an unknown action is never allowed.
    """
    try:
        topic = TopicName.from_full(topic_full_name)
        wanted = Action(action)
    except (SluiceError, ValueError):
        return False
    return any(
        wanted in grant.actions and covers(grant.tenant, grant.namespace, grant.topic, topic)
        for grant in grants
    )


def covers(tenant: str, namespace: str, base_topic: str | None, topic: TopicName) -> bool:
    """Whether a grant on ``tenant``/``namespace`` (``"*"``: any, which no name can be) and
    ``base_topic`` (a base topic's full name, or None for the whole namespace) covers
    ``topic`` or, for a partition, its partitioned topic: the one rule every check uses."""
    base = topic.base
    return (
        tenant in ("*", base.tenant)
        and namespace in ("*", base.namespace)
        and base_topic in (None, base.full)
    )


def check_role(role: str) -> str:
    """Return ``role`` or raise 412 when it cannot name a role.

    Roles are free text (a token's subject), but not empty or blank, without surrounding
    spaces, not dots only, without control characters, and at most ``MAX_ROLE_LENGTH``
    characters.
    """
    if (
        not role.strip()
        or role != role.strip()
        or len(role) > MAX_ROLE_LENGTH
        or role.strip(".") == ""
        or has_control_character(role)
    ):
        raise PreconditionFailed(
            f"Role name is not valid: 1 to {MAX_ROLE_LENGTH} characters, no control"
            " characters, no surrounding spaces, not only dots"
        )
    return role


def parse_actions(body: Any) -> list[str]:
    """The actions of a grant's body (a JSON list such as ``["produce", "consume"]``), sorted
    and without duplicates; 400 naming what is wrong otherwise.  An empty list is taken, as
    Pulsar takes it: the role is listed with no action."""
    if body is None:
        raise InvalidInput('Request body is required: a JSON list of actions, e.g. ["produce"]')
    if not isinstance(body, list):
        raise InvalidInput(
            f"The body must be a JSON list of actions (produce, consume), not {shown(body)}"
        )
    actions: set[Action] = set()
    for item in body:
        if not isinstance(item, str):
            raise InvalidInput(f"An action is a string (produce or consume), not {shown(item)}")
        if item in UNSUPPORTED_ACTIONS:
            raise InvalidInput(
                f"Action {item} is not supported: Sluice grants produce and consume only"
            )
        try:
            actions.add(Action(item))
        except ValueError:
            raise InvalidInput(
                f"Unknown action {shown(item)}: Sluice grants produce and consume"
            ) from None
    return sorted(action.value for action in actions)


def _actions(stored: Iterable[str]) -> frozenset[Action]:
    known = {action.value for action in Action}
    return frozenset(Action(a) for a in stored if a in known)


# Every grant with the names of its tenant, namespace and topic (None for a namespace grant).
_GRANTS = (
    select(
        PermissionGrant.role,
        PermissionGrant.actions,
        Tenant.name,
        Namespace.name,
        Topic.name,
    )
    .join(Namespace, PermissionGrant.namespace_id == Namespace.id)
    .join(Tenant, Namespace.tenant_id == Tenant.id)
    .outerjoin(Topic, PermissionGrant.topic_id == Topic.id)
    .order_by(Tenant.name, Namespace.name, Topic.name.nulls_first(), PermissionGrant.role)
)


def _grant(tenant: str, namespace: str, topic: str | None, actions: Iterable[str]) -> Grant:
    full = TopicName(tenant, namespace, topic).full if topic is not None else None
    return Grant(tenant, namespace, full, _actions(actions))


async def grants_for_role(session: AsyncSession, role: str) -> list[Grant]:
    """Every grant of ``role``, namespace and topic level."""
    rows = await session.execute(_GRANTS.where(PermissionGrant.role == role))
    return [_grant(t, ns, topic, actions) for _role, actions, t, ns, topic in rows]


async def all_grants(session: AsyncSession) -> dict[str, list[Grant]]:
    """Every grant, by role."""
    grants: dict[str, list[Grant]] = {}
    for role, actions, tenant, namespace, topic in await session.execute(_GRANTS):
        grants.setdefault(role, []).append(_grant(tenant, namespace, topic, actions))
    return grants


def subscription_allowed(roles: Iterable[str] | None, role: str) -> bool:
    """Whether ``role`` may use a subscription whose role list is ``roles`` (None: no list):
    a subscription without a list, or with an empty one, is open to every role that may
    consume (Pulsar's ``canConsumeAsync``)."""
    listed = set(roles or ())
    return not listed or role in listed


def not_authorized_to_subscribe(role: str, subscription: str, topic: str) -> str:
    """The refusal of a subscribe the subscription's role list does not allow."""
    return (
        f"Client is not authorized to subscribe: {role} is not authorized to access"
        f" subscription {subscription} on topic {topic}"
    )


def parse_roles(body: Any) -> list[str]:
    """The roles of a subscription permission's body (a JSON list such as ``["a", "b"]``),
    sorted and without duplicates; 400 when it is not a list of strings, 412 for a string
    that cannot name a role.  An empty list is taken (it restricts nothing, as in Pulsar)."""
    if body is None:
        raise InvalidInput('Request body is required: a JSON list of roles, e.g. ["billing"]')
    if not isinstance(body, list):
        raise InvalidInput(f"The body must be a JSON list of roles, not {shown(body)}")
    for item in body:
        if not isinstance(item, str):
            raise InvalidInput(f"A role is a string, not {shown(item)}")
    return sorted({check_role(item) for item in body})


async def subscription_roles(
    session: AsyncSession, tenant: str, namespace: str, subscription: str
) -> list[str] | None:
    """The role list of ``subscription`` in ``tenant``/``namespace``, None when it has none."""
    return await session.scalar(
        select(SubscriptionPermission.roles)
        .join(Namespace, SubscriptionPermission.namespace_id == Namespace.id)
        .join(Tenant, Namespace.tenant_id == Tenant.id)
        .where(
            Tenant.name == tenant,
            Namespace.name == namespace,
            SubscriptionPermission.subscription == subscription,
        )
    )


__all__ = [
    "MAX_ROLE_LENGTH",
    "UNSUPPORTED_ACTIONS",
    "Action",
    "Grant",
    "all_grants",
    "allowed",
    "check_role",
    "covers",
    "grants_for_role",
    "not_authorized_to_subscribe",
    "parse_actions",
    "parse_roles",
    "subscription_allowed",
    "subscription_roles",
]
