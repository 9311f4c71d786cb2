"""Operations on subscriptions and topics, with Pulsar's rules for partitioned topics.

Writes (skip, clear-backlog, expire, reset-cursor, unload) apply to every partition of a
partitioned topic that has the subscription (or to the one partition named), as Pulsar's
brokers do; skip N and reset to a message id name one position, so on a partitioned topic they
are refused with 405 as in Pulsar, and so are peek and examine.  Each write is audited through
the unit of work, with the backlog before and after; a dry run (``dryRun=true``) validates and
changes nothing.  The data-plane work itself is ``dataplane.cursors``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from api.dataplane import lookup
from api.operations.schemas import LONG_MAX, ResetCursorBody, ResetCursorData
from api.topic_rows import get_topic
from api.unit_of_work import UnitOfWork
from dataplane.cursors import (
    MAX_SEQUENCE,
    Cursors,
    Entry,
    Pair,
    SubscriptionGone,
    Target,
    is_after,
    next_id,
)
from models.errors import (
    NotAllowed,
    NotFound,
    PreconditionFailed,
    Unavailable,
    partitioned_topic_not_found,
    subscription_not_found,
)
from sluice.protocol.names import TopicName, check_subscription

STREAM_ID = re.compile(r"^(\d+)-(\d+)$")


@dataclass(frozen=True, slots=True)
class Scope:
    """The topic a request names: its base topic and the partitions it reaches."""

    base: TopicName
    partitions: list[TopicName]
    partitioned_base: bool  # the base name of a partitioned topic


async def _scope(uow: UnitOfWork, topic: TopicName) -> Scope:
    _, row = await get_topic(uow, topic)
    base = TopicName(topic.tenant, topic.namespace, row.name)
    if row.partitions > 0 and topic.partition_index < 0:
        return Scope(base, [base.partition(i) for i in range(row.partitions)], True)
    return Scope(base, [topic], False)


def _cursors(uow: UnitOfWork) -> Cursors:
    if uow.data_plane is None:
        raise Unavailable("Redis is not configured")
    return Cursors(uow.data_plane.redis, uow.data_plane.scripts)


def _requested(scope: Scope) -> TopicName:
    """The topic a request named: a partitioned topic's base name, or the one partition."""
    return scope.base if scope.partitioned_base else scope.partitions[0]


async def _pairs(cursors: Cursors, scope: Scope, subscription: str) -> list[Pair]:
    """The partitions that have the subscription; 404 when none has it."""
    check_subscription(subscription)
    pairs = await cursors.having(scope.partitions, subscription)
    if not pairs:
        raise subscription_not_found(subscription, _requested(scope))
    return pairs


def _audit(
    uow: UnitOfWork, scope: Scope, subscription: str | None, before: Any, after: dict[str, Any]
) -> None:
    base = scope.base.full
    if subscription is None:
        uow.record("operation", "topic", base, before, after, topic=base, **after)
    else:
        entity = f"{base}#{subscription}"
        uow.record(
            "operation",
            "subscription",
            entity,
            before,
            after,
            topic=base,
            subscription=subscription,
            **after,
        )


def _partitions_note(scope: Scope, pairs: list[Pair]) -> dict[str, Any]:
    if scope.partitioned_base:
        return {"partitions": len(pairs)}
    return {"partition": scope.partitions[0].full} if scope.partitions[0] != scope.base else {}


# --- acknowledging the oldest entries -------------------------------------------------------


async def clear_backlog(uow: UnitOfWork, topic: TopicName, subscription: str) -> None:
    """Acknowledge everything published until now (``skip_all``)."""
    scope = await _scope(uow, topic)
    cursors = _cursors(uow)
    pairs = await _pairs(cursors, scope, subscription)
    if uow.dry_run:
        return
    before = await cursors.backlog(pairs)
    last = await cursors.last_entries(scope.partitions)
    entries, _ = await cursors.skip(
        pairs,
        lambda p: next_id(last[p.full]) if p.full in last else None,
        limit=None,
        field="skipped",
    )
    after = {
        "operation": "clearBacklog",
        "skippedEntries": entries,
        "msgBacklog": await cursors.backlog(pairs),
        **_partitions_note(scope, pairs),
    }
    _audit(uow, scope, subscription, {"msgBacklog": before}, after)


