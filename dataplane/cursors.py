"""Subscription cursors and partition contents: the data-plane side of Pulsar's subscription
operations (skip, clear-backlog, expire-messages, reset-cursor, peek, examine, internal stats,
unload).

* **skip N, clear-backlog, expire-messages** acknowledge the oldest entries a subscription has
  not acknowledged, with ``skip.lua`` (the script the workers use for message TTL and backlog
  eviction): entries delivered and pending first (they are the oldest), then entries never
  dispatched, which the group's cursor passes.  As in Pulsar, consumers are not disconnected:
  what was already handed to them still reaches them, and acknowledging it changes nothing.
* **reset-cursor** moves the cursor with ``reset_cursor.lua`` in one atomic call: entries up
  to the target are acknowledged, entries after it are delivered (again) once.
* **peek / examine** read one entry with ``peek.lua``; **internal stats** read the stream, its
  consumer groups and the lease.
* **unload** releases a partition's lease and tells its owner (``sl:worker:{id}:unloaded``);
  the owner stops the partition and takes it again on its next heartbeat.

Every Lua call does bounded work: a long skip is a series of calls of at most ``SKIP_BATCH``
entries, and the entries a reset must count (so the backlog in stats stays exact) are counted
``COUNT_BATCH`` at a time before its one atomic call.  Work over many partitions goes to Redis
in pipelined batches (``dataplane.batches``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import ResponseError

from dataplane.backlog import read_backlogs
from dataplane.batches import in_batches, over_streams
from dataplane.scripts import Scripts
from sluice.protocol import keys
from sluice.protocol.frames import lease_holder, parse_position, wake_dispatch
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import (
    COUNT_ENTRIES,
    INTERNAL_READ,
    LEASE_RELEASE,
    PEEK,
    RESET_CURSOR,
    SKIP,
)
from sluice.protocol.text import as_text

Pair = tuple[TopicName, str]  # (partition, subscription)

SKIP_BATCH = 10_000  # most entries one skip.lua call acknowledges
COUNT_BATCH = 10_000  # most entries one count_entries.lua call counts
MAX_POSITION = 100_000  # the deepest entry peek and examine walk to
MAX_SEQUENCE = 2**64 - 1  # the largest sequence part of a stream id
START = "0-0"  # a position before every entry
UNLOADED_TTL_SECONDS = 600  # how long an unload's note waits for the owner's heartbeat
END = "$"  # the end of a stream (reset_cursor.lua)


class SubscriptionGone(Exception):
    """The subscription does not exist on the partition (``NOSUB`` from a script)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One stream entry: its id and its fields (``sluice.protocol.frames`` names them)."""

    id: str
    fields: dict[str, bytes]


@dataclass(frozen=True, slots=True)
class Target:
    """Where a reset puts a cursor: after the entries published up to ``time_ms``, before
    (or, ``excluded``, after) entry ``entry``, or at either end of the stream."""

    kind: Literal["time", "entry", "earliest", "latest"]
    time_ms: int = 0
    entry: str = ""
    excluded: bool = False


@dataclass(frozen=True, slots=True)
class ResetOutcome:
    """What a reset did, summed over its partitions."""

    backlog: int  # entries to deliver after the targets
    dropped_pending: int  # entries that were delivered and pending
    returned: int  # messages taken back from consumers' receiver queues


def next_id(entry_id: str) -> str:
    """The smallest stream id after ``entry_id``."""
    ms, seq = parse_position(entry_id)
    return f"{ms}-{seq + 1}" if seq < MAX_SEQUENCE else f"{ms + 1}-0"


def is_after(a: str, b: str) -> bool:
    """True when stream id ``a`` comes after ``b``."""
    return parse_position(a) > parse_position(b)


class Cursors:
    """The operations, on the admin service's Redis client and registered scripts."""

    def __init__(self, redis: Redis, scripts: Scripts) -> None:
        self.redis = redis
        self.scripts = scripts

    # --- what exists ----------------------------------------------------------------------

    async def having(self, partitions: Sequence[TopicName], subscription: str) -> list[Pair]:
        """The (partition, subscription) pairs of the partitions where it exists."""
        member = await in_batches(
            self.redis, partitions, lambda pipe, p: pipe.sismember(keys.subs(p), subscription)
        )
        return [(p, subscription) for p, found in zip(partitions, member, strict=True) if found]

    async def every_subscription(self, partitions: Sequence[TopicName]) -> list[Pair]:
        """Every (partition, subscription) pair of the partitions."""
        members = await in_batches(
            self.redis, partitions, lambda pipe, p: pipe.smembers(keys.subs(p))
        )
        return [
            (p, as_text(name))
            for p, names in zip(partitions, members, strict=True)
            for name in sorted(names)
        ]

    async def backlog(self, pairs: Sequence[Pair]) -> int:
        """Entries not acknowledged, summed over the pairs (stats' msgBacklog)."""
        partitions = list(dict.fromkeys(p for p, _ in pairs))
        found = await read_backlogs(self.redis, self.scripts, partitions)
        return sum(
            found[p.full][name].entries for p, name in pairs if name in found.get(p.full, {})
        )

    # --- acknowledging the oldest entries -------------------------------------------------

    async def last_entries(self, partitions: Sequence[TopicName]) -> dict[str, str]:
        """Partition full name -> id of its last entry (partitions with entries only)."""
        found = await self._last_before(partitions, "+")
        return {p.full: last for p, last in zip(partitions, found, strict=True) if last}

    async def _last_before(self, partitions: Sequence[TopicName], bound: str) -> list[str | None]:
        """Each partition's last entry up to ``bound`` (an ``XREVRANGE`` max), None when it
        has none: the last over its streams (ids of every stream sort together)."""
        found = await over_streams(
            self.redis,
            partitions,
            lambda pipe, stream: pipe.xrevrange(stream, max=bound, min="-", count=1),
        )
        lasts = []
        for streams in found:
            ids = [
                as_text(rows[0][0]) for _stream, rows in streams if isinstance(rows, list) and rows
            ]
            lasts.append(max(ids, key=parse_position, default=None))
        return lasts

    async def skip(
        self,
        pairs: Sequence[Pair],
        cutoffs: Callable[[TopicName], str | None],
        *,
        limit: int | None,
        field: str,
    ) -> tuple[int, int]:
        """Acknowledge, on each pair, the oldest unacknowledged entries with ids below its
        partition's cutoff ("+" = no cutoff; None = nothing to do), at most ``limit`` entries
        (None = all); delivered ones first.  Counts the messages in the subscription's stats
        ``field``.  Returns (entries, messages) acknowledged."""
        if limit is not None and limit <= 0:
            return 0, 0
        script = self.scripts[SKIP.name]
        left: dict[Pair, int | None] = {}
        for pair in pairs:
            if cutoffs(pair[0]) is not None:
                left[pair] = limit
        entries = messages = 0
        while left:
            batch = list(left)
            asked = {pair: min(SKIP_BATCH, _or_all(left[pair])) for pair in batch}

            def queue(pipe: Pipeline, pair: Pair, asked: dict[Pair, int] = asked) -> Awaitable[Any]:
                partition, name = pair
                script_keys, args = SKIP.call(
                    partition, name, cutoffs(partition), asked[pair], True, field
                )
                return script(keys=script_keys, args=args, client=pipe)

            replies = await in_batches(self.redis, batch, queue, raise_on_error=False)
            for pair, reply in zip(batch, replies, strict=True):
                if isinstance(reply, ResponseError):
                    if "NOGROUP" in str(reply):
                        del left[pair]  # deleted meanwhile
                        continue
                    raise reply
                done, skipped_messages = int(reply[0]), int(reply[1])
                entries += done
                messages += skipped_messages
                remaining = left[pair]
                if remaining is not None:
                    remaining -= done
                if done < asked[pair] or remaining == 0:
                    del left[pair]
                else:
                    left[pair] = remaining
        await self.wake(pairs)
        return entries, messages

    async def wake(self, pairs: Sequence[Pair]) -> None:
        """Let the dispatchers of the pairs look again (one may wait for acks)."""

        def queue(pipe: Pipeline, pair: Pair) -> Any:
            pipe.delete(keys.dormant(pair[0]))  # a dormant partition's state changed
            return pipe.publish(keys.WAKE_CHANNEL, wake_dispatch(pair[0].full, pair[1]))

        await in_batches(self.redis, pairs, queue)

    # --- resetting the cursor -------------------------------------------------------------

    async def reset(self, pairs: Sequence[Pair], target: Target) -> ResetOutcome:
        """Move each pair's cursor to ``target`` (see ``reset_cursor.lua``)."""
        targets = await self._targets(pairs, target)
        counted = await self._count_after(targets)
        script = self.scripts[RESET_CURSOR.name]

        def queue(pipe: Pipeline, pair: Pair) -> Awaitable[Any]:
            partition, name = pair
            anchor, count = counted.get(pair, (targets[pair], 0))
            script_keys, args = RESET_CURSOR.call(partition, name, targets[pair], anchor, count)
            return script(keys=script_keys, args=args, client=pipe)

        replies = await in_batches(self.redis, list(pairs), queue, raise_on_error=False)
        backlog = dropped = returned = 0
        for reply in replies:
            if isinstance(reply, ResponseError):
                if str(reply).startswith("NOSUB"):
                    continue  # deleted meanwhile
                raise reply
            backlog += int(reply[0])
            dropped += int(reply[1])
            returned += int(reply[2])
        return ResetOutcome(backlog, dropped, returned)

    async def _targets(self, pairs: Sequence[Pair], target: Target) -> dict[Pair, str]:
        """Each pair's new cursor: the id of the last entry to count as acknowledged."""
        if target.kind == "earliest":
            return {pair: START for pair in pairs}
        if target.kind == "latest":
            return {pair: END for pair in pairs}
        if target.kind == "time":
            bound = f"{target.time_ms}-{MAX_SEQUENCE}"
        elif target.excluded:
            bound = target.entry
        else:
            bound = "(" + target.entry
        partitions = list(dict.fromkeys(p for p, _ in pairs))
        found = await self._last_before(partitions, bound)
        last = {p.full: entry or START for p, entry in zip(partitions, found, strict=True)}
        return {pair: last[pair[0].full] for pair in pairs}

    async def _count_after(self, targets: dict[Pair, str]) -> dict[Pair, tuple[str, int]]:
        """Entries of each partition's log after each target, counted COUNT_BATCH per call:
        pair -> (the last entry counted, how many).  ``reset_cursor.lua`` counts whatever
        came after, and the entries of the partition's level streams itself."""
        script = self.scripts[COUNT_ENTRIES.name]
        state = {pair: (t, 0) for pair, t in targets.items() if t not in (START, END)}
        counting = list(state)
        while counting:

            def queue(pipe: Pipeline, pair: Pair) -> Awaitable[Any]:
                script_keys, args = COUNT_ENTRIES.call(
                    pair[0], state[pair][0], COUNT_BATCH, level=keys.DEFAULT_LEVEL
                )
                return script(keys=script_keys, args=args, client=pipe)

            replies = await in_batches(self.redis, counting, queue)
            still = []
            for pair, (n, last) in zip(counting, replies, strict=True):
                if int(n):
                    state[pair] = (as_text(last), state[pair][1] + int(n))
                if int(n) == COUNT_BATCH:
                    still.append(pair)
            counting = still
        return state

    # --- reading entries ------------------------------------------------------------------

    async def nth(
        self,
        partition: TopicName,
        mode: Literal["backlog", "earliest", "latest"],
        position: int,
        subscription: str = "",
    ) -> Entry | None:
        """The ``position``-th entry (1 = the first) of a subscription's backlog, or from the
        first or the last entry of the partition; None when there is none.  Raises
        ``SubscriptionGone`` for a subscription the partition does not have."""
        try:
            script_keys, args = PEEK.call(partition, mode, position, subscription)
            reply = await self.scripts[PEEK.name](keys=script_keys, args=args)
        except ResponseError as exc:
            if str(exc).startswith("NOSUB"):
                raise SubscriptionGone(subscription) from None
            raise
        if not reply:
            return None
        entry_id, flat = reply
        return Entry(as_text(entry_id), _flat_dict(flat))

    # --- internal stats -------------------------------------------------------------------

    async def internal_stats(self, partitions: Sequence[TopicName]) -> dict[str, dict[str, Any]]:
        """Storage-level stats of each partition: its stream, its consumer groups (cursor,
        lag, pending entries, consumers) and its owner, each partition read in one atomic
        call (``internal_read.lua``), so its cursors and pending entries agree."""
        script = self.scripts[INTERNAL_READ.name]
        raw = await in_batches(
            self.redis,
            partitions,
            lambda pipe, p: script(*INTERNAL_READ.call(p), client=pipe),
        )
        docs = {}
        for partition, (stream_flat, token, *groups) in zip(partitions, raw, strict=True):
            stream = _flat_dict(stream_flat) if stream_flat else {}
            cursors = {}
            for group_flat, pending, consumers, scheduled in groups:
                group = _flat_dict(group_flat)
                cursors[as_text(group["name"])] = _cursor(group, pending, consumers, scheduled)
            first, last = stream.get("first-entry"), stream.get("last-entry")
            token_text = as_text(token) if token is not None else None
            docs[partition.full] = {
                "entriesAddedCounter": int(stream.get("entries-added") or 0),
                "numberOfEntries": int(stream.get("length") or 0),
                "firstEntryId": as_text(first[0]) if first else None,
                "lastEntryId": as_text(last[0]) if last else None,
                "lastConfirmedEntry": pulsar_position(as_text(last[0])) if last else None,
                "lastGeneratedId": as_text(stream.get("last-generated-id") or START),
                "owner": lease_holder(token_text) if token_text else None,
                "leaseToken": token_text,
                "cursors": cursors,
            }
        return docs

    # --- ownership ------------------------------------------------------------------------

    async def unload(self, partitions: Sequence[TopicName]) -> list[str]:
        """Release the partitions' leases and tell each owner which (a lease has no TTL and
        is not renewed, so the owner learns it from ``sl:worker:{id}:unloaded`` on its next
        heartbeat, or from its next dispatch call, which is refused): it stops the partition
        and takes the lease again.  Returns the owners released."""
        tokens = await in_batches(self.redis, partitions, lambda pipe, p: pipe.get(keys.lease(p)))
        held = [(p, as_text(t)) for p, t in zip(partitions, tokens, strict=True) if t is not None]
        script = self.scripts[LEASE_RELEASE.name]
        released = await in_batches(
            self.redis,
            held,
            lambda pipe, pt: script(*LEASE_RELEASE.call([pt]), client=pipe),
        )
        taken: dict[str, list[str]] = {}
        for (partition, token), ok in zip(held, released, strict=True):
            if ok:
                taken.setdefault(lease_holder(token), []).append(partition.full)
        for owner, names in taken.items():
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.sadd(keys.worker_unloaded(owner), *names)
                # Read and cleared by a live owner within a heartbeat; a dead one's goes.
                pipe.expire(keys.worker_unloaded(owner), UNLOADED_TTL_SECONDS)
                await pipe.execute()
        return [lease_holder(token) for (_, token), ok in zip(held, released, strict=True) if ok]


