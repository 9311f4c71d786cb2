"""Routes of Pulsar's subscription and topic operations, and of the v2 lookup.

Paths, bodies and status codes are those of Pulsar's ``PersistentTopics`` and ``TopicLookup``
resources: writes answer 204; a peeked or examined message answers with its payload as the
body and its metadata in ``X-Pulsar-*`` headers.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Annotated

import orjson
from fastapi import Body, Path, Query
from starlette.responses import Response

from api.deps import UowDep
from api.operations import service
from api.operations.schemas import (
    LONG_MAX,
    LookupData,
    PartitionedTopicInternalStats,
    ResetCursorBody,
    TopicInternalStats,
)
from api.responses import no_content
from api.routing import SluiceRoute, SluiceRouter
from api.topics.router import TopicDep
from dataplane.cursors import MAX_POSITION, Entry, pulsar_position
from sluice.priority import entry_priority
from sluice.protocol.frames import parse_position

router = SluiceRouter(tags=["topic operations"], route_class=SluiceRoute)

TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
SUBSCRIPTION = TOPIC + "/subscription/{subName}"
INT_MAX = 2**31 - 1

Count = Annotated[int, Path(ge=0, le=LONG_MAX, description="entries to skip")]
Seconds = Annotated[int, Path(ge=0, le=INT_MAX, description="age in seconds")]
Timestamp = Annotated[int, Path(ge=0, le=LONG_MAX, description="publish time, ms since the epoch")]
Position = Annotated[
    int, Path(ge=1, le=MAX_POSITION, description="1 = the oldest unacknowledged message")
]
MESSAGE = {
    200: {
        "description": "the message's payload; its metadata in X-Pulsar-* headers",
        "content": {"application/octet-stream": {}},
    }
}


@router.post(SUBSCRIPTION + "/skip_all", status_code=204)
async def clear_backlog(topic: TopicDep, subName: str, uow: UowDep) -> Response:
    """Acknowledge every message published until now (``clear-backlog``); on a partitioned
    topic, on every partition."""
    await service.clear_backlog(uow, topic, subName)
    return no_content()


@router.post(SUBSCRIPTION + "/skip/{numMessages}", status_code=204)
async def skip_messages(topic: TopicDep, subName: str, numMessages: Count, uow: UowDep) -> Response:
    """Acknowledge the oldest ``numMessages`` entries not acknowledged yet."""
    await service.skip(uow, topic, subName, numMessages)
    return no_content()


@router.post(SUBSCRIPTION + "/expireMessages/{expireTimeInSeconds}", status_code=204)
async def expire_messages(
    topic: TopicDep, subName: str, expireTimeInSeconds: Seconds, uow: UowDep
) -> Response:
    """Acknowledge the messages published more than ``expireTimeInSeconds`` ago."""
    await service.expire(uow, topic, subName, expireTimeInSeconds)
    return no_content()


@router.post(TOPIC + "/all_subscription/expireMessages/{expireTimeInSeconds}", status_code=204)
async def expire_messages_all_subscriptions(
    topic: TopicDep, expireTimeInSeconds: Seconds, uow: UowDep
) -> Response:
    """``expireMessages`` on every subscription of the topic."""
    await service.expire(uow, topic, None, expireTimeInSeconds)
    return no_content()


@router.post(SUBSCRIPTION + "/resetcursor/{timestamp}", status_code=204)
async def reset_cursor_to_time(
    topic: TopicDep, subName: str, timestamp: Timestamp, uow: UowDep
) -> Response:
    """Deliver again every message published after ``timestamp`` (ms since the epoch);
    those published up to it count as acknowledged.  On every partition."""
    await service.reset_to_time(uow, topic, subName, timestamp)
    return no_content()


@router.post(SUBSCRIPTION + "/resetcursor", status_code=204)
async def reset_cursor_to_position(
    topic: TopicDep,
    subName: str,
    uow: UowDep,
    messageId: Annotated[
        ResetCursorBody,
        Body(
            description='{"ledgerId": ms, "entryId": seq, "isExcluded": false} (the two parts '
            'of a stream id), "earliest", "latest", or a Python MessageId.serialize()'
        ),
    ],
) -> Response:
    """Deliver again every message from the given message id (after it when ``isExcluded``)."""
    await service.reset_to_position(uow, topic, subName, messageId)
    return no_content()


@router.get(
    SUBSCRIPTION + "/position/{messagePosition}", response_class=Response, responses=MESSAGE
)
async def peek_nth_message(
    topic: TopicDep, subName: str, messagePosition: Position, uow: UowDep
) -> Response:
    """The ``messagePosition``-th message the subscription has not acknowledged."""
    return message_response(await service.peek(uow, topic, subName, messagePosition))


@router.get(TOPIC + "/examinemessage", response_class=Response, responses=MESSAGE)
async def examine_message(
    topic: TopicDep,
    uow: UowDep,
    initialPosition: str = "latest",
    messagePosition: Annotated[int, Query(le=MAX_POSITION)] = 1,
) -> Response:
    """The ``messagePosition``-th message from the latest (or earliest) one."""
    return message_response(await service.examine(uow, topic, initialPosition, messagePosition))


@router.get(TOPIC + "/internalStats", response_model=TopicInternalStats)
async def internal_stats(topic: TopicDep, uow: UowDep, metadata: bool = False) -> dict:
    """The stream, its consumer groups and its owner (``metadata`` is accepted, as Pulsar's
    flag for ledger metadata, and changes nothing)."""
    return await service.internal_stats(uow, topic)


@router.get(TOPIC + "/partitioned-internalStats", response_model=PartitionedTopicInternalStats)
async def partitioned_internal_stats(topic: TopicDep, uow: UowDep) -> dict:
    """Each partition's internal stats."""
    return await service.partitioned_internal_stats(uow, topic)


