"""Response documents of the flow-control routes."""

from __future__ import annotations

from api.rates.schemas import ResolvedPublishRate, ResolvedSubscribeRate
from api.schemas import BacklogQuotaDocument, Document


class ResolvedQuota(Document):
    """A backlog quota and the level it came from."""

    value: BacklogQuotaDocument
    source: str


class ResolvedInt(Document):
    """A max-unacked limit, TTL or abuse limit (0: none; maxMessageSize in bytes) and the
    level it came from."""

    value: int
    source: str


class FlowControls(Document):
    """Every resolved flow-control limit of a topic."""

    backlogQuota: dict[str, ResolvedQuota]
    maxUnackedMessagesPerSubscription: ResolvedInt
    maxUnackedMessagesPerConsumer: ResolvedInt
    messageTTL: ResolvedInt
    maxTopicsPerNamespace: ResolvedInt
    maxSubscriptionsPerTopic: ResolvedInt
    maxProducersPerTopic: ResolvedInt
    maxConsumersPerTopic: ResolvedInt
    maxConsumersPerSubscription: ResolvedInt
    maxMessageSize: ResolvedInt
    publishRate: ResolvedPublishRate
    subscribeRate: ResolvedSubscribeRate


class EffectiveFlowControls(Document):
    """``effectiveFlowControls``: the limits each partition of the topic enforces."""

    topic: str
    appliesPer: str
    flowControl: FlowControls


class TopicFlowControls(Document):
    """One topic's limits in a dry-run answer."""

    topic: str
    flowControl: FlowControls


class FlowDryRun(Document):
    """The answer to ``dryRun=true``: what changed and the would-be limits of each topic."""

    dryRun: bool
    changed: str
    topics: list[TopicFlowControls]
