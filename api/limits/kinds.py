"""Every policy kind as data: one ``PolicyKind`` descriptor per kind, read by the one route
factory (``api.limits.router``).

A descriptor says where the kind's routes are (a Pulsar path segment per level), how a write's
body is read and checked (``values``), how the value is stored and what a dry run reports (its
``Family``), and how a topic's applied value is read from the resolved limits.  Adding a kind
is adding its descriptor here, its case in the resolver (``models.flow_resolution``) and its
enforcement: see "Adding a policy kind" in docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from api.limits import reads, values
from api.limits.levels import NAMESPACE, SUBSCRIPTION, TOPIC
from api.limits.provenance import flow_provenance_for, provenance_for
from api.limits.schemas import (
    DelayedDeliveryDocument,
    DurableAcksDocument,
    FlowDryRun,
    PublishRateDocument,
    RateDryRun,
    SubscribeRateDocument,
)
from api.limits.store import flow_slot, rate_slot
from api.policy_store.store import Slot
from api.policy_store.target import PolicyTarget
from api.schemas import BacklogQuotaDocument, DispatchRateDocument
from models import abuse, advice, client_rates, delayed_delivery, durable_acks, flow
from models.flow import QuotaType, parse_quota_type, quota_kind, value_to_json
from models.flow_resolution import FlowLimits, Resolved
from models.orm import DISPATCH_RATE, SUBSCRIPTION_DISPATCH_RATE

TTL = flow.MESSAGE_TTL
DISPATCH_TAG = "dispatch rate policies"
FLOW_TAG = "flow control policies"
RATES_TAG = "publish and subscribe rates"


@dataclass(frozen=True, slots=True)
class Family:
    """How the kinds of one family are stored, read and reported by a dry run."""

    slot: Callable[[PolicyTarget, str], Slot]
    encode: Callable[[Any], Any]  # a value as its row stores it
    read: Callable[..., Awaitable[Any]]  # (state, caller, address, kind, applied) -> JSON
    report: Callable[..., Awaitable[list[dict[str, Any]]]]  # (session, namespace_id, topic_id)
    dry_run_model: type


DISPATCH = Family(
    rate_slot, lambda rate: rate, reads.read_dispatch_rate, provenance_for, RateDryRun
)


async def flow_report(session, *, namespace_id: int, topic_id: int | None = None) -> list:
    """The dry-run report of a flow kind: every affected topic's flow controls."""
    return await flow_provenance_for(
        session, flow_controls_json, namespace_id=namespace_id, topic_id=topic_id
    )


FLOW = Family(flow_slot, value_to_json, reads.read_flow_policy, flow_report, FlowDryRun)

# (verb, level, segment, kind) -> (route name, summary, description or None)
Naming = Callable[[str, str, str, str], tuple[str, str, str | None]]


def the_level_kind(verb: str, level: str, _segment: str, kind: str) -> tuple[str, str, None]:
    """``get_topic_dispatchRate``, "Get the topic dispatchRate"."""
    return f"{verb}_{level}_{kind}", f"{verb.title()} the {level} {kind}", None


def by_segment(verb: str, level: str, segment: str, _kind: str) -> tuple[str, str, None]:
    """``get_topic_maxProducers``, "Get maxProducers"."""
    return f"{verb}_{level}_{segment}", f"{verb.title()} {segment}", None


QUOTA_READS = {
    NAMESPACE: "Stored quotas by type (``{}`` when none).",
    TOPIC: "Stored quotas by type; with ``applied`` every type resolved through the levels.",
}


def quota_naming(verb: str, level: str, _segment: str, _kind: str) -> tuple[str, str, str | None]:
    """A map read (``get_topic_quotas``) and writes of one quota type (``set_topic_quota``)."""
    if verb == "get":
        return f"get_{level}_quotas", f"Get the {level} backlog quotas", QUOTA_READS[level]
    return f"{verb}_{level}_quota", f"{verb.title()} a {level} backlog quota", None


