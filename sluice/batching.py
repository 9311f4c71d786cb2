"""How a batching producer groups its messages: pulsar-client's ``BatchingType``.

``BatchingType.Default`` puts the messages of one partition in one batch, whatever their keys.
``BatchingType.KeyBased`` keeps one batch per key inside the partition's container (the key
being the message's ordering key if it has one, else its partition key; a message with
neither goes in the batch of the empty key), so each stored entry holds the messages of one
key only, which is what Key_Shared subscriptions need: a Key_Shared dispatcher routes an entry
by its first message's key.  As in pulsar-client's key-based container, the limits
(``batching_max_messages``, ``batching_max_allowed_size_in_bytes``,
``batching_max_publish_delay_ms``) count the container as a whole, and when one is reached
every key's batch goes out, one entry each, in the order of their first messages' sequence
ids; a key's messages keep their order within its batch.
"""

from __future__ import annotations

from enum import Enum
from typing import Generic, Protocol, TypeVar

from sluice.errors import InvalidConfiguration


class BatchingType(Enum):
    """pulsar-client's batching types (``pulsar.BatchingType``)."""

    Default = 0
    KeyBased = 1


def as_batching_type(value: object) -> BatchingType:
    """``value`` as a ``BatchingType``: a member, pulsar-client's own member or its name;
    anything else raises ``InvalidConfiguration``."""
    if isinstance(value, BatchingType):
        return value
    # pulsar-client's own enum members (pulsar.BatchingType.KeyBased) pass by name.
    name = getattr(value, "name", value)
    if isinstance(name, str) and name in BatchingType.__members__:
        return BatchingType[name]
    raise InvalidConfiguration(
        f"batching_type must be BatchingType.Default or BatchingType.KeyBased, not {value!r}"
    )


class _Sequenced(Protocol):
    sequence: int


M = TypeVar("M", bound=_Sequenced)


class BatchContainer(Generic[M]):
    """The messages waiting to be batched on one partition, grouped by key when key-based.

    ``count``, ``size`` and ``started`` (monotonic time of the first message) are the
    container's as a whole; ``take`` empties it into the entries to write."""

    def __init__(self, kind: BatchingType) -> None:
        self.key_based = kind is BatchingType.KeyBased
        self._groups: dict[str, list[M]] = {}
        self.count = 0
        self.size = 0
        self.started = 0.0

    def __bool__(self) -> bool:
        return self.count > 0

    def group_key(self, key: str | None, ordering_key: str | None) -> str:
        """The batch a message joins: its ordering key, else its partition key, else the
        empty key (key-based); the one batch of the partition (default)."""
        if not self.key_based:
            return ""
        return ordering_key or key or ""

    def group(self, group_key: str) -> list[M]:
        """The messages waiting in ``group_key``'s batch (empty when none)."""
        return self._groups.get(group_key, [])

    def add(self, group_key: str, message: M, size: int, now: float) -> None:
        if not self.count:
            self.started = now
        self._groups.setdefault(group_key, []).append(message)
        self.count += 1
        self.size += size

    def take(self) -> list[list[M]]:
        """Every batch, one entry each, ordered by their first messages' sequence ids; the
        container is left empty."""
        batches = sorted(self._groups.values(), key=lambda batch: batch[0].sequence)
        self._groups, self.count, self.size = {}, 0, 0
        return batches