async def skip(uow: UnitOfWork, topic: TopicName, subscription: str, count: int) -> None:
    """Acknowledge the ``count`` oldest unacknowledged entries."""
    scope = await _scope(uow, topic)
    if scope.partitioned_base:
        raise NotAllowed("Skip messages on a partitioned topic is not allowed")
    cursors = _cursors(uow)
    pairs = await _pairs(cursors, scope, subscription)
    if uow.dry_run:
        return
    before = await cursors.backlog(pairs)
    entries, _ = await cursors.skip(pairs, lambda _p: "+", limit=count, field="skipped")
    after = {
        "operation": "skip",
        "numMessages": count,
        "skippedEntries": entries,
        "msgBacklog": await cursors.backlog(pairs),
        **_partitions_note(scope, pairs),
    }
    _audit(uow, scope, subscription, {"msgBacklog": before}, after)


async def expire(uow: UnitOfWork, topic: TopicName, subscription: str | None, seconds: int) -> None:
    """Acknowledge the entries published more than ``seconds`` ago, on one subscription or
    (``subscription`` None) on every subscription of the topic."""
    scope = await _scope(uow, topic)
    cursors = _cursors(uow)
    if subscription is None:
        pairs = await cursors.every_subscription(scope.partitions)
    else:
        pairs = await _pairs(cursors, scope, subscription)
    if uow.dry_run or not pairs:
        return
    seconds_now, micros = await cursors.redis.time()
    cutoff_ms = seconds_now * 1000 + micros // 1000 - seconds * 1000
    cutoff = f"{cutoff_ms}-0" if cutoff_ms > 0 else None
    before = await cursors.backlog(pairs)
    entries, messages = await cursors.skip(pairs, lambda _p: cutoff, limit=None, field="expired")
    after = {
        "operation": "expireMessages",
        "expireTimeInSeconds": seconds,
        "expiredEntries": entries,
        "expiredMessages": messages,
        "msgBacklog": await cursors.backlog(pairs),
        **_partitions_note(scope, pairs),
    }
    _audit(uow, scope, subscription, {"msgBacklog": before}, after)


# --- resetting the cursor -------------------------------------------------------------------


async def reset_to_time(
    uow: UnitOfWork, topic: TopicName, subscription: str, timestamp_ms: int
) -> None:
    """Deliver again everything published after ``timestamp_ms`` (and nothing before)."""
    scope = await _scope(uow, topic)
    await _reset(uow, scope, subscription, Target("time", time_ms=timestamp_ms))


async def reset_to_position(
    uow: UnitOfWork, topic: TopicName, subscription: str, body: ResetCursorBody
) -> None:
    """Deliver again everything from a message id (or after it, when excluded)."""
    scope = await _scope(uow, topic)
    if scope.partitioned_base:
        raise NotAllowed("Reset-cursor at position is not allowed for partitioned-topic")
    await _reset(uow, scope, subscription, position_target(topic, body))


async def _reset(uow: UnitOfWork, scope: Scope, subscription: str, target: Target) -> None:
    cursors = _cursors(uow)
    pairs = await _pairs(cursors, scope, subscription)
    if target.kind == "entry":
        last = (await cursors.last_entries(scope.partitions)).get(scope.partitions[0].full)
        if last is None or is_after(target.entry, last):
            raise PreconditionFailed(
                f"Unable to find position for position specified: {target.entry} is not in "
                f"{scope.partitions[0].full}"
            )
    if uow.dry_run:
        return
    before = await cursors.backlog(pairs)
    outcome = await cursors.reset(pairs, target)
    description: dict[str, Any] = {"operation": "resetCursor", "target": target.kind}
    if target.kind == "time":
        description["timestamp"] = target.time_ms
    elif target.kind == "entry":
        description["messageId"] = target.entry
        description["isExcluded"] = target.excluded
    after = {
        **description,
        "msgBacklog": outcome.backlog,
        "droppedPending": outcome.dropped_pending,
        "takenBackFromQueues": outcome.returned,
        **_partitions_note(scope, pairs),
    }
    _audit(uow, scope, subscription, {"msgBacklog": before}, after)


def position_target(topic: TopicName, body: ResetCursorBody) -> Target:
    """The reset target a message-id body names: Pulsar's ``ResetCursorData`` (ledgerId and
    entryId are the two parts of a stream id), ``"earliest"`` / ``"latest"``, or what the
    Python client's ``MessageId.serialize()`` writes."""
    if body == "earliest":
        return Target("earliest")
    if body == "latest":
        return Target("latest")
    if isinstance(body, ResetCursorData):
        if body.ledgerId < 0:
            return Target("earliest")
        if body.ledgerId == LONG_MAX:
            return Target("latest")
        if body.entryId < 0:
            raise PreconditionFailed("Invalid message id: entryId must not be negative")
        _check_partition(topic, body.partitionIndex, "")
        return Target("entry", entry=f"{body.ledgerId}-{body.entryId}", excluded=body.isExcluded)
    stream_id, partition, _batch, topic_name = body
    match = STREAM_ID.match(stream_id)
    if match is None or max(int(match[1]), int(match[2])) > MAX_SEQUENCE:
        raise PreconditionFailed(f"Invalid message id: {stream_id!r} is not a stream id")
    _check_partition(topic, partition, topic_name)
    return Target("entry", entry=stream_id)


