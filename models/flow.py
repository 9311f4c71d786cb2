"""Flow-control policy values: backlog quotas, max unacked messages and message TTL.

JSON shapes are Pulsar's.  A backlog quota (``BacklogQuotaImpl``)::

    {"limitSize": 10485760, "limitTime": -1, "policy": "producer_request_hold"}

plus Sluice's ``limitMessages`` (a limit in messages) and Pulsar's deprecated ``limit`` (bytes,
standing in for a missing ``limitSize``).  A body with any other field, or with none set, is
refused with 400 (``BacklogQuotaBody``).  A quota is stored per *type*
(``destination_storage``: size and message limits; ``message_age``: time limit), as Pulsar's
``backlog_quota_map`` keys it.  Max-unacked limits and the TTL are bare integers; 0 means "no
limit" / "no TTL", and a negative value is refused with 412, as in Pulsar.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from models import client_rates
from models.delayed_delivery import DELAYED_DELIVERY, DelayedDeliveryPolicies
from models.dispatch_rate import describe_validation_error
from models.durable_acks import DURABLE_ACKS, DurableAcks
from models.errors import InvalidInput, PreconditionFailed
from models.json_body import INT32_MAX, INT64_MAX, KnownFieldsBody, shown

# Stored policy kinds (the ``kind`` column of ``flow_policies``).
MAX_UNACKED_PER_SUBSCRIPTION = "maxUnackedMessagesPerSubscription"
MAX_UNACKED_PER_CONSUMER = "maxUnackedMessagesPerConsumer"
MESSAGE_TTL = "messageTTL"
# Sluice: the starvation guard of message priority (docs/priority.md): every N-th message a
# subscription hands out is its oldest waiting one (0 = strict priority).
PRIORITY_OLDEST_EVERY = "priorityOldestEvery"
BACKLOG_QUOTA_PREFIX = "backlogQuota."


class QuotaType(StrEnum):
    """Pulsar's ``BacklogQuotaType``: what a quota measures."""

    DESTINATION_STORAGE = "destination_storage"
    MESSAGE_AGE = "message_age"


class RetentionPolicy(StrEnum):
    """What happens when the backlog reaches the quota (Pulsar's ``RetentionPolicy``)."""

    PRODUCER_REQUEST_HOLD = "producer_request_hold"
    PRODUCER_EXCEPTION = "producer_exception"
    CONSUMER_BACKLOG_EVICTION = "consumer_backlog_eviction"
    # Sluice: a send into a full backlog evicts the oldest message of the lowest priority
    # below its own, or is refused as producer_exception refuses (docs/priority.md).
    LOWEST_PRIORITY_EVICTION = "lowest_priority_eviction"


_POLICY_NAMES = frozenset(p.value for p in RetentionPolicy)
QUOTA_FIELDS = ("limit", "limitSize", "limitTime", "limitMessages", "policy")


def quota_kind(quota_type: QuotaType) -> str:
    """The stored kind of a backlog quota of one type."""
    return BACKLOG_QUOTA_PREFIX + quota_type.value


def parse_quota_type(text: str | None) -> QuotaType:
    """The ``backlogQuotaType`` query parameter; absent means destination_storage."""
    if text is None or text == "":
        return QuotaType.DESTINATION_STORAGE
    try:
        return QuotaType(text)
    except ValueError:
        raise PreconditionFailed(
            f"Invalid backlogQuotaType {text!r}: use destination_storage or message_age"
        ) from None