def _or_all(remaining: int | None) -> int:
    return SKIP_BATCH if remaining is None else remaining


def pulsar_position(entry_id: str) -> str:
    """A stream id ``ms-seq`` as Pulsar writes a position, ``ledgerId:entryId``."""
    ms, seq = parse_position(entry_id)
    return f"{ms}:{seq}"


def _flat_dict(flat: list[Any]) -> dict[str, Any]:
    """A flat ``[field, value, ...]`` reply (as a script returns XINFO's) as a dict."""
    pairs = iter(flat)
    return {as_text(k): v for k, v in zip(pairs, pairs, strict=True)}


def _cursor(
    group: dict[str, Any], pending: list[Any], consumers: list[Any], scheduled: int
) -> dict[str, Any]:
    """A consumer group's cursor, from its XINFO GROUPS entry, XPENDING summary (count,
    first id, last id, per consumer), XINFO CONSUMERS entries and scheduled redeliveries."""
    lag = group.get("lag")
    read = group.get("entries-read")
    count, first_pending, last_pending = pending[0], pending[1], pending[2]
    listed = [_flat_dict(c) for c in consumers]
    return {
        "lastDeliveredId": as_text(group.get("last-delivered-id") or START),
        "messagesConsumedCounter": int(read) if read is not None else None,
        "lag": int(lag) if lag is not None else None,
        "pendingCount": int(count or 0),
        "firstPendingId": as_text(first_pending) if first_pending else None,
        "lastPendingId": as_text(last_pending) if last_pending else None,
        "scheduledRedeliveries": int(scheduled or 0),
        "consumers": [
            {
                "name": as_text(c["name"]),
                "pendingCount": int(c.get("pending") or 0),
                "idleMs": int(c.get("idle") or 0),
            }
            for c in listed
        ],
    }
