"""Namespace rules: creation under a tenant, the Policies view, and guarded deletion."""

from __future__ import annotations

from sqlalchemy import select

from api.permissions.service import namespace_auth
from api.permissions.subscriptions import read_subscription_permissions
from api.schemas import NamespacePolicies
from api.tenants.service import delete_owner
from api.unit_of_work import UnitOfWork
from models.delayed_delivery import DELAYED_DELIVERY
from models.errors import Conflict, PreconditionFailed
from models.flow import (
    BACKLOG_QUOTA_PREFIX,
    MAX_UNACKED_PER_CONSUMER,
    MAX_UNACKED_PER_SUBSCRIPTION,
    MESSAGE_TTL,
    value_to_json,
)
from models.orm import Namespace, Tenant, Topic
from models.repository import (
    CascadingDeletion,
    find_namespace,
    get_namespace,
    get_tenant,
    load_snapshot,
)
from sluice.protocol.names import TopicName, check_namespace, check_tenant

DEFAULT_BUNDLES = {
    "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"],
    "numBundles": 4,
}


async def list_namespaces(uow: UnitOfWork, tenant: str) -> list[str]:
    """``tenant/ns`` names of a tenant, sorted; 404 when the tenant does not exist."""
    check_tenant(tenant)
    row = await get_tenant(uow.session, tenant)
    names = await uow.session.scalars(
        select(Namespace.name).where(Namespace.tenant_id == row.id).order_by(Namespace.name)
    )
    return [f"{tenant}/{n}" for n in names]


async def create_namespace(
    uow: UnitOfWork, tenant: str, namespace: str, body: NamespacePolicies, local: str
) -> None:
    """Create a namespace; 404 without the tenant, 412 on a bad name, 409 when it exists."""
    full = check_namespace(tenant, namespace)
    owner = await get_tenant(uow.session, tenant)
    clusters = body.replication_clusters or [local]
    allowed = set(owner.allowed_clusters) | {"global"}
    for cluster in clusters:
        if cluster not in allowed:
            raise PreconditionFailed(
                f"Cluster {cluster} is not in the list of allowed clusters list for tenant"
                f" [{tenant}]"
            )
    if await find_namespace(uow.session, tenant, namespace) is not None:
        raise Conflict("Namespace already exists")
    policies = {"replication_clusters": list(dict.fromkeys(clusters))}
    if body.bundles is not None:
        bundles = body.bundles.model_dump(exclude_none=True)
        if bundles:
            policies["bundles"] = bundles
    uow.session.add(Namespace(tenant_id=owner.id, name=namespace, policies=policies))
    await uow.session.flush()
    uow.record("namespace", "namespace", full, None, policies)
    uow.project(lambda dp: dp.register_namespace(full))


async def read_policies(uow: UnitOfWork, tenant: str, namespace: str, local: str) -> dict:
    """Pulsar's ``Policies`` document for a namespace (the fields Sluice keeps)."""
    check_namespace(tenant, namespace)
    row = await get_namespace(uow.session, tenant, namespace)
    owner = await uow.session.get_one(Tenant, row.tenant_id)
    snapshot = await load_snapshot(uow.session, namespace_id=row.id)
    rates = snapshot.namespaces.get(f"{tenant}/{namespace}")
    topic_rate = rates.dispatch_rate if rates else None
    sub_rate = rates.subscription_dispatch_rate if rates else None

    flow = snapshot.namespace_flow.get(f"{tenant}/{namespace}", {})
    quotas = {
        kind.removeprefix(BACKLOG_QUOTA_PREFIX): value_to_json(value)
        for kind, value in flow.items()
        if kind.startswith(BACKLOG_QUOTA_PREFIX)
    }

    def per_cluster(rate):
        return {local: rate.to_json()} if rate is not None else {}

    grants = await namespace_auth(uow, tenant, namespace, row.id)
    subscription_roles = await read_subscription_permissions(uow.session, row.id)
    return {
        "auth_policies": {**grants, "subscription_auth_roles": subscription_roles},
        "replication_clusters": row.policies.get("replication_clusters", [local]),
        "bundles": row.policies.get("bundles", DEFAULT_BUNDLES),
        "backlog_quota_map": quotas,
        "message_ttl_in_seconds": flow.get(MESSAGE_TTL),
        "max_unacked_messages_per_subscription": flow.get(MAX_UNACKED_PER_SUBSCRIPTION),
        "max_unacked_messages_per_consumer": flow.get(MAX_UNACKED_PER_CONSUMER),
        "delayed_delivery_policies": value_to_json(flow.get(DELAYED_DELIVERY)),
        "clusterDispatchRate": per_cluster(topic_rate),
        "topicDispatchRate": per_cluster(topic_rate),
        "subscriptionDispatchRate": per_cluster(sub_rate),
        "replicatorDispatchRate": {},
        "clusterSubscribeRate": {},
        "publishMaxMessageRate": {},
        "latency_stats_sample_rate": {},
        "deleted": False,
        "encryption_required": False,
        "subscription_auth_mode": "None",
        "properties": {},
        "tenant_admin_roles": list(owner.admin_roles),
    }


TAKES_TOPICS = CascadingDeletion(
    "forceDeleteNamespaceAllowed", "namespaces", "Cannot delete non empty namespace"
)


async def delete_namespace(uow: UnitOfWork, tenant: str, namespace: str, force: bool) -> None:
    """Delete a namespace; 409 while it has topics unless ``force`` (which takes them too)."""
    check_namespace(tenant, namespace)
    row = await get_namespace(uow.session, tenant, namespace)
    before = dict(row.policies)
    owned = select(Topic.name).where(Topic.namespace_id == row.id)
    topics = await delete_owner(uow, row, TAKES_TOPICS, owned, force, namespace_id=row.id)
    full = f"{tenant}/{namespace}"
    uow.record(
        "namespace",
        "namespace",
        full,
        before,
        None,
        topics=sorted(TopicName(tenant, namespace, t).full for t in topics),
    )
    uow.project(lambda dp: dp.unregister_namespaces([full]))
