"""The publish and subscribe rates: Pulsar's throttles on what clients ask of a topic.

JSON shapes are Pulsar's.  A publish rate (``PublishRate``), per partition per second::

    {"publishThrottlingRateInMsg": 1000, "publishThrottlingRateInByte": -1}

A subscribe rate (``SubscribeRate``): how many subscribe requests one consumer name from one
client host may make to one partition per period::

    {"subscribeThrottlingRatePerConsumer": 10, "ratePeriodInSecond": 30}

A value <= 0 in a dimension means "no limit in that dimension"; a rate that limits nothing is
*unset* and resolution falls through to the next level, as Pulsar's ``normalize`` does.
Missing fields take Pulsar's defaults (-1, and a 30 s period); types are strict (no coercion)
and unknown fields are ignored.  Out-of-range values are 400, like a bad ``DispatchRate``.
"""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)

from models.dispatch_rate import parse_body
from models.json_body import INT32_MAX, INT64_MAX

# Stored policy kinds (the ``kind`` column of ``flow_policies``), named as Pulsar's REST paths.
PUBLISH_RATE = "publishRate"
SUBSCRIBE_RATE = "subscribeRate"

PUBLISH_MSG = "publishThrottlingRateInMsg"
PUBLISH_BYTE = "publishThrottlingRateInByte"
SUBSCRIBE_PER_CONSUMER = "subscribeThrottlingRatePerConsumer"
SUBSCRIBE_PERIOD = "ratePeriodInSecond"

# Broker settings (Pulsar's ``ServiceConfiguration``) that give the lowest level.
BROKER_PUBLISH_MSG = "maxPublishRatePerTopicInMessages"
BROKER_PUBLISH_BYTE = "maxPublishRatePerTopicInBytes"
BROKER_SUBSCRIBE_RATE = "subscribeThrottlingRatePerConsumer"
BROKER_SUBSCRIBE_PERIOD = "subscribeRatePeriodPerConsumerInSecond"

_CONFIG = ConfigDict(
    frozen=True, strict=True, extra="ignore", validate_by_name=True, validate_by_alias=True
)


class PublishRateLimit(BaseModel):
    """At most ``msg`` messages and ``byte`` bytes per second on each partition."""

    model_config = _CONFIG

    msg: int = Field(-1, alias=PUBLISH_MSG, ge=-1, le=INT32_MAX, description="messages/s")
    byte: int = Field(-1, alias=PUBLISH_BYTE, ge=-1, le=INT64_MAX, description="bytes/s")

    @field_validator("msg", "byte", mode="before")
    @classmethod
    def _null_is_default(cls, value: Any) -> Any:
        return -1 if value is None else value

    @property
    def enabled(self) -> bool:
        """True when at least one dimension limits (Pulsar's ``normalize`` keeps it)."""
        return self.msg > 0 or self.byte > 0

    def to_json(self) -> dict[str, Any]:
        """Pulsar's field names and order."""
        return {PUBLISH_MSG: self.msg, PUBLISH_BYTE: self.byte}

    @classmethod
    def from_json(cls, body: object) -> PublishRateLimit:
        """Parse a decoded JSON body; ``InvalidInput`` (400) with a readable reason."""
        return parse_body(cls, body, "PublishRate", (PUBLISH_MSG, PUBLISH_BYTE))


class SubscribeRateLimit(BaseModel):
    """At most ``per_consumer`` subscribe requests of one consumer name per ``period`` seconds
    on each partition."""

    model_config = _CONFIG

    per_consumer: int = Field(
        -1, alias=SUBSCRIBE_PER_CONSUMER, ge=-1, le=INT32_MAX, description="subscribes per period"
    )
    period: int = Field(30, alias=SUBSCRIBE_PERIOD, ge=1, le=INT32_MAX, description="seconds")

    @field_validator("per_consumer", "period", mode="before")
    @classmethod
    def _null_is_default(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return 30 if info.field_name == "period" else -1
        return value

    @property
    def enabled(self) -> bool:
        """True when it limits (Pulsar: a rate above 0)."""
        return self.per_consumer > 0

    def to_json(self) -> dict[str, Any]:
        """Pulsar's field names and order."""
        return {SUBSCRIBE_PER_CONSUMER: self.per_consumer, SUBSCRIBE_PERIOD: self.period}

    @classmethod
    def from_json(cls, body: object) -> SubscribeRateLimit:
        """Parse a decoded JSON body; ``InvalidInput`` (400) with a readable reason."""
        return parse_body(cls, body, "SubscribeRate", (SUBSCRIBE_PER_CONSUMER, SUBSCRIBE_PERIOD))


def value_from_json(kind: str, stored: Any) -> PublishRateLimit | SubscribeRateLimit:
    """A stored publish or subscribe rate as its value object."""
    model = PublishRateLimit if kind == PUBLISH_RATE else SubscribeRateLimit
    return model.model_validate(stored)


__all__ = [
    "BROKER_PUBLISH_BYTE",
    "BROKER_PUBLISH_MSG",
    "BROKER_SUBSCRIBE_PERIOD",
    "BROKER_SUBSCRIBE_RATE",
    "PUBLISH_RATE",
    "SUBSCRIBE_RATE",
    "PublishRateLimit",
    "SubscribeRateLimit",
    "value_from_json",
]
