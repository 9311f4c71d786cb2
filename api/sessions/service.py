"""What a role may do on the data plane, and the topic lookups of session clients.

``role_grants`` is the grant source of ``dataplane.sessions.Sessions``: a super-user (or any
role while authorization is off) may produce and consume everywhere, a tenant's admin role on
every namespace of the tenant, any other role where ``models.permissions`` grants it.
``partitions`` answers a client's lookup of a topic it may produce to or consume from,
creating it on first use as a client without ACLs does itself (``allowAutoTopicCreation``,
``maxTopicsPerNamespace``): a session user may read the topic registry but not write it.
``check_subscribe`` is the subscribe-time check of a subscription's role list (Pulsar's
``permissions/subscription``), for a client's subscribe and a WebSocket consumer alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import cast
from urllib.parse import urlsplit, urlunsplit

import orjson
from redis.asyncio import Redis
from redis.exceptions import ResponseError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from api.auth import AccessControl
from dataplane.acl import ALL_TOPICS, Scope
from dataplane.scripts import Scripts
from dataplane.sessions import Grants
from models.errors import Forbidden, NotFound, PreconditionFailed
from models.orm import Tenant
from models.permissions import (
    all_grants,
    covers,
    grants_for_role,
    not_authorized_to_subscribe,
    subscription_allowed,
    subscription_roles,
)
from sluice.protocol import keys
from sluice.protocol.abuse import NOT_ALLOWED, auto_create_call
from sluice.protocol.names import TopicName

BOTH = frozenset({"produce", "consume"})


def client_url(redis_url: str, advertised: str = "") -> str:
    """The Redis URL clients are told: ``advertised``, else ``redis_url`` without credentials."""
    if advertised:
        return advertised
    parts = urlsplit(redis_url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host))


async def role_grants(
    sessions: async_sessionmaker[AsyncSession], control: AccessControl, roles: Iterable[str]
) -> Mapping[str, Grants]:
    """Each role's scopes and actions on the data plane, read now."""
    roles = set(roles)
    out: dict[str, Grants] = {}
    for role in roles:
        if not control.authorization or role in control.super_users:
            out[role] = [(ALL_TOPICS, BOTH)]
    rest = roles - set(out)
    if not rest:
        return out
    async with sessions() as session:
        tenants = (await session.execute(select(Tenant.name, Tenant.admin_roles))).all()
        if len(rest) == 1:
            (role,) = rest
            by_role = {role: await grants_for_role(session, role)}
        else:  # the once-a-second reconciliation: one query for every role
            by_role = await all_grants(session)
    for role in rest:
        grants: Grants = [
            (Scope(name, "*"), BOTH) for name, admins in tenants if admins and role in admins
        ]
        for grant in by_role.get(role, []):
            local = TopicName.from_full(grant.topic).local if grant.topic else None
            actions = frozenset(action.value for action in grant.actions)
            grants.append((Scope(grant.tenant, grant.namespace, local), actions))
        out[role] = grants
    return out


def may_use(grants: Grants, topic: TopicName, action: str | None = None) -> bool:
    """Whether ``grants`` allow ``action`` (None: producing or consuming) on ``topic`` or its
    partitions."""
    return any(
        actions
        and (action is None or action in actions)
        and covers(scope.tenant, scope.namespace, scope.base_topic, topic)
        for scope, actions in grants
    )


def unrestricted(grants: Grants, topic: TopicName) -> bool:
    """Whether ``grants`` cover ``topic`` as a super-user's or a tenant admin's do (a scope of
    every namespace): subscription role lists do not apply to those roles."""
    return any(
        scope.namespace == "*" and covers(scope.tenant, scope.namespace, None, topic)
        for scope, _actions in grants
    )


async def check_subscribe(
    session: AsyncSession, grants: Grants, topic: TopicName, role: str, subscription: str
) -> None:
    """``Forbidden`` unless ``role`` (with ``grants``) may consume from ``topic`` with the
    subscription name ``subscription``: a consume grant, and the role in the subscription's
    role list when the namespace gives it a non-empty one."""
    if not may_use(grants, topic, "consume"):
        raise Forbidden(f"Role {role} may not consume from {topic.full}")
    if unrestricted(grants, topic):
        return
    base = topic.base
    roles = await subscription_roles(session, base.tenant, base.namespace, subscription)
    if not subscription_allowed(roles, role):
        raise Forbidden(not_authorized_to_subscribe(role, subscription, base.full))


async def partitions(
    redis: Redis, scripts: Scripts, topic: TopicName, grants: Grants, role: str
) -> int:
    """The partition count of a topic the role may use, creating the topic when allowed."""
    if not may_use(grants, topic):
        raise Forbidden(f"Role {role} may not produce to or consume from {topic.full}")
    base = topic.base
    raw = await redis.hget(keys.TOPICS, base.full)
    if raw is None:
        namespaces = cast(set[bytes], await redis.smembers(keys.NAMESPACES))
        config = cast(dict[bytes, bytes], await redis.hgetall(keys.CLIENT_CONFIG))
        script_keys, args = auto_create_call(base, namespaces, config)
        try:
            raw = await scripts["topic_create"](keys=script_keys, args=args)
        except ResponseError as exc:
            kind, _, reason = str(exc).partition(" ")
            if kind == NOT_ALLOWED:  # maxTopicsPerNamespace
                raise PreconditionFailed(reason) from None
            raise
    count = int(orjson.loads(raw)["partitions"])
    if topic.partition_index >= 0:
        if topic.partition_index >= count:
            raise NotFound(f"Topic {topic.full} does not exist")
        return 0
    return count
