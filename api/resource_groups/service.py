"""Resource groups: create, update, read, delete, and attach tenants, namespaces and topics.

Pulsar's rules, where Pulsar's code and documentation agree; where they disagree Sluice
follows the documentation (docs/resource-groups.md says why): deleting a group that is in
use answers 409 naming who uses it (tenants, namespaces and topics, where Pulsar checks
namespaces only), deleting a missing group 404.  Attaching an unknown group answers 412 on a
namespace or tenant and 404 on a topic, as Pulsar does.  Every write records an audit entry
and a ``resourcegroup`` change event in the request's unit of work, which the workers follow.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from api.policy_store.target import namespace_target, topic_target
from api.unit_of_work import UnitOfWork
from models.errors import Conflict, NotFound, PreconditionFailed, SluiceError
from models.repository import get_tenant
from models.resource_groups import (
    FIELDS,
    ResourceGroup,
    ResourceGroupAttachment,
    check_weight,
    parse_group_body,
)
from models.tenancy import Namespace, Tenant, Topic
from sluice.protocol.names import TopicName, check_resource_group, check_tenant

RESOURCE_GROUP = "resourcegroup"  # the change events' kind and the audit entity type
MISSING = "ResourceGroup does not exist"


@dataclass(frozen=True, slots=True)
class Member:
    """A tenant, namespace or topic that may be attached to a group."""

    level: str  # tenant, namespace or topic
    name: str  # acme, acme/orders, persistent://acme/orders/created
    tenant_id: int
    namespace_id: int | None = None
    topic_id: int | None = None

    @property
    def scope_key(self) -> str:
        """The attachment's unique key."""
        return ResourceGroupAttachment.key(self.tenant_id, self.namespace_id, self.topic_id)


async def tenant_member(uow: UnitOfWork, tenant: str) -> Member:
    """A tenant; 412 on a bad name, 404 when it does not exist."""
    row = await get_tenant(uow.session, check_tenant(tenant))
    return Member("tenant", tenant, row.id)


async def namespace_member(uow: UnitOfWork, tenant: str, namespace: str) -> Member:
    """A namespace; 412 on a bad name, 404 when it does not exist."""
    target = await namespace_target(uow, tenant, namespace)
    row = target.namespace
    return Member("namespace", target.namespace_name, row.tenant_id, row.id)


async def topic_member(uow: UnitOfWork, topic: TopicName) -> Member:
    """A (base) topic; 404 when it does not exist."""
    target = await topic_target(uow, topic)
    assert target.topic is not None and target.topic_name is not None
    row = target.namespace
    return Member("topic", target.topic_name.full, row.tenant_id, row.id, target.topic.id)


# --- groups ---------------------------------------------------------------------------------


async def find_group(
    session: AsyncSession, name: str, *, lock: bool = False
) -> ResourceGroup | None:
    """The group row, or None."""
    query = select(ResourceGroup).where(ResourceGroup.name == name)
    if lock:
        query = query.with_for_update()
    return await session.scalar(query)


async def get_group(session: AsyncSession, name: str, *, lock: bool = False) -> ResourceGroup:
    """The group row, or 404 "ResourceGroup does not exist"."""
    row = await find_group(session, name, lock=lock)
    if row is None:
        raise NotFound(MISSING)
    return row


async def list_groups(session: AsyncSession) -> list[str]:
    """Every group's name, sorted."""
    return list(await session.scalars(select(ResourceGroup.name).order_by(ResourceGroup.name)))


async def read_group(session: AsyncSession, name: str) -> dict[str, int]:
    """Pulsar's ``ResourceGroup`` body; 404 when missing."""
    return (await get_group(session, name)).to_json()


async def put_group(uow: UnitOfWork, name: str, body: object) -> dict[str, int]:
    """Create the group (missing fields -1) or update only the fields sent; return it."""
    check_resource_group(name)
    values = parse_group_body(body)
    row = await find_group(uow.session, name, lock=True)
    before = None
    if row is None:
        row = ResourceGroup(name=name, **{column: -1 for column in FIELDS.values()})
        uow.session.add(row)
    else:
        before = row.to_json()
    for field, value in values.items():
        setattr(row, FIELDS[field], value)
    await uow.session.flush()
    after = row.to_json()
    if before != after:
        uow.record(RESOURCE_GROUP, RESOURCE_GROUP, name, before, after, group=name)
    return after


async def users_of(session: AsyncSession, group_id: int) -> list[str]:
    """Who is attached to a group, as ``tenant acme``, ``namespace acme/orders``, ``topic
    persistent://acme/orders/t``, sorted by level then name."""
    rows = await session.execute(
        select(Tenant.name, Namespace.name, Topic.name)
        .select_from(ResourceGroupAttachment)
        .join(Tenant, ResourceGroupAttachment.tenant_id == Tenant.id)
        .outerjoin(Namespace, ResourceGroupAttachment.namespace_id == Namespace.id)
        .outerjoin(Topic, ResourceGroupAttachment.topic_id == Topic.id)
        .where(ResourceGroupAttachment.group_id == group_id)
    )
    users = []
    for tenant, namespace, topic in rows:
        if topic is not None:
            users.append((2, f"topic {TopicName(tenant, namespace, topic).full}"))
        elif namespace is not None:
            users.append((1, f"namespace {tenant}/{namespace}"))
        else:
            users.append((0, f"tenant {tenant}"))
    return [text for _, text in sorted(users)]


