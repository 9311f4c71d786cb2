"""Each subscription's backlog as Redis holds it now: entries not yet acknowledged.

A subscription's backlog is its pending entries (given to consumers, not acknowledged) plus
the entries it has not been given yet (Redis's consumer-group ``lag``).  Redis answers the
lag as nil when it cannot derive it from the group's entries-read counter (a group created or
moved at an explicit id); ``backlog.lua`` then counts those entries once and repairs the
counter.  The admin service's stats and the workers' documents and report snapshots all read
it through ``read_backlogs``, so they agree and never count an unknown lag as 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from dataplane.batches import in_batches
from dataplane.scripts import Scripts
from sluice.protocol import keys
from sluice.protocol.names import TopicName


@dataclass(frozen=True, slots=True)
class Backlog:
    """One subscription on one partition: entries not acknowledged, of which ``pending``
    were given to consumers."""

    entries: int
    pending: int


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


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
    unknown: list[tuple[TopicName, str, int]] = []
    for partition, groups in zip(partitions, replies, strict=True):
        found = answer.setdefault(partition.full, {})
        for group in groups if isinstance(groups, list) else []:
            name, pending, lag = _text(group["name"]), int(group.get("pending") or 0), group["lag"]
            if lag is None:
                unknown.append((partition, name, pending))
            else:
                found[name] = Backlog(int(lag) + pending, pending)
    if unknown:
        counted = await in_batches(redis, unknown, _count(scripts), raise_on_error=False)
        for (partition, name, pending), undelivered in zip(unknown, counted, strict=True):
            if isinstance(undelivered, int) and undelivered >= 0:
                answer[partition.full][name] = Backlog(undelivered + pending, pending)
    return answer


def _count(scripts: Scripts) -> Any:
    script = scripts["backlog"]

    async def queue(pipe: Any, item: tuple[TopicName, str, int]) -> None:
        await script(keys=[keys.log(item[0])], args=[item[1]], client=pipe)

    return queue
