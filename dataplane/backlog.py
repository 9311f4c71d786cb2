"""Each subscription's backlog as Redis holds it now: entries not yet acknowledged.

A subscription's backlog is its pending entries (given to consumers, not acknowledged) plus
the entries it has not been given yet (Redis's consumer-group ``lag``).  Redis answers the
lag as nil when it cannot derive it from the group's entries-read counter (a group created or
moved at an explicit id); the entries are then counted once, at most ``COUNT_BATCH`` per
Redis call so that no call blocks Redis for long (``backlog.lua`` says where to count,
``count_entries.lua`` counts, ``backlog_set.lua`` checks the count still holds and stores it
as the group's counter, atomically), and Redis answers the lag from then on.  Lag and
pending always come from one atomic reading.  The admin service's stats and the workers'
documents and report snapshots all read it through ``read_backlogs``, so they agree and
never count an unknown lag as 0.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from dataplane.batches import in_batches
from dataplane.scripts import Scripts
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import BACKLOG, BACKLOG_SET, COUNT_ENTRIES
from sluice.protocol.text import as_text

log = logging.getLogger(__name__)

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
    already (in a pipeline of its own)."""
    replies = groups_replies
    if replies is None:
        replies = await in_batches(
            redis,
            partitions,
            lambda pipe, p: pipe.xinfo_groups(keys.log(p)),
            raise_on_error=False,
        )
    answer: dict[str, dict[str, Backlog]] = {}
    unknown: list[tuple[TopicName, str]] = []
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


@dataclass(slots=True)
class _Walk:
    """Counting one group's undelivered entries: ``counted`` entries in (``ref``,
    ``anchor``], of the ``added`` added up to ``end``; then the entries added up to ``ref``
    are ``added - counted`` (what ``backlog_set.lua`` stores, unless some of the stream's
    entries were trimmed since ``deleted`` were)."""

    ref: str
    added: int
    end: str
    deleted: int
    anchor: str
    counted: int = 0


async def _count_unknown(
    redis: Redis, scripts: Scripts, pairs: list[tuple[TopicName, str]]
) -> dict[tuple[TopicName, str], Backlog]:
    """The backlog of groups whose lag Redis cannot tell, counted at most
    ``COUNT_BATCH`` entries per Redis call; each group's counter is stored (so the next read
    is O(1)) in an atomic call that checks the count still holds."""
    result: dict[tuple[TopicName, str], Backlog] = {}
    walks: dict[tuple[TopicName, str], _Walk] = {}
    todo = pairs
    for _attempt in range(ATTEMPTS):
        if not todo:
            break
        starts = await in_batches(redis, todo, _call(scripts[BACKLOG.name]), raise_on_error=False)
        for pair, reply in zip(todo, starts, strict=True):
            if not isinstance(reply, list) or int(reply[0]) < 0:
                continue
            if int(reply[0]) == 0:
                result[pair] = _backlog(reply)
            else:
                ref, added, end = as_text(reply[1]), int(reply[2]), as_text(reply[3])
                walks[pair] = _Walk(ref, added, end, int(reply[4]), ref)
        await _count(redis, scripts, walks)
        todo = await _store(redis, scripts, walks, result)
    for partition, name in todo:
        # Left out: the stats keep the owning worker's figure (at most a second old); the
        # next read counts again.
        log.warning("backlog of %s/%s kept moving while counted", partition.full, name)
    return result


async def _count(redis: Redis, scripts: Scripts, walks: dict[tuple[TopicName, str], _Walk]) -> None:
    """Count each walk's entries in (``ref``, ``end``], ``COUNT_BATCH`` per call."""
    script = scripts[COUNT_ENTRIES.name]
    counting = [pair for pair, walk in walks.items() if walk.ref != walk.end]
    while counting:

        def queue(pipe: Any, pair: tuple[TopicName, str]) -> Awaitable[Any]:
            walk = walks[pair]
            script_keys, args = COUNT_ENTRIES.call(pair[0], walk.anchor, COUNT_BATCH, walk.end)
            return script(keys=script_keys, args=args, client=pipe)

        replies = await in_batches(redis, counting, queue)
        still = []
        for pair, (n, last) in zip(counting, replies, strict=True):
            walk = walks[pair]
            walk.counted += int(n)
            if int(n) == COUNT_BATCH and as_text(last) != walk.end:
                walk.anchor = as_text(last)
                still.append(pair)
        counting = still


async def _store(
    redis: Redis,
    scripts: Scripts,
    walks: dict[tuple[TopicName, str], _Walk],
    result: dict[tuple[TopicName, str], Backlog],
) -> list[tuple[TopicName, str]]:
    """Store each walk's count (``backlog_set.lua``) and take the lag into ``result``; the
    pairs to count again from the start (their group moved back, or entries were trimmed,
    meanwhile)."""
    script = scripts[BACKLOG_SET.name]
    position = {
        pair: (walk.ref, walk.added - walk.counted, walk.deleted) for pair, walk in walks.items()
    }
    walks.clear()
    again: list[tuple[TopicName, str]] = []
    while position:

        def queue(pipe: Any, pair: tuple[TopicName, str]) -> Awaitable[Any]:
            ref, read, deleted = position[pair]
            script_keys, args = BACKLOG_SET.call(pair[0], pair[1], ref, read, COUNT_BATCH, deleted)
            return script(keys=script_keys, args=args, client=pipe)

        pairs = list(position)
        replies = await in_batches(redis, pairs, queue, raise_on_error=False)
        for pair, reply in zip(pairs, replies, strict=True):
            status = int(reply[0]) if isinstance(reply, list) else -1
            if status == 1:
                position[pair] = (as_text(reply[1]), int(reply[2]), position[pair][2])
                continue
            del position[pair]
            if status == 0:
                result[pair] = _backlog(reply)
            elif status == 2:
                again.append(pair)
    return again


def _backlog(reply: list[Any]) -> Backlog:
    """A ``{0, lag, pending}`` reply (one atomic reading) as a backlog."""
    lag, pending = int(reply[1]), int(reply[2])
    return Backlog(lag + pending, pending)


def _call(script: Any) -> Any:
    def queue(pipe: Any, pair: tuple[TopicName, str]) -> Awaitable[Any]:
        return script(*BACKLOG.call(*pair), client=pipe)

    return queue
