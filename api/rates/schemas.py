"""Response documents of the publish- and subscribe-rate routes (Pulsar's field names)."""

from __future__ import annotations

from api.schemas import Document


class PublishRateDocument(Document):
    """Pulsar's ``PublishRate``: messages and bytes per second on each partition."""

    publishThrottlingRateInMsg: int
    publishThrottlingRateInByte: int


class SubscribeRateDocument(Document):
    """Pulsar's ``SubscribeRate``: subscribe requests per consumer name per period."""

    subscribeThrottlingRatePerConsumer: int
    ratePeriodInSecond: int


class ResolvedPublishRate(Document):
    """A publish rate and the level it came from."""

    value: PublishRateDocument
    source: str


class ResolvedSubscribeRate(Document):
    """A subscribe rate and the level it came from."""

    value: SubscribeRateDocument
    source: str