class BacklogQuota(BaseModel):
    """Limits on a topic's backlog (slowest subscription) and what to do when reached.

    -1 in a limit means "no limit in that dimension".
    """

    model_config = ConfigDict(
        frozen=True, strict=True, extra="forbid", validate_by_name=True, validate_by_alias=True
    )

    limit_size: int = Field(-1, alias="limitSize", ge=-1, le=INT64_MAX, description="bytes")
    limit_time: int = Field(-1, alias="limitTime", ge=-1, le=INT32_MAX, description="seconds")
    limit_messages: int = Field(
        -1, alias="limitMessages", ge=-1, le=INT64_MAX, description="messages (Sluice)"
    )
    policy: RetentionPolicy = Field(RetentionPolicy.PRODUCER_REQUEST_HOLD)

    @model_validator(mode="before")
    @classmethod
    def _legacy_limit(cls, data: Any) -> Any:
        # Pulsar's deprecated ``limit`` (bytes) stands in for a missing ``limitSize``.
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if v is not None}
            limit = data.pop("limit", None)
            if "limitSize" not in data and limit is not None:
                data["limitSize"] = limit
            # Strict mode takes enum members only: turn a known policy name into one (an
            # unknown one is left for the field validation to report).
            policy = data.get("policy")
            if isinstance(policy, str) and policy in _POLICY_NAMES:
                data["policy"] = RetentionPolicy(policy)
        return data

    @property
    def limited(self) -> bool:
        """True when at least one dimension limits."""
        return self.limit_size >= 0 or self.limit_time >= 0 or self.limit_messages >= 0

    def to_json(self) -> dict[str, Any]:
        """Pulsar's field names (``limit`` repeated for old clients) plus ``limitMessages``."""
        return {
            "limit": self.limit_size,
            "limitSize": self.limit_size,
            "limitTime": self.limit_time,
            "limitMessages": self.limit_messages,
            "policy": self.policy.value,
        }

    @classmethod
    def from_json(cls, body: object) -> BacklogQuota:
        """Parse a decoded JSON body; ``InvalidInput`` (400) with a readable reason."""
        if not isinstance(body, dict):
            raise InvalidInput("BacklogQuota body must be a JSON object")
        policy = body.get("policy")
        if policy is not None and not (isinstance(policy, str) and policy in _POLICY_NAMES):
            raise InvalidInput(
                f"Invalid request body: policy: {shown(policy)} is not one of "
                + ", ".join(p.value for p in RetentionPolicy)
            )
        try:
            return BacklogQuotaBody.model_validate(body).value()
        except ValidationError as exc:
            raise InvalidInput(describe_validation_error(exc)) from None


class BacklogQuotaBody(KnownFieldsBody, BacklogQuota):
    """A ``BacklogQuota`` as a client sends it: Pulsar's field names (and ``limitMessages``)
    only, an unknown one refused and named, and at least one of them set."""

    model_config = ConfigDict(title="BacklogQuota", validate_by_name=False)
    known_fields = QUOTA_FIELDS
    body_name = "BacklogQuota"

    # Read by ``BacklogQuota._legacy_limit`` (it never reaches this field); declared so that
    # the schema lists it.
    limit: int | None = Field(
        None, ge=-1, le=INT64_MAX, description="deprecated: bytes, when limitSize is missing"
    )

    def value(self) -> BacklogQuota:
        """The plain value object (what is stored and compared)."""
        return BacklogQuota(
            limit_size=self.limit_size,
            limit_time=self.limit_time,
            limit_messages=self.limit_messages,
            policy=self.policy,
        )


def check_max_unacked(value: object, what: str) -> int:
    """A max-unacked limit: an int >= 0 (0 = no limit); 400 for a non-int, 412 if negative."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidInput(f"{what} must be an integer")
    if value < 0 or value > INT32_MAX:
        raise PreconditionFailed(f"{what} must be 0 or more")
    return value


def check_ttl(value: object) -> int:
    """A message TTL in seconds: an int >= 0 (0 = no TTL); 400 for a non-int, 412 if negative."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidInput("messageTTL must be an integer number of seconds")
    if value < 0 or value > INT32_MAX:
        raise PreconditionFailed("Invalid value for message TTL, message TTL must >= 0")
    return value


def value_from_json(kind: str, stored: Any) -> Any:
    """A stored JSON value as its domain value (BacklogQuota, publish or subscribe rate, or
    int)."""
    if kind.startswith(BACKLOG_QUOTA_PREFIX):
        return BacklogQuota.model_validate(stored)
    if kind in (client_rates.PUBLISH_RATE, client_rates.SUBSCRIBE_RATE):
        return client_rates.value_from_json(kind, stored)
    if kind == DURABLE_ACKS:
        return DurableAcks.model_validate(stored)
    if kind == DELAYED_DELIVERY:
        return DelayedDeliveryPolicies.model_validate(stored)
    return int(stored)


def value_to_json(value: Any) -> Any:
    """A domain value as stored / returned JSON."""
    if isinstance(
        value,
        BacklogQuota
        | client_rates.PublishRateLimit
        | client_rates.SubscribeRateLimit
        | DurableAcks
        | DelayedDeliveryPolicies,
    ):
        return value.to_json()
    return value
