"""Work over many partitions in bounded round trips.

A partitioned topic may have thousands of partitions.  Whatever the admin service or a worker
does on each of them goes through ``in_batches``: one pipelined round trip per ``BATCH``
partitions, so no request waits on one round trip per partition and no single Redis call
carries an unbounded amount of work (Redis serves other clients between two batches).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from itertools import islice
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import NoScriptError

from dataplane.scripts import load_missing
from sluice.protocol import keys
from sluice.protocol.connection import is_cluster
from sluice.protocol.names import TopicName

T = TypeVar("T")

BATCH = 256
MGET_BATCH = 1_000  # keys per MGET (stats documents are about a kilobyte each)


def chunks(items: Iterable[T], size: int = BATCH) -> Iterable[list[T]]:
    """``items`` in lists of at most ``size``."""
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


async def in_batches(
    redis: Redis,
    items: Sequence[T],
    queue: Callable[[Pipeline, T], Awaitable[Any] | Any],
    *,
    size: int = BATCH,
    raise_on_error: bool = True,
) -> list[Any]:
    """Queue ``queue(pipe, item)`` for every item, ``size`` items per pipelined round trip;
    the replies of every queued command, in order (one per item when each item queues one).
    An error reply raises, as a plain call would, unless ``raise_on_error`` is False: then
    it takes its place among the replies."""
    replies: list[Any] = []
    for chunk in chunks(items, size):
        for attempt in (1, 2):
            async with redis.pipeline(transaction=False) as pipe:
                for item in chunk:
                    queued = queue(pipe, item)
                    # A script call is a coroutine; a queued command returns the pipeline,
                    # which must not be awaited (a cluster pipeline would drop its queue).
                    if isinstance(queued, Awaitable) and queued is not pipe:
                        await queued
                try:
                    got = await pipe.execute(raise_on_error=raise_on_error)
                except NoScriptError:
                    got = [NoScriptError()]
            if any(isinstance(r, NoScriptError) for r in got):
                # A master promoted by a failover (cluster), or a server restarted, lacks
                # the scripts that calls queued as plain EVALSHA need: load them and queue
                # the batch again (its calls are idempotent).
                if attempt == 1 and await load_missing(redis):
                    continue
                if raise_on_error:
                    raise next(r for r in got if isinstance(r, NoScriptError))
            replies.extend(got)
            break
    return replies


async def over_streams(
    redis: Redis,
    partitions: Sequence[TopicName],
    queue: Callable[[Pipeline, str], Any],
) -> list[list[tuple[str, Any]]]:
    """Queue ``queue(pipe, stream)`` (one plain command) on every stream of each partition:
    its ``log``, then its priority levels' own streams (``keys.level_logs``, highest first).
    Per partition, (stream, reply) pairs, ``log``'s first; error replies are kept.  A
    partition's levels hash is read along with its ``log``'s command, so partitions without
    level streams cost the round trips they did; those with some, one more."""

    def first(pipe: Pipeline, partition: TopicName) -> None:
        queue(pipe, keys.log(partition))
        pipe.hkeys(keys.levels(partition))

    replies = await in_batches(redis, partitions, first, raise_on_error=False)
    found = [[(keys.log(p), replies[2 * i])] for i, p in enumerate(partitions)]
    sides = [
        (i, stream)
        for i, (p, levels) in enumerate(zip(partitions, replies[1::2], strict=True))
        if isinstance(levels, list)
        for stream in keys.level_logs(p, levels)
        if stream != keys.log(p)
    ]
    if sides:
        side_replies = await in_batches(
            redis, sides, lambda pipe, side: queue(pipe, side[1]), raise_on_error=False
        )
        for (i, stream), reply in zip(sides, side_replies, strict=True):
            found[i].append((stream, reply))
    return found


async def level_lengths(
    redis: Redis, found: Sequence[tuple[TopicName, Iterable[Any]]]
) -> list[int]:
    """The entries of each partition's priority level streams (given the fields of its
    levels hash; none, 0), in one pipelined round trip for them all (none without any)."""
    streams = [
        (i, keys.level_log(partition, int(level)))
        for i, (partition, levels) in enumerate(found)
        for level in levels
    ]
    totals = [0] * len(found)
    if streams:
        lengths = await in_batches(redis, streams, lambda pipe, s: pipe.xlen(s[1]))
        for (i, _stream), length in zip(streams, lengths, strict=True):
            totals[i] += length
    return totals


async def get_many(redis: Redis, names: Sequence[str]) -> list[Any]:
    """The values of many string keys (None where absent), in order.

    On a single server, one MGET per ``MGET_BATCH`` keys: one reply for a thousand keys
    instead of a thousand.  On a cluster, where the keys of different partitions live in
    different slots, redis-py sends one MGET per slot (``mget_nonatomic``)."""
    values: list[Any] = []
    for chunk in chunks(names, MGET_BATCH):
        if is_cluster(redis):
            values += await redis.mget_nonatomic(chunk)  # type: ignore[attr-defined]
        else:
            values += await redis.mget(chunk)
    return values