def plain_key(kind: PolicyKind, _query: Any) -> str:
    """The stored kind is the kind's name."""
    return kind.name


def quota_key(_kind: PolicyKind, quota_type: Any) -> str:
    """``backlogQuota.<type>``: one stored quota per ``backlogQuotaType``."""
    return quota_kind(parse_quota_type(quota_type))


@dataclass(frozen=True, slots=True)
class PolicyKind:
    """One policy kind.

    ``name``: the stored kind (and Pulsar's name); ``segments``: the path segment at each level
    it exists at, in route order; ``family``: storage, reads and dry-run report; ``tag``: its
    OpenAPI tag; ``response_model``: what a GET answers; ``body`` / ``parse``: a write's body
    dependency (``values``) and the hook that checks it into a value; ``request_body``: the
    OpenAPI request body when the body is read raw; ``key``: the stored kind of a write
    (``remove_query`` gives a removal the same query); ``resolved``: its case in a topic's
    resolved flow limits (value and source: ``applied=true`` and ``effectiveFlowControls``),
    and ``applied_levels`` the levels whose GET takes ``applied``; ``read``: a stored kind's
    GET (default: the stored value, or the applied one); ``naming``: route names and summaries;
    ``read_suffix``: appended to the GET path (``backlogQuotaMap``); ``reads_first``: register
    every level's GET before the writes (the order of the published routes); ``level_body``:
    a level whose write reads its body otherwise (the topic TTL also as ``?messageTTL=N``).
    """

    name: str
    segments: Mapping[str, str]
    family: Family
    tag: str
    response_model: Any
    body: Callable[..., Awaitable[values.Posted]]
    parse: Callable[..., Awaitable[Any]]
    applied_levels: frozenset[str]
    request_body: dict[str, Any] | None = None
    key: Callable[[PolicyKind, Any], str] = plain_key
    remove_query: Callable[..., Awaitable[values.Posted]] = values.nothing
    resolved: Callable[[FlowLimits], Resolved] | None = None
    read: Callable[..., Awaitable[Any]] = reads.stored_or_applied
    naming: Naming = the_level_kind
    read_suffix: str = ""
    reads_first: bool = False
    level_body: Mapping[str, Callable[..., Awaitable[values.Posted]]] = field(default_factory=dict)

    def body_at(self, level: str) -> Callable[..., Awaitable[values.Posted]]:
        """The body dependency of a write at ``level``."""
        return self.level_body.get(level, self.body)


def _dispatch(name: str, segments: Mapping[str, str], applied_levels: frozenset[str]):
    return PolicyKind(
        name=name,
        segments=segments,
        family=DISPATCH,
        tag=DISPATCH_TAG,
        response_model=DispatchRateDocument | None,
        body=values.rate_body,
        parse=values.as_sent,
        applied_levels=applied_levels,
    )


def _int(name: str, segments: Mapping[str, str], parse, resolved) -> PolicyKind:
    """A bare-integer flow policy (max unacked, TTL, abuse limit)."""
    topic_ttl = name == flow.MESSAGE_TTL
    return PolicyKind(
        name=name,
        segments=segments,
        family=FLOW,
        tag=FLOW_TAG,
        response_model=int | None,
        body=values.raw_body,
        parse=parse,
        applied_levels=frozenset(segments),
        request_body=values.INT_BODY,
        resolved=resolved,
        naming=by_segment,
        level_body={TOPIC: values.ttl_body} if topic_ttl else {},
    )


def _client_rate(name: str, value_type, document: type, resolved) -> PolicyKind:
    """A publish or subscribe rate: Pulsar's object, read raw and parsed strictly."""
    return PolicyKind(
        name=name,
        segments={NAMESPACE: name, TOPIC: name},
        family=FLOW,
        tag=RATES_TAG,
        response_model=document | None,
        body=values.raw_body,
        parse=values.parsed_by(value_type.from_json),
        applied_levels=frozenset({NAMESPACE, TOPIC}),
        request_body=values.object_body(document),
        resolved=resolved,
    )


