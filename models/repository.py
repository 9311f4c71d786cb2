"""Queries shared by the admin service and the workers: policy snapshots and broker config.

Only reads live here; writes belong to the services that own each entity.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from sqlalchemy import Select, String, Text, bindparam, cast, null, select, union_all
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from models.base import Json
from models.broker_config import BrokerConfig
from models.dispatch_rate import DispatchRate
from models.errors import Conflict, NotAllowed, NotFound, topic_not_found
from models.flow import value_from_json
from models.orm import (
    DISPATCH_RATE,
    SUBSCRIPTION_DISPATCH_RATE,
    BrokerConfigOverride,
    DispatchRatePolicy,
    FlowPolicy,
    Namespace,
    Tenant,
    Topic,
)
from models.snapshot import NamespaceRates, PolicySnapshot, TopicRates
from sluice.protocol.names import TopicName

_BROKER_QUERY = select(BrokerConfigOverride.name, BrokerConfigOverride.value)


async def load_broker_config(session: AsyncSession) -> BrokerConfig:
    """Defaults plus every stored override."""
    return BrokerConfig.from_overrides(dict(await _core_rows(session, _BROKER_QUERY)))


# Built once: the flow policies stored under two scope keys, and every broker setting
# override, in one statement (a flow row has its value in ``json``, a setting in ``text``).
# Plain parameters, not an expanding list: the statement's SQL is then the same every time.
_LIMITS_QUERY = union_all(
    select(
        FlowPolicy.scope_key.label("name"),
        FlowPolicy.kind.label("kind"),
        FlowPolicy.value.label("json"),
        cast(null(), Text).label("text"),
    ).where(FlowPolicy.scope_key.in_([bindparam("scope"), bindparam("other_scope")])),
    select(
        BrokerConfigOverride.name,
        cast(null(), String),
        cast(null(), Json),
        BrokerConfigOverride.value,
    ),
)


async def load_limits(
    session: AsyncSession, scopes: list[str]
) -> tuple[BrokerConfig, dict[str, tuple[str, Any]]]:
    """The broker configuration (as ``load_broker_config``) and the flow policies stored
    under the scope keys ``scopes`` (at most two: scope key -> (kind, stored JSON)), in one
    query."""
    assert len(scopes) <= 2
    # No scope key is empty: "" stands for a missing one.
    padded = [*scopes, "", ""]
    params = {"scope": padded[0], "other_scope": padded[1]}
    overrides: dict[str, str] = {}
    flows: dict[str, tuple[str, Any]] = {}
    for name, kind, value, text in await _core_rows(session, _LIMITS_QUERY, params):
        if kind is None:
            overrides[name] = text
        else:
            flows[name] = (kind, value)
    return BrokerConfig.from_overrides(overrides), flows


async def _core_rows(
    session: AsyncSession, query: Any, params: dict[str, Any] | None = None
) -> list[Any]:
    """Plain rows of a read on the session's connection (no ORM objects to build), after
    flushing what the session holds (a dry run reads back its own pending writes)."""
    await session.flush()
    return list((await (await session.connection()).execute(query, params)).all())


async def load_snapshot(
    session: AsyncSession,
    *,
    namespace_id: int | None = None,
    topic_id: int | None = None,
    namespace_name: str | None = None,
    broker: BrokerConfig | None = None,
) -> PolicySnapshot:
    """Every stored rate and flow policy, or only those of one namespace, by id or by
    ``tenant/namespace`` name (and optionally one topic in it)."""
    scope = (namespace_id, topic_id, namespace_name)
    rows = await _scoped_rows(session, _RATE_COLUMNS, *scope)
    if broker is None:
        broker = await load_broker_config(session)
    snapshot = build_snapshot(broker, rows)
    namespace_flow, topic_flow = _fold_flow(await _scoped_rows(session, _FLOW_COLUMNS, *scope))
    return replace(snapshot, namespace_flow=namespace_flow, topic_flow=topic_flow)


# What the snapshot reads of each policy table (plain rows, no ORM objects: a worker reads a
# namespace's policies again on every change event).
_RATE_COLUMNS = (
    DispatchRatePolicy,
    (
        DispatchRatePolicy.topic_id,
        DispatchRatePolicy.subscription,
        DispatchRatePolicy.kind,
        DispatchRatePolicy.msg,
        DispatchRatePolicy.byte,
        DispatchRatePolicy.relative,
        DispatchRatePolicy.period,
    ),
)
_FLOW_COLUMNS = (FlowPolicy, (FlowPolicy.topic_id, FlowPolicy.kind, FlowPolicy.value))
_SCOPED: dict[tuple[type, bool, bool, bool], Any] = {}


def _scoped_query(
    columns: tuple[Any, tuple[Any, ...]], by_id: bool, by_topic: bool, by_name: bool
) -> Any:
    """The query of one policy table's rows in a scope, built once per shape (its SQL is
    then compiled once too); parameters ``namespace_id``, ``topic_id``, ``tenant``,
    ``namespace``."""
    model, wanted = columns
    shape = (model, by_id, by_topic, by_name)
    query = _SCOPED.get(shape)
    if query is None:
        query = (
            select(
                *wanted,
                Tenant.name.label("tenant"),
                Namespace.name.label("namespace"),
                Topic.name.label("topic"),
            )
            .join(Namespace, model.namespace_id == Namespace.id)
            .join(Tenant, Namespace.tenant_id == Tenant.id)
            .outerjoin(Topic, model.topic_id == Topic.id)
        )
        if by_id:
            query = query.where(model.namespace_id == bindparam("namespace_id"))
        if by_name:
            query = query.where(
                Tenant.name == bindparam("tenant"), Namespace.name == bindparam("namespace")
            )
        if by_topic:
            query = query.where(
                model.topic_id.is_(None) | (model.topic_id == bindparam("topic_id"))
            )
        _SCOPED[shape] = query
    return query


async def _scoped_rows(
    session: AsyncSession,
    columns: tuple[Any, tuple[Any, ...]],
    namespace_id: int | None,
    topic_id: int | None,
    namespace_name: str | None,
) -> list[Any]:
    """Rows (the policy's columns, tenant, namespace, topic) of one policy table in scope:
    everything, one namespace (by id or ``tenant/namespace``), and within it one topic plus
    the namespace's own policies."""
    query = _scoped_query(
        columns, namespace_id is not None, topic_id is not None, namespace_name is not None
    )
    tenant, _, namespace = (namespace_name or "").partition("/")
    params = {
        "namespace_id": namespace_id,
        "topic_id": topic_id,
        "tenant": tenant,
        "namespace": namespace,
    }
    return await _core_rows(session, query, params)


def _fold_flow(rows: list[Any]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Flow-control policies by ``tenant/namespace`` and by base topic full name."""
    namespaces: dict[str, dict[str, Any]] = defaultdict(dict)
    topics: dict[str, dict[str, Any]] = defaultdict(dict)
    for row in rows:
        value = value_from_json(row.kind, row.value)
        if row.topic_id is None:
            namespaces[f"{row.tenant}/{row.namespace}"][row.kind] = value
        else:
            topics[TopicName(row.tenant, row.namespace, row.topic).full][row.kind] = value
    return dict(namespaces), dict(topics)


def build_snapshot(broker: BrokerConfig, rows: list[Any]) -> PolicySnapshot:
    """Fold rate rows (topic_id, subscription, kind, msg, byte, relative, period, tenant,
    namespace, topic) into a snapshot."""
    ns_rates: dict[str, dict[str, DispatchRate]] = defaultdict(dict)
    topic_rates: dict[str, dict[str, DispatchRate]] = defaultdict(dict)
    sub_rates: dict[str, dict[str, DispatchRate]] = defaultdict(dict)
    for row in rows:
        rate = DispatchRate(msg=row.msg, byte=row.byte, relative=row.relative, period=row.period)
        if row.topic_id is None:
            ns_rates[f"{row.tenant}/{row.namespace}"][row.kind] = rate
            continue
        assert row.topic is not None  # a topic-level row joins its topic
        full = TopicName(row.tenant, row.namespace, row.topic).full
        if row.subscription is None:
            topic_rates[full][row.kind] = rate
        else:
            sub_rates[full][row.subscription] = rate
    namespaces = {
        name: NamespaceRates(kinds.get(DISPATCH_RATE), kinds.get(SUBSCRIPTION_DISPATCH_RATE))
        for name, kinds in ns_rates.items()
    }
    topics = {
        full: TopicRates(
            topic_rates.get(full, {}).get(DISPATCH_RATE),
            topic_rates.get(full, {}).get(SUBSCRIPTION_DISPATCH_RATE),
            MappingProxyType(sub_rates.get(full, {})),
        )
        for full in set(topic_rates) | set(sub_rates)
    }
    return PolicySnapshot(broker, namespaces, topics)


async def require_forced_deletion(session: AsyncSession, key: str, what: str) -> None:
    """Refuse (``NotAllowed``) a forced deletion of ``what`` (tenants, namespaces) unless the
    broker setting ``key`` allows it."""
    if not (await load_broker_config(session)).get(key):
        raise NotAllowed(f"Broker doesn't allow forced deletion of {what}")


@dataclass(frozen=True, slots=True)
class CascadingDeletion:
    """Deleting a row that owns others (a tenant its namespaces, a namespace its topics): with
    ``force`` it takes them along, which the broker setting ``setting`` must allow
    (``NotAllowed`` naming ``owned`` otherwise); without, any of them refuses the deletion
    (``Conflict`` with ``refusal``)."""

    setting: str
    owned: str
    refusal: str

    async def names(self, session: AsyncSession, owned: Select[Any], force: bool) -> list[str]:
        """The names (selected by ``owned``) the deletion takes along, once allowed."""
        if force:
            await require_forced_deletion(session, self.setting, self.owned)
        found: list[str] = list((await session.scalars(owned)).all())
        if found and not force:
            raise Conflict(self.refusal)
        return found


async def find_tenant(session: AsyncSession, name: str) -> Tenant | None:
    """The tenant row, or None."""
    return await session.scalar(select(Tenant).where(Tenant.name == name))


async def get_tenant(
    session: AsyncSession, name: str, reason: str = "Tenant does not exist"
) -> Tenant:
    """The tenant row, or 404 with ``reason``."""
    tenant = await find_tenant(session, name)
    if tenant is None:
        raise NotFound(reason)
    return tenant


# Built once (as ``_TOPIC_QUERY`` below): the namespace of ``tenant/namespace``.
_NAMESPACE_QUERY = (
    select(Namespace)
    .join(Tenant, Namespace.tenant_id == Tenant.id)
    .where(Tenant.name == bindparam("tenant"), Namespace.name == bindparam("namespace"))
)


async def find_namespace(session: AsyncSession, tenant: str, namespace: str) -> Namespace | None:
    """The namespace row, or None."""
    return await session.scalar(_NAMESPACE_QUERY, {"tenant": tenant, "namespace": namespace})


async def get_namespace(session: AsyncSession, tenant: str, namespace: str) -> Namespace:
    """The namespace row, or 404 "Namespace does not exist"."""
    row = await find_namespace(session, tenant, namespace)
    if row is None:
        raise NotFound("Namespace does not exist")
    return row


async def find_topic(session: AsyncSession, namespace_id: int, name: str) -> Topic | None:
    """The topic row (non-partitioned or partitioned base), or None."""
    return await session.scalar(
        select(Topic).where(Topic.namespace_id == namespace_id, Topic.name == name)
    )


# Built once: the namespace of a topic, and its row stored under either of two names (a
# partition's own name, or its partitioned base); ``names`` holds one or both.
_TOPIC_QUERY = (
    select(Namespace, Topic)
    .join(Tenant, Namespace.tenant_id == Tenant.id)
    .outerjoin(
        Topic,
        (Topic.namespace_id == Namespace.id) & Topic.name.in_(bindparam("names", expanding=True)),
    )
    .where(Tenant.name == bindparam("tenant"), Namespace.name == bindparam("namespace"))
)


async def find_topics(
    session: AsyncSession, topic: TopicName
) -> tuple[Namespace, dict[str, Topic]]:
    """The namespace of a topic and the topic rows stored under its name and, for a
    partition's name, under its partitioned base's name (local name -> row; one query);
    404 "Namespace does not exist"."""
    names = [topic.local]
    if topic.partition_index >= 0:
        names.append(topic.base.local)
    params = {"tenant": topic.tenant, "namespace": topic.namespace, "names": names}
    rows = (await session.execute(_TOPIC_QUERY, params)).all()
    if not rows:
        raise NotFound("Namespace does not exist")
    return rows[0][0], {row.name: row for _ns, row in rows if row is not None}


async def get_topic(session: AsyncSession, topic: TopicName) -> tuple[Namespace, Topic]:
    """The namespace and topic rows of a topic or one of its partitions; 404 otherwise
    (one query)."""
    namespace, found = await find_topics(session, topic)
    return namespace, _named_topic(topic, found)


def _named_topic(topic: TopicName, found: dict[str, Any]) -> Any:
    """The row of ``found`` (local name -> row) that ``topic`` names: its own, or for a
    partition its partitioned base's; 404 when there is none."""
    row = found.get(topic.local)
    if row is None and topic.partition_index >= 0:
        base = found.get(topic.base.local)
        if base is not None and topic.partition_index < base.partitions:
            row = base
    if row is None:
        raise topic_not_found(topic)
    return row


# Built once: as ``_TOPIC_QUERY``, plain columns (no ORM objects to build) for the paths
# that only read the rows: the namespace's id, and the topic's columns (None without one);
# ``name`` and ``base`` are the same name for a topic that is not a partition.
_TOPIC_ROWS_QUERY = (
    select(
        Namespace.id.label("ns_id"),
        Topic.id,
        Topic.namespace_id,
        Topic.name,
        Topic.partitions,
        Topic.properties,
    )
    .join(Tenant, Namespace.tenant_id == Tenant.id)
    .outerjoin(
        Topic,
        (Topic.namespace_id == Namespace.id)
        & Topic.name.in_([bindparam("name"), bindparam("base")]),
    )
    .where(Tenant.name == bindparam("tenant"), Namespace.name == bindparam("namespace"))
)


async def find_topic_rows(session: AsyncSession, topic: TopicName) -> tuple[int, dict[str, Any]]:
    """As ``find_topics``, the namespace's id and plain rows (``id``, ``namespace_id``,
    ``name``, ``partitions``, ``properties``) instead of ORM objects: for reads only."""
    base = topic.base.local if topic.partition_index >= 0 else topic.local
    params = {
        "tenant": topic.tenant,
        "namespace": topic.namespace,
        "name": topic.local,
        "base": base,
    }
    rows = await _core_rows(session, _TOPIC_ROWS_QUERY, params)
    if not rows:
        raise NotFound("Namespace does not exist")
    return rows[0].ns_id, {row.name: row for row in rows if row.id is not None}


async def get_topic_row(session: AsyncSession, topic: TopicName) -> tuple[int, Any]:
    """As ``get_topic``, the namespace's id and a plain row (``find_topic_rows``)."""
    namespace_id, found = await find_topic_rows(session, topic)
    return namespace_id, _named_topic(topic, found)


async def insert_new(session: AsyncSession, model: Any, values: dict[str, Any]) -> bool:
    """Insert a row unless one with the same unique key exists (then nothing happens, and
    the transaction goes on); True when it was inserted.  One statement."""
    statement, params = insert_new_statement(session, model, values)
    return (await session.execute(statement, params)).first() is not None


def insert_new_statement(
    session: AsyncSession, model: Any, values: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """The statement of ``insert_new`` (it returns the key of the row it inserted, no row
    when one existed) and its parameters, to execute later."""
    assert session.bind is not None
    statement = _insert_new_statement(model, tuple(values), session.bind.dialect.name)
    return statement, {f"new_{name}": value for name, value in values.items()}


_INSERT_NEW: dict[tuple[Any, tuple[str, ...], str], Any] = {}


def _insert_new_statement(model: Any, names: tuple[str, ...], dialect: str) -> Any:
    """``INSERT ... ON CONFLICT DO NOTHING RETURNING`` the key, of the columns ``names``
    (parameters ``new_<name>``), built once per shape and dialect."""
    statement = _INSERT_NEW.get((model, names, dialect))
    if statement is None:
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        table = model.__table__
        statement = (
            insert(table)
            .values({name: bindparam(f"new_{name}", type_=table.c[name].type) for name in names})
            .on_conflict_do_nothing()
            .returning(*table.primary_key.columns)
        )
        _INSERT_NEW[(model, names, dialect)] = statement
    return statement


async def insert_or_lock(
    session: AsyncSession, model: Any, values: dict[str, Any], key: dict[str, Any]
) -> tuple[Any, bool]:
    """Insert ``values`` unless a row with the unique ``key`` exists; return (row, created).

    Either way the row comes back locked for this transaction, so concurrent writers of the
    same policy queue up instead of failing, and each sees the value it replaces.  The row
    usually exists (a policy is set more often than created): lock it in one statement, and
    insert only when there is none.
    """
    query = _locking_query(model, tuple(key))
    params = {f"key_{name}": value for name, value in key.items()}
    row = (await session.execute(query, params)).scalar_one_or_none()
    if row is not None:
        return row, False
    assert session.bind is not None
    insert = pg_insert if session.bind.dialect.name == "postgresql" else sqlite_insert
    statement = insert(model).values(**values).on_conflict_do_nothing()
    pk = list(model.__table__.primary_key.columns)
    inserted = (await session.execute(statement.returning(*pk))).first()
    if inserted is not None:
        row = await session.get(model, tuple(inserted) if len(pk) > 1 else inserted[0])
        return row, True
    # Another writer inserted it meanwhile: wait for its lock like any other writer.
    return (await session.execute(query, params)).scalar_one(), False


_LOCKING: dict[tuple[Any, tuple[str, ...]], Any] = {}


def _locking_query(model: Any, names: tuple[str, ...]) -> Any:
    """``SELECT ... FOR UPDATE`` of a ``model`` row by the columns ``names`` (parameters
    ``key_<name>``), built once per shape: a statement built per request costs its
    construction and its cache key on every write."""
    query = _LOCKING.get((model, names))
    if query is None:
        query = (
            select(model)
            .filter_by(**{name: bindparam(f"key_{name}") for name in names})
            .with_for_update()
        )
        _LOCKING[(model, names)] = query
    return query
