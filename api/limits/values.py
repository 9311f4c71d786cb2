"""The value types of the policy kinds: how a write's body (and any query parameter it takes)
is read, checked and answered with Pulsar's statuses and reasons.

A body dependency only extracts (``Posted``); the kind's ``parse`` hook checks, inside the
handler, so that a bad name (404/412) and a malformed body (400) are reported in Pulsar's order.
Integer policies read their body raw: a non-integer is 400, a negative one 412.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Body, Query

from api.unit_of_work import UnitOfWork
from models.abuse import check_count, check_message_size
from models.advice import check_drain_target
from models.dispatch_rate import DispatchRateBody
from models.errors import InvalidInput
from models.flow import BacklogQuotaBody, check_max_unacked, check_ttl
from models.repository import load_broker_config

RAW_BODY = Body(None)
QUOTA_TYPE = Query(None, alias="backlogQuotaType", description="destination_storage (default)")
# The integer policies read their body raw; the schema says what they take.
INT_BODY = {
    "requestBody": {"content": {"application/json": {"schema": {"type": "integer", "minimum": 0}}}}
}


def object_body(document: type) -> dict[str, Any]:
    """The request-body schema of a raw body parsed by a value object (strict: Pulsar's fields
    only): the response document's."""
    schema = {"$ref": f"#/components/schemas/{document.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


@dataclass(frozen=True, slots=True)
class Posted:
    """What a write sent: the body (raw, or already a value) and the query value that picks
    the stored kind or stands in for the body (``backlogQuotaType``, ``messageTTL``)."""

    body: Any
    query: Any = None


@dataclass(frozen=True, slots=True)
class Where:
    """The kind, level and path segment a value is posted to (reasons name them)."""

    kind: str
    level: str
    segment: str


async def rate_body(rate: DispatchRateBody = Body(...)) -> Posted:
    """A ``DispatchRate`` (validated by its model)."""
    return Posted(rate.value())


async def quota_body(
    quota: BacklogQuotaBody = Body(...), quota_type: str | None = QUOTA_TYPE
) -> Posted:
    """A ``BacklogQuota`` and its ``backlogQuotaType``."""
    return Posted(quota.value(), quota_type)


async def quota_type_query(quota_type: str | None = QUOTA_TYPE) -> Posted:
    """The ``backlogQuotaType`` a quota removal names."""
    return Posted(None, quota_type)


async def raw_body(body: Any = RAW_BODY) -> Posted:
    """A body read raw (an integer, a ``PublishRate``, a ``SubscribeRate``)."""
    return Posted(body)


async def ttl_body(
    body: Any = RAW_BODY, message_ttl: int | None = Query(None, alias="messageTTL")
) -> Posted:
    """The topic TTL: pulsar-admin sends it as ``?messageTTL=N``; a body works too."""
    return Posted(body, message_ttl)


async def nothing() -> Posted:
    """A removal that names nothing beyond its path."""
    return Posted(None)


def required(body: Any) -> Any:
    """The body, or 400 when there is none."""
    if body is None:
        raise InvalidInput("Request body is required")
    return body


async def as_sent(_uow: UnitOfWork, posted: Posted, _where: Where) -> Any:
    """A value its body model already checked."""
    return posted.body


def parsed_by(from_json):
    """The parse hook of a raw object body checked by ``from_json`` (400 with a reason)."""

    async def parse(_uow: UnitOfWork, posted: Posted, _where: Where) -> Any:
        return from_json(required(posted.body))

    return parse


async def max_unacked(_uow: UnitOfWork, posted: Posted, where: Where) -> int:
    """A max-unacked limit (the reason names the kind, as in Pulsar)."""
    return check_max_unacked(required(posted.body), where.kind)


async def ttl(_uow: UnitOfWork, posted: Posted, _where: Where) -> int:
    """A message TTL, as the body or (topic) as ``messageTTL``, not both."""
    if posted.body is not None and posted.query is not None:
        raise InvalidInput("Give the message TTL as the body or as messageTTL, not both")
    return check_ttl(required(posted.body if posted.body is not None else posted.query))


async def count(_uow: UnitOfWork, posted: Posted, where: Where) -> int:
    """A count limit (the reason names the path segment, per level, as in Pulsar)."""
    return check_count(required(posted.body), where.segment, where.level)


async def message_size(uow: UnitOfWork, posted: Posted, where: Where) -> int:
    """A topic ``maxMessageSize``, bounded by the broker's own value."""
    value = required(posted.body)
    broker = (await load_broker_config(uow.session)).get(where.kind)
    return check_message_size(value, broker)


async def drain_target(_uow: UnitOfWork, posted: Posted, _where: Where) -> int:
    """A ``backlogDrainTargetSeconds``: whole seconds, 1 or more."""
    return check_drain_target(required(posted.body))