def _quota() -> PolicyKind:
    """Backlog quotas: one per ``backlogQuotaType``, written one at a time, read as a map."""
    return PolicyKind(
        name="backlogQuota",
        segments={NAMESPACE: "backlogQuota", TOPIC: "backlogQuota"},
        family=FLOW,
        tag=FLOW_TAG,
        response_model=dict[str, BacklogQuotaDocument],
        body=values.quota_body,
        parse=values.as_sent,
        applied_levels=frozenset({TOPIC}),
        key=quota_key,
        remove_query=values.quota_type_query,
        read=reads.quota_map,
        naming=quota_naming,
        read_suffix="Map",
        reads_first=True,
    )


def _ns_topic(namespace: str, topic: str) -> dict[str, str]:
    return {NAMESPACE: namespace, TOPIC: topic}


# The table.  Its order is the order of the published routes (``api.limits.router``).
DISPATCH_KINDS = (
    _dispatch(DISPATCH_RATE, _ns_topic(DISPATCH_RATE, DISPATCH_RATE), frozenset({TOPIC})),
    _dispatch(
        SUBSCRIPTION_DISPATCH_RATE,
        _ns_topic(SUBSCRIPTION_DISPATCH_RATE, SUBSCRIPTION_DISPATCH_RATE),
        frozenset({TOPIC}),
    ),
    # A subscription's own rate (PIP-152) is stored as its ``dispatchRate``.
    _dispatch(DISPATCH_RATE, {SUBSCRIPTION: DISPATCH_RATE}, frozenset({SUBSCRIPTION})),
)
BACKLOG_QUOTA = _quota()
# Bare integers: (name, path segments, check, resolved limit); routes listed level by level.
INT_KINDS = tuple(
    _int(name, segments, check, attrgetter(resolved))
    for name, segments, check, resolved in (
        (
            flow.MAX_UNACKED_PER_SUBSCRIPTION,
            _ns_topic(flow.MAX_UNACKED_PER_SUBSCRIPTION, "maxUnackedMessagesOnSubscription"),
            values.max_unacked,
            "max_unacked_per_subscription",
        ),
        (
            flow.MAX_UNACKED_PER_CONSUMER,
            _ns_topic(flow.MAX_UNACKED_PER_CONSUMER, "maxUnackedMessagesOnConsumer"),
            values.max_unacked,
            "max_unacked_per_consumer",
        ),
        (flow.MESSAGE_TTL, _ns_topic(TTL, TTL), values.ttl, "message_ttl"),
        (
            flow.PRIORITY_OLDEST_EVERY,
            _ns_topic(flow.PRIORITY_OLDEST_EVERY, flow.PRIORITY_OLDEST_EVERY),
            values.count,
            "priority_oldest_every",
        ),
        (
            abuse.MAX_TOPICS_PER_NAMESPACE,
            {NAMESPACE: abuse.MAX_TOPICS_PER_NAMESPACE},
            values.count,
            "abuse.max_topics_per_namespace",
        ),
        (
            abuse.MAX_SUBSCRIPTIONS_PER_TOPIC,
            _ns_topic(abuse.MAX_SUBSCRIPTIONS_PER_TOPIC, abuse.MAX_SUBSCRIPTIONS_PER_TOPIC),
            values.count,
            "abuse.max_subscriptions_per_topic",
        ),
        (
            abuse.MAX_PRODUCERS_PER_TOPIC,
            _ns_topic(abuse.MAX_PRODUCERS_PER_TOPIC, "maxProducers"),
            values.count,
            "abuse.max_producers_per_topic",
        ),
        (
            abuse.MAX_CONSUMERS_PER_TOPIC,
            _ns_topic(abuse.MAX_CONSUMERS_PER_TOPIC, "maxConsumers"),
            values.count,
            "abuse.max_consumers_per_topic",
        ),
        (
            abuse.MAX_CONSUMERS_PER_SUBSCRIPTION,
            _ns_topic(abuse.MAX_CONSUMERS_PER_SUBSCRIPTION, abuse.MAX_CONSUMERS_PER_SUBSCRIPTION),
            values.count,
            "abuse.max_consumers_per_subscription",
        ),
        (
            abuse.MAX_MESSAGE_SIZE,
            {TOPIC: abuse.MAX_MESSAGE_SIZE},
            values.message_size,
            "abuse.max_message_size",
        ),
        (
            advice.BACKLOG_DRAIN_TARGET,
            _ns_topic(advice.BACKLOG_DRAIN_TARGET, advice.BACKLOG_DRAIN_TARGET),
            values.drain_target,
            "backlog_drain_target",
        ),
    )
)
CLIENT_RATE_KINDS = (
    _client_rate(
        client_rates.PUBLISH_RATE,
        client_rates.PublishRateLimit,
        PublishRateDocument,
        attrgetter("rates.publish_rate"),
    ),
    _client_rate(
        client_rates.SUBSCRIBE_RATE,
        client_rates.SubscribeRateLimit,
        SubscribeRateDocument,
        attrgetter("rates.subscribe_rate"),
    ),
)
# A Sluice extension: sends wait for replicas (``models.durable_acks``); topic > namespace >
# the broker's durableAckReplicas.
DURABLE_ACKS = PolicyKind(
    name=durable_acks.DURABLE_ACKS,
    segments=_ns_topic(durable_acks.DURABLE_ACKS, durable_acks.DURABLE_ACKS),
    family=FLOW,
    tag=FLOW_TAG,
    response_model=DurableAcksDocument | None,
    body=values.raw_body,
    parse=values.parsed_by(durable_acks.DurableAcks.from_json),
    applied_levels=frozenset({NAMESPACE, TOPIC}),
    request_body=values.object_body(DurableAcksDocument),
    resolved=attrgetter("durable_acks"),
    naming=by_segment,
)
# Pulsar's DelayedDeliveryPolicies (``models.delayed_delivery``): topic > namespace > the
# broker's delayedDeliveryEnabled, delayedDeliveryTickTimeMillis, delayedDeliveryMaxDelayInMillis.
DELAYED_DELIVERY = PolicyKind(
    name=delayed_delivery.DELAYED_DELIVERY,
    segments=_ns_topic(delayed_delivery.DELAYED_DELIVERY, delayed_delivery.DELAYED_DELIVERY),
    family=FLOW,
    tag=FLOW_TAG,
    response_model=DelayedDeliveryDocument | None,
    body=values.raw_body,
    parse=values.parsed_by(delayed_delivery.DelayedDeliveryPolicies.from_json),
    applied_levels=frozenset({TOPIC}),
    request_body=values.object_body(DelayedDeliveryDocument),
    resolved=attrgetter("delayed_delivery"),
    naming=by_segment,
)
KINDS = (
    *DISPATCH_KINDS,
    BACKLOG_QUOTA,
    *INT_KINDS,
    *CLIENT_RATE_KINDS,
    DURABLE_ACKS,
    DELAYED_DELIVERY,
)


def flow_controls_json(limits: FlowLimits) -> dict[str, Any]:
    """Every resolved flow limit with the level it came from (``effectiveFlowControls``): the
    backlog quota of each type, then every kind of the table with a ``resolved`` case."""

    def one(resolved: Resolved) -> dict[str, Any]:
        return {"value": value_to_json(resolved.value), "source": resolved.source.value}

    controls = {BACKLOG_QUOTA.name: {t.value: one(limits.quotas[t]) for t in QuotaType}}
    for kind in KINDS:
        if kind.resolved is not None:
            controls[kind.name] = one(kind.resolved(limits))
    return controls
