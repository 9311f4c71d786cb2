"""A producer's side of its partitions' resource-group publish limits.

The owning worker writes a partition's group (its id) and the group's publish rates into the
partition's limits hash.  Before each ``produce.lua`` call of a partition in such a group the
producer takes the call's messages and bytes from the group's publish window
(``group_publish.lua``, in the group's own slot, so it holds across partitions and producers,
also on a Redis Cluster).  A refusal reads like the partition's own publish rate
(``PublishRateLimited <ms>``): the producer waits and sends again, slowed, not failed.  The
limits hash is read again at most once a second per partition, so a group attached while a
producer runs limits it within a second; partitions in no group cost that read only.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from sluice.protocol import keys
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import GROUP_PUBLISH

REFRESH_SECONDS = 1.0
FIELDS = ("resourceGroupId", "resourceGroupPublishInMsg", "resourceGroupPublishInByte")


def call_size(args: list[Any]) -> tuple[int, int]:
    """Messages (a batch entry counts its ``n``) and payload bytes (``d``) of a
    ``produce.lua`` call's ARGV (the head, the entry count, then per entry its field count and
    fields)."""
    messages = size = 0
    pos = 3
    for _ in range(int(args[2])):
        count = int(args[pos])
        fields = args[pos + 1 : pos + 1 + 2 * count]
        entry = 1
        for name, value in zip(fields[::2], fields[1::2], strict=True):
            if name == "d":
                size += len(value)
            elif name == "n":
                entry = int(value)
        messages += entry
        pos += 1 + 2 * count
    return messages, size


class GroupPublishGate:
    """The group publish limits of a producer's partitions, read now and then."""

    def __init__(self, redis: Any, scripts: dict[str, Any]) -> None:
        self._redis = redis
        self._scripts = scripts
        self._lock = threading.Lock()
        self._known: dict[str, tuple[float, int, int, int]] = {}

    def _limits(self, partition: TopicName) -> tuple[int, int, int]:
        now = time.monotonic()
        with self._lock:
            known = self._known.get(partition.full)
        if known is not None and now - known[0] < REFRESH_SECONDS:
            return known[1], known[2], known[3]
        raw = self._redis.hmget(keys.limits(partition), *FIELDS)
        group, msgs, size = (int(value or 0) for value in raw)
        with self._lock:
            self._known[partition.full] = (now, group, msgs, size)
        return group, msgs, size

    def take(self, partition: TopicName, args: list[Any]) -> None:
        """Take a ``produce.lua`` call's entries from the group's window; raises the script's
        ``PublishRateLimited`` refusal (a ``ResponseError``) when the window is full."""
        group, rate_msgs, rate_bytes = self._limits(partition)
        if not group or (rate_msgs <= 0 and rate_bytes <= 0):
            return
        messages, size = call_size(args)
        script_keys, args = GROUP_PUBLISH.call(group, messages, size, rate_msgs, rate_bytes)
        self._scripts[GROUP_PUBLISH.name](keys=script_keys, args=args)