def _check_partition(topic: TopicName, index: int, topic_name: str) -> None:
    if (index >= 0 and index != topic.partition_index) or (topic_name and topic_name != topic.full):
        raise PreconditionFailed(
            f"Invalid message id: it belongs to another partition or topic than {topic.full}"
        )


# --- reading entries ------------------------------------------------------------------------


async def peek(uow: UnitOfWork, topic: TopicName, subscription: str, position: int) -> Entry:
    """The ``position``-th message not acknowledged by the subscription (1 = the oldest)."""
    scope = await _scope(uow, topic)
    if scope.partitioned_base:
        raise NotAllowed("Peek messages on a partitioned topic is not allowed")
    check_subscription(subscription)
    try:
        entry = await _cursors(uow).nth(scope.partitions[0], "backlog", position, subscription)
    except SubscriptionGone:
        raise subscription_not_found(subscription, topic) from None
    if entry is None:
        raise NotFound("Message not found")
    return entry


async def examine(uow: UnitOfWork, topic: TopicName, initial_position: str, position: int) -> Entry:
    """The ``position``-th message from the earliest or the latest one (1 = that one)."""
    scope = await _scope(uow, topic)
    if scope.partitioned_base:
        raise NotAllowed(
            "Examine messages on a partitioned topic is not allowed, please try examine "
            "message on specific topic partition"
        )
    if initial_position not in ("latest", "earliest"):
        raise PreconditionFailed("initialPosition must be 'latest' or 'earliest'")
    mode: Literal["earliest", "latest"] = "earliest" if initial_position == "earliest" else "latest"
    entry = await _cursors(uow).nth(scope.partitions[0], mode, max(position, 1))
    if entry is None:
        raise NotFound("Message not found")
    return entry


# --- internal stats, ownership --------------------------------------------------------------


async def internal_stats(uow: UnitOfWork, topic: TopicName) -> dict[str, Any]:
    """Storage-level stats of a partition or non-partitioned topic."""
    scope = await _scope(uow, topic)
    if scope.partitioned_base:
        raise NotFound(f"{topic.full} is a partitioned topic: use partitioned-internalStats")
    partition = scope.partitions[0]
    return (await _cursors(uow).internal_stats([partition]))[partition.full]


async def partitioned_internal_stats(uow: UnitOfWork, topic: TopicName) -> dict[str, Any]:
    """Every partition's internal stats."""
    scope = await _scope(uow, topic)
    if not scope.partitioned_base:
        raise partitioned_topic_not_found(topic)
    docs = await _cursors(uow).internal_stats(scope.partitions)
    return {"metadata": {"partitions": len(scope.partitions)}, "partitions": docs}


async def unload(uow: UnitOfWork, topic: TopicName) -> None:
    """Make the owners let go of the topic's partitions; each is taken again at once (the
    answer waits until every live worker has seen the change, which makes the owner re-take
    the lease before it confirms)."""
    scope = await _scope(uow, topic)
    cursors = _cursors(uow)
    if uow.dry_run:
        return
    released = await cursors.unload(scope.partitions)
    after = {"operation": "unload", "unloadedPartitions": len(released)}
    if scope.partitions[0] != scope.base:
        after["partition"] = scope.partitions[0].full
    uow.record(
        "operation",
        "topic",
        scope.base.full,
        {"owners": sorted(set(released))},
        after,
        topic=scope.base.full,
        **after,
    )


async def lookup_v2(uow: UnitOfWork, topic: TopicName) -> dict[str, str]:
    """Pulsar's ``LookupData`` of a partition or non-partitioned topic."""
    scope = await _scope(uow, topic)
    if scope.partitioned_base:
        raise PreconditionFailed(
            f"{topic.full} is a partitioned topic: each partition has its own owner "
            "(look up a partition, or use partitioned-lookup)"
        )
    redis = _cursors(uow).redis
    answer = (await lookup(redis, [topic]))[topic.full]
    if answer["owner"] is None:
        raise Unavailable(f"No live worker owns {topic.full} yet: no worker holds its lease")
    return {"brokerUrl": answer["brokerUrl"], "httpUrl": answer["httpUrl"]}
