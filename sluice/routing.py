"""Partition routing as Pulsar does it: murmur3 of the key, else round robin."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from enum import Enum

import mmh3


class PartitionsRoutingMode(Enum):
    """How a producer picks a partition for a message without a key."""

    RoundRobinDistribution = "round_robin"
    UseSinglePartition = "single"
    CustomPartition = "custom"


def key_partition(key: str, partitions: int) -> int:
    """Pulsar's Murmur3_32Hash routing: (murmur3_32(key) & 0x7fffffff) % partitions."""
    return (mmh3.hash(key.encode(), 0, signed=True) & 0x7FFFFFFF) % partitions


class Router:
    """Chooses the partition of each message."""

    def __init__(
        self,
        partitions: int,
        mode: PartitionsRoutingMode,
        custom: Callable[[object, int], int] | None = None,
    ) -> None:
        self.partitions = partitions
        self.mode = mode
        self.custom = custom
        self._single = random.randrange(partitions) if partitions else 0
        self._round = itertools.count(random.randrange(partitions) if partitions else 0)

    def choose(self, key: str | None, message: object = None) -> int:
        """The partition index for a message (-1 for a non-partitioned topic)."""
        if self.partitions == 0:
            return -1
        if self.mode is PartitionsRoutingMode.CustomPartition and self.custom is not None:
            return self.custom(message, self.partitions) % self.partitions
        if key:
            return key_partition(key, self.partitions)
        if self.mode is PartitionsRoutingMode.UseSinglePartition:
            return self._single
        return next(self._round) % self.partitions
