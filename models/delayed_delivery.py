"""Delayed delivery policies: Pulsar's ``DelayedDeliveryPolicies`` at namespace and topic level.

Stored as the topic's or namespace's ``delayedDelivery`` policy (the topic's wins; with
neither, the broker settings ``delayedDeliveryEnabled``, ``delayedDeliveryTickTimeMillis`` and
``delayedDeliveryMaxDelayInMillis`` apply), JSON::

    {"active": true, "tickTime": 1000, "maxDeliveryDelayInMillis": 0}

``active`` false: a message sent with a delivery time is delivered at once (new messages; one
held already keeps its time).  ``tickTime`` (ms): how early a delayed message may go when the
broker's ``isDelayedDeliveryDeliverAtTimeStrict`` is false (the broker tick's meaning).
``maxDeliveryDelayInMillis`` > 0: while active, a send whose delivery time is further ahead
than that is refused (Pulsar's ``NotAllowedException``) and not stored; 0 = no limit.  As in
Pulsar (whose JSON decoding leaves a missing field at its zero), a missing field is false or
0; types are strict, negative numbers are 400, an empty object is 400.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from models.dispatch_rate import describe_validation_error
from models.errors import InvalidInput
from models.json_body import INT64_MAX, check_fields

# The stored policy kind (the ``kind`` column of ``flow_policies``) and its path segment.
DELAYED_DELIVERY = "delayedDelivery"
ACTIVE = "active"
TICK_TIME = "tickTime"
MAX_DELAY = "maxDeliveryDelayInMillis"
FIELDS = (ACTIVE, TICK_TIME, MAX_DELAY)
# The broker settings that give a topic without the policy its value (models.broker_config).
BROKER_ENABLED = "delayedDeliveryEnabled"
BROKER_TICK = "delayedDeliveryTickTimeMillis"
BROKER_MAX_DELAY = "delayedDeliveryMaxDelayInMillis"


class DelayedDeliveryPolicies(BaseModel):
    """Whether delivery times are honoured, the tick, and the longest delay a send may ask."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    active: bool = Field(False, description="honour delivery times (false: deliver at once)")
    tickTime: int = Field(
        0, ge=0, le=INT64_MAX, description="ms a delayed message may go early (not strict)"
    )
    maxDeliveryDelayInMillis: int = Field(
        0, ge=0, le=INT64_MAX, description="longest delay a send may ask, ms (0: no limit)"
    )

    @property
    def max_delay_ms(self) -> int:
        """The delay limit the produce path enforces: 0 (none) while inactive, as in Pulsar."""
        return self.maxDeliveryDelayInMillis if self.active else 0

    def to_json(self) -> dict[str, Any]:
        """The stored and answered JSON."""
        return {
            TICK_TIME: self.tickTime,
            ACTIVE: self.active,
            MAX_DELAY: self.maxDeliveryDelayInMillis,
        }

    @classmethod
    def from_json(cls, body: object) -> DelayedDeliveryPolicies:
        """Parse a decoded JSON body; ``InvalidInput`` (400) with a readable reason."""
        if not isinstance(body, dict):
            raise InvalidInput("DelayedDeliveryPolicies body must be a JSON object")
        try:
            check_fields(body, FIELDS, "DelayedDeliveryPolicies", require_one=True)
        except PydanticCustomError as exc:
            raise InvalidInput(f"Invalid request body: {exc.message()}") from None
        try:
            return cls.model_validate({k: v for k, v in body.items() if v is not None})
        except ValidationError as exc:
            raise InvalidInput(describe_validation_error(exc)) from None