async def delete_group(uow: UnitOfWork, name: str) -> None:
    """Delete a group: 404 when missing, 409 while a tenant, namespace or topic uses it."""
    row = await get_group(uow.session, name, lock=True)
    users = await users_of(uow.session, row.id)
    if users:
        shown = ", ".join(users[:10]) + (f" and {len(users) - 10} more" if len(users) > 10 else "")
        raise Conflict(f"ResourceGroup is in use by {shown}")
    before = row.to_json()
    await uow.session.delete(row)
    await uow.session.flush()
    uow.record(RESOURCE_GROUP, RESOURCE_GROUP, name, before, None, group=name)


async def attachments(session: AsyncSession, name: str) -> list[dict[str, object]]:
    """The members of a group: level, name and weight of each (a Sluice extension)."""
    row = await get_group(session, name)
    rows = await session.execute(
        select(ResourceGroupAttachment.weight, Tenant.name, Namespace.name, Topic.name)
        .join(Tenant, ResourceGroupAttachment.tenant_id == Tenant.id)
        .outerjoin(Namespace, ResourceGroupAttachment.namespace_id == Namespace.id)
        .outerjoin(Topic, ResourceGroupAttachment.topic_id == Topic.id)
        .where(ResourceGroupAttachment.group_id == row.id)
    )
    found = []
    for weight, tenant, namespace, topic in rows:
        if topic is not None:
            level, member = "topic", TopicName(tenant, namespace, topic).full
        elif namespace is not None:
            level, member = "namespace", f"{tenant}/{namespace}"
        else:
            level, member = "tenant", tenant
        found.append({"level": level, "name": member, "weight": weight})
    order = {"tenant": 0, "namespace": 1, "topic": 2}
    return sorted(found, key=lambda a: (order[str(a["level"])], str(a["name"])))


# --- attachments ----------------------------------------------------------------------------


async def _attachment(
    session: AsyncSession, member: Member, *, lock: bool = False
) -> tuple[ResourceGroupAttachment, str] | None:
    query = (
        select(ResourceGroupAttachment, ResourceGroup.name)
        .join(ResourceGroup, ResourceGroupAttachment.group_id == ResourceGroup.id)
        .where(ResourceGroupAttachment.scope_key == member.scope_key)
    )
    if lock:
        query = query.with_for_update()
    found = (await session.execute(query)).first()
    return None if found is None else (found[0], found[1])


async def read_attachment(session: AsyncSession, member: Member) -> dict[str, object] | None:
    """The group attached to the member and its weight, or None."""
    found = await _attachment(session, member)
    if found is None:
        return None
    row, group = found
    return {"resourceGroup": group, "weight": row.weight}


async def applied_group(session: AsyncSession, members: list[Member]) -> str | None:
    """The group that applies, the first attachment of ``members`` (most specific first)."""
    for member in members:
        found = await _attachment(session, member)
        if found is not None:
            return found[1]
    return None


def _attached_json(group: str, weight: int) -> dict[str, object]:
    return {"resourceGroup": group, "weight": weight}


async def attach(
    uow: UnitOfWork,
    member: Member,
    group: str,
    weight: int | None,
    unknown: type[SluiceError] = PreconditionFailed,
) -> None:
    """Attach ``member`` to ``group`` (replacing any other), with its weight; ``unknown``
    is the error of a group that does not exist (412 or 404, as Pulsar answers there)."""
    checked_weight = check_weight(weight)
    if not group:
        raise unknown(MISSING)
    row = await find_group(uow.session, group)
    if row is None:
        raise unknown(MISSING)
    found = await _attachment(uow.session, member, lock=True)
    before = None
    if found is None:
        attachment = ResourceGroupAttachment(
            scope_key=member.scope_key,
            group_id=row.id,
            tenant_id=member.tenant_id,
            namespace_id=member.namespace_id,
            topic_id=member.topic_id,
            weight=checked_weight,
        )
        uow.session.add(attachment)
    else:
        attachment, old_group = found
        before = _attached_json(old_group, attachment.weight)
        attachment.group_id, attachment.weight = row.id, checked_weight
    after = _attached_json(group, checked_weight)
    if before != after:
        await uow.session.flush()
        uow.record(
            RESOURCE_GROUP,
            f"{member.level}.{RESOURCE_GROUP}",
            member.name,
            before,
            after,
            group=group,
        )


async def detach(uow: UnitOfWork, member: Member) -> None:
    """Remove the member's group (nothing attached: nothing changes, 204)."""
    found = await _attachment(uow.session, member, lock=True)
    if found is None:
        return
    attachment, group = found
    before = _attached_json(group, attachment.weight)
    await uow.session.delete(attachment)
    await uow.session.flush()
    uow.record(
        RESOURCE_GROUP, f"{member.level}.{RESOURCE_GROUP}", member.name, before, None, group=group
    )
