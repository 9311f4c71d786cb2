"""Key_Shared subscriptions on the client side: pulsar-client's ``ConsumerKeySharedPolicy``.

A Key_Shared subscription hands every message with the same key (its ordering key if set,
else its partition key) to the same consumer, in order; ``dispatch.lua`` does the routing.
A key's *slot* is its murmur3_32 hash modulo 65536 (``key_slot``, as Pulsar's
``Murmur3_32Hash`` of the key modulo 65536).  With ``KeySharedMode.AutoSplit`` (the default)
the slots are shared out by consistent hashing of the consumers; with ``KeySharedMode.Sticky``
each consumer declares its ranges of slots (inclusive pairs within 0..65535), and a consumer
whose ranges overlap another's is refused (``ConsumerBusy``), as is one whose mode differs from
the subscription's other consumers (``SubscriptionBusy``).  ``allow_out_of_order_delivery``
lets a consumer that joins take its keys at once, without waiting for the messages of those
keys still out with other consumers (Pulsar's option of that name).
"""

from __future__ import annotations

import itertools
from enum import Enum

import mmh3

from sluice.errors import InvalidConfiguration

SLOTS = 65536


class KeySharedMode(Enum):
    """How a Key_Shared subscription shares out the key slots."""

    AutoSplit = "AUTO_SPLIT"
    Sticky = "STICKY"


class ConsumerKeySharedPolicy:
    """A Key_Shared consumer's mode, sticky ranges and ordering option (pulsar-client's)."""

    def __init__(
        self,
        key_shared_mode: KeySharedMode = KeySharedMode.AutoSplit,
        allow_out_of_order_delivery: bool = False,
        sticky_ranges: list[tuple[int, int]] | None = None,
    ) -> None:
        mode = _mode(key_shared_mode)
        ranges = [(int(start), int(end)) for start, end in sticky_ranges or []]
        if mode is KeySharedMode.Sticky and not ranges:
            raise InvalidConfiguration("a Sticky key-shared policy needs sticky_ranges")
        if mode is KeySharedMode.AutoSplit and ranges:
            raise InvalidConfiguration("sticky_ranges are for the Sticky key-shared mode")
        for start, end in ranges:
            if not 0 <= start <= end < SLOTS:
                raise InvalidConfiguration(
                    f"sticky range ({start}, {end}) must be within 0..{SLOTS - 1}, start <= end"
                )
        ordered = sorted(ranges)
        for (_, end), (start, _) in itertools.pairwise(ordered):
            if start <= end:
                raise InvalidConfiguration("sticky ranges must not overlap")
        self._mode = mode
        self._out_of_order = bool(allow_out_of_order_delivery)
        self._ranges = ordered

    def key_shared_mode(self) -> KeySharedMode:
        """AutoSplit or Sticky."""
        return self._mode

    def allow_out_of_order_delivery(self) -> bool:
        """True when a joining consumer need not wait for its keys' earlier messages."""
        return self._out_of_order

    def sticky_ranges(self) -> list[tuple[int, int]]:
        """The declared slot ranges (inclusive), sorted."""
        return list(self._ranges)

    def info(self) -> dict[str, object]:
        """What the consumer registers (its info JSON), read by ``subscribe.lua`` and
        ``dispatch.lua``."""
        info: dict[str, object] = {"keySharedMode": self._mode.value}
        if self._ranges:
            info["ranges"] = [list(r) for r in self._ranges]
        if self._out_of_order:
            info["outOfOrder"] = True
        return info


def _mode(value: object) -> KeySharedMode:
    if isinstance(value, KeySharedMode):
        return value
    # pulsar-client's own enum members pass by name (AutoSplit, Sticky).
    name = getattr(value, "name", value)
    for mode in KeySharedMode:
        if name in (mode.name, mode.value):
            return mode
    raise InvalidConfiguration(f"unknown key_shared_mode {value!r}")


def key_slot(key: str | bytes) -> int:
    """The slot of a message key: murmur3_32 of its UTF-8 bytes, modulo 65536."""
    data = key.encode() if isinstance(key, str) else key
    return mmh3.hash(data, 0, signed=False) % SLOTS