@router.put(TOPIC + "/unload", status_code=204)
async def unload_topic(topic: TopicDep, uow: UowDep) -> Response:
    """The owner lets go of the topic (of every partition); a worker takes it again."""
    await service.unload(uow, topic)
    return no_content()


@router.get("/lookup/v2/topic/persistent/{tenant}/{namespace}/{topic}", response_model=LookupData)
async def lookup_topic_v2(topic: TopicDep, uow: UowDep) -> dict:
    """Where a partition or non-partitioned topic is served (Pulsar's ``LookupData``)."""
    return await service.lookup_v2(uow, topic)


# --- messages as Pulsar's admin API answers them -------------------------------------------

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def _iso(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _header(value: str) -> str | None:
    """A header value carrying ``value`` as UTF-8, or None when it cannot be one."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return None
    return value.encode().decode("latin-1")


def message_response(entry: Entry) -> Response:
    """An entry as Pulsar answers a peeked message: the payload as the body (for a batch
    entry, the batch as Sluice stores it: a msgpack list), the metadata in headers."""
    fields = entry.fields
    text = {k: v.decode(errors="replace") for k, v in fields.items() if k != "d"}
    headers = {"X-Pulsar-Message-ID": pulsar_position(entry.id)}
    published = int(text["t"]) if text.get("t", "").isdigit() else parse_position(entry.id)[0]
    headers["X-Pulsar-publish-time"] = _iso(published)
    if text.get("e", "").isdigit():
        headers["X-Pulsar-event-time"] = _iso(int(text["e"]))
    try:
        properties = orjson.loads(fields["p"]) if fields.get("p") else {}
    except orjson.JSONDecodeError:
        properties = {}
    if not isinstance(properties, dict):
        properties = {}
    for key, value in properties.items():
        header = _header(str(value))
        if _TOKEN.match(key) and header is not None:
            headers[f"X-Pulsar-PROPERTY-{key}"] = header
    # Every property, also those a header cannot name: JSON, ASCII only.
    headers["X-Sluice-Properties"] = json.dumps(properties, separators=(",", ":"))
    for field, name in (("k", "partition-key"), ("pr", "producer-name"), ("sq", "sequence-id")):
        value = _header(text[field]) if field in text else None
        if value is not None:
            headers[f"X-Pulsar-{name}"] = value
    # Sluice: the message's priority (docs/priority.md), 4 when it carries none.
    headers["X-Sluice-Priority"] = str(entry_priority(text))
    if "n" in text:
        headers["X-Pulsar-num-batch-message"] = text["n"]
        headers["X-Pulsar-batch-size"] = str(len(fields.get("d", b"")))
    headers["X-Pulsar-Is-Encrypted"] = "false"
    return Response(fields.get("d", b""), media_type="application/octet-stream", headers=headers)
