"""Each subscription's backlog as Redis holds it now: entries not yet acknowledged.

A subscription's backlog is its pending entries (given to consumers, not acknowledged) plus
the entries it has not been given yet (Redis's consumer-group ``lag``).  Redis answers the
lag as nil when it cannot derive it from the group's entries-read counter (a group created or
moved at an explicit id); the entries are then counted once, at most ``COUNT_BATCH`` per
Redis call so that no call blocks Redis for long (``backlog.lua`` says where to count,
``count_entries.lua`` counts, ``backlog_set.lua`` checks the count still holds and stores it
as the group's counter, atomically), and Redis answers the lag from then on.  Lag and
pending always come from one atomic reading.  A partition with priority level streams
(``keys.level_logs``) has a group per subscription on each stream: its backlog is the sum
over them (each stream read atomically; no entry moves between streams).  The admin
service's stats and the workers' documents and report snapshots all read it through
``read_backlogs``, so they agree and never count an unknown lag as 0.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from dataplane.batches import in_batches, over_streams
from dataplane.scripts import Scripts
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import BACKLOG, BACKLOG_SET, COUNT_ENTRIES
from sluice.protocol.text import as_text

log = logging.getLogger(__name__)

Pair = tuple[TopicName, str]  # (partition, subscription)
Walked = tuple[Pair, int]  # a pair on the stream of one priority level (4: the partition's own)

COUNT_BATCH = 5_000  # most entries one Redis call counts (a few ms of Redis time)
ATTEMPTS = 5  # counts of one read that may start again (a group moved back, a trim)


@dataclass(frozen=True, slots=True)
class Backlog:
    """One subscription on one partition: entries not acknowledged, of which ``pending``
    were given to consumers."""

    entries: int
    pending: int


async def read_backlogs(
    redis: Redis,
    scripts: Scripts,
    partitions: list[TopicName],
    groups_replies: list[Any] | None = None,
) -> dict[str, dict[str, Backlog]]:
    """Partition full name -> subscription -> backlog, for every consumer group.

    ``groups_replies``: the partitions' ``XINFO GROUPS`` replies when the caller read them
    already (in a pipeline of its own; each group's figures for the whole partition, as
    ``stats_read.lua`` and ``stats_live.lua`` give them)."""
    replies = groups_replies
    if replies is None:
        streams = await over_streams(redis, partitions, lambda pipe, s: pipe.xinfo_groups(s))
        replies = [_summed([reply for _stream, reply in found]) for found in streams]
    answer: dict[str, dict[str, Backlog]] = {}
    unknown: list[Pair] = []
    for partition, groups in zip(partitions, replies, strict=True):
        found = answer.setdefault(partition.full, {})
        for group in groups if isinstance(groups, list) else []:
            name, pending, lag = (
                as_text(group["name"]),
                int(group.get("pending") or 0),
                group["lag"],
            )
            if lag is None:
                unknown.append((partition, name))
            else:
                found[name] = Backlog(int(lag) + pending, pending)
    if unknown:
        counted = await _count_unknown(redis, scripts, unknown)
        for (partition, name), backlog in counted.items():
            answer[partition.full][name] = backlog
    return answer


def _summed(replies: list[Any]) -> Any:
    """The ``XINFO GROUPS`` replies of a partition's streams as one: each group's pending and
    lag summed (its lag unknown when one stream's is); ``log``'s reply (the first) alone
    when the partition has no other stream, or when it has none (an error)."""
    if len(replies) == 1 or not isinstance(replies[0], list):
        return replies[0]
    groups: dict[Any, dict[str, Any]] = {}
    for reply in replies:
        for group in reply if isinstance(reply, list) else []:
            name = group["name"]
            total = groups.setdefault(name, {"name": name, "pending": 0, "lag": 0})
            total["pending"] += int(group.get("pending") or 0)
            lag = group["lag"]
            total["lag"] = None if lag is None or total["lag"] is None else total["lag"] + int(lag)
    return list(groups.values())


@dataclass(slots=True)
class _Walk:
    """Counting one group's undelivered entries on one stream: ``counted`` entries in
    (``ref``, ``anchor``], of the ``added`` added up to ``end``; then the entries added up to
    ``ref`` are ``added - counted`` (what ``backlog_set.lua`` stores, unless some of the
    stream's entries were trimmed since ``deleted`` were)."""

    ref: str
    added: int
    end: str
    deleted: int
    anchor: str
    counted: int = 0


async def _count_unknown(redis: Redis, scripts: Scripts, pairs: list[Pair]) -> dict[Pair, Backlog]:
    """The backlog of groups whose lag Redis cannot tell, counted at most
    ``COUNT_BATCH`` entries per Redis call; each group's counter is stored (so the next read
    is O(1)) in an atomic call that checks the count still holds.  With level streams, on
    each stream whose lag Redis cannot tell (``backlog.lua`` names them, and sums the
    others), and the backlog is the sum."""
    result: dict[Pair, Backlog] = {}
    todo = pairs
    for _attempt in range(ATTEMPTS):
        if not todo:
            break
        starts = await in_batches(redis, todo, _call(scripts[BACKLOG.name]), raise_on_error=False)
        known: dict[Pair, Backlog] = {}
        walks: dict[Walked, _Walk] = {}
        for pair, reply in zip(todo, starts, strict=True):
            if not isinstance(reply, list) or int(reply[0]) < 0:
                continue
            if int(reply[0]) == 0:
                result[pair] = _backlog(reply)
                continue
            known[pair] = _backlog([0, reply[6], reply[7]])  # the streams whose lag is known
            for ref, added, end, deleted, level in (reply[1:6], *_chunks(reply[8:], 5)):
                walk = _Walk(as_text(ref), int(added), as_text(end), int(deleted), as_text(ref))
                walks[(pair, int(level))] = walk
        await _count(redis, scripts, walks)
        stored: dict[Walked, Backlog] = {}
        todo = await _store(redis, scripts, walks, stored)
        for (pair, _level), backlog in stored.items():
            known[pair] = Backlog(
                known[pair].entries + backlog.entries, known[pair].pending + backlog.pending
            )
        unfinished = {pair for pair, _level in walks.keys() - stored.keys()}
        result.update((pair, b) for pair, b in known.items() if pair not in unfinished)
    for partition, name in todo:
        # Left out: the stats keep the owning worker's figure (at most a second old); the
        # next read counts again.
        log.warning("backlog of %s/%s kept moving while counted", partition.full, name)
    return result


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


async def _count(redis: Redis, scripts: Scripts, walks: dict[Walked, _Walk]) -> None:
    """Count each walk's entries in (``ref``, ``end``] of its stream, ``COUNT_BATCH`` per
    call."""
    script = scripts[COUNT_ENTRIES.name]
    counting = [key for key, walk in walks.items() if walk.ref != walk.end]
    while counting:

        def queue(pipe: Any, key: Walked) -> Awaitable[Any]:
            (partition, _name), level = key
            walk = walks[key]
            script_keys, args = COUNT_ENTRIES.call(
                partition, walk.anchor, COUNT_BATCH, walk.end, level=level
            )
            return script(keys=script_keys, args=args, client=pipe)

        replies = await in_batches(redis, counting, queue)
        still = []
        for key, (n, last) in zip(counting, replies, strict=True):
            walk = walks[key]
            walk.counted += int(n)
            if int(n) == COUNT_BATCH and as_text(last) != walk.end:
                walk.anchor = as_text(last)
                still.append(key)
        counting = still


async def _store(
    redis: Redis, scripts: Scripts, walks: dict[Walked, _Walk], stored: dict[Walked, Backlog]
) -> list[Pair]:
    """Store each walk's count (``backlog_set.lua``) and take the backlog found on its
    stream into ``stored``; the pairs to count again from the start (their group moved back,
    or entries were trimmed, meanwhile)."""
    script = scripts[BACKLOG_SET.name]
    position = {
        key: (walk.ref, walk.added - walk.counted, walk.deleted) for key, walk in walks.items()
    }
    again: list[Pair] = []
    while position:

        def queue(pipe: Any, key: Walked) -> Awaitable[Any]:
            (partition, name), level = key
            ref, read, deleted = position[key]
            script_keys, args = BACKLOG_SET.call(
                partition, name, ref, read, COUNT_BATCH, deleted, level=level
            )
            return script(keys=script_keys, args=args, client=pipe)

        walked = list(position)
        replies = await in_batches(redis, walked, queue, raise_on_error=False)
        for key, reply in zip(walked, replies, strict=True):
            status = int(reply[0]) if isinstance(reply, list) else -1
            if status == 1:
                position[key] = (as_text(reply[1]), int(reply[2]), position[key][2])
                continue
            del position[key]
            if status == 0:
                stored[key] = _backlog(reply)
            elif status == 2 and key[0] not in again:
                again.append(key[0])
    return again


def _backlog(reply: list[Any]) -> Backlog:
    """A ``{0, lag, pending}`` reply (one atomic reading) as a backlog."""
    lag, pending = int(reply[1]), int(reply[2])
    return Backlog(lag + pending, pending)


def _call(script: Any) -> Any:
    def queue(pipe: Any, pair: Pair) -> Awaitable[Any]:
        return script(*BACKLOG.call(*pair), client=pipe)

    return queue
