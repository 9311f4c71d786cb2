"""The BROKER limiter: an exact fixed-window quota per worker process, with reservations.

The TOPIC and SUBSCRIPTION limiters live in Redis and are checked and charged inside
``dispatch.lua`` (one partition, one slot, one atomic call).  The BROKER limiter is shared by
every partition a worker process dispatches, as in Pulsar, so it lives here.  A
``QuotaBucket`` (``models.quota_bucket``, pure, so the limit simulator drives the same code)
holds one dimension (messages or bytes): ``permits`` per ``period`` seconds.
It starts full; each period boundary adds ``permits`` back but never above ``permits`` (unused
quota is not saved up), and a negative balance left by over-use is paid back from the next
periods (Pulsar's classic limiter, PR #8611).  A period starts with the first use after the
previous one ended; under steady load the periods stay back to back.  The rules are the same
as the Redis-side limiters' (see the header of ``dispatch.lua``).

Pulsar over-delivers because dispatchers check permits, read, and deduct afterwards; several
dispatchers sharing a limiter all see the same permits.  Here a dispatcher *reserves* its
budget before it calls Redis and settles (refunds or pays the overshoot of at most one entry)
when the call returns, so concurrent dispatchers can never oversell the shared limiter.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from models.quota_bucket import QuotaBucket
from models.resolution import Limiter, ResolvedRate
from sluice.waits import wait_event

UNLIMITED = -1
__all__ = ["UNLIMITED", "Budget", "QuotaBucket", "RateLimiter"]


@dataclass(slots=True)
class Budget:
    """What a dispatcher may hand out in one call: None = no limit in that dimension."""

    messages: int | None
    bytes: int | None

    @property
    def exhausted(self) -> bool:
        """True when a limited dimension has nothing left."""
        return (self.messages is not None and self.messages <= 0) or (
            self.bytes is not None and self.bytes <= 0
        )


class RateLimiter:
    """One BROKER, TOPIC or SUBSCRIPTION limiter: a message and a byte bucket.

    ``throttled_msg_events`` / ``throttled_byte_events`` count the dispatch attempts this
    limiter cut short (Pulsar's ``dispatchThrottled*EventsBy*Limit``).
    """

    def __init__(self, kind: Limiter, now: float, resolved: ResolvedRate | None = None) -> None:
        self.kind = kind
        self.msg = QuotaBucket(UNLIMITED, 1.0, now)
        self.byte = QuotaBucket(UNLIMITED, 1.0, now)
        self.resolved: ResolvedRate | None = None
        self.throttled_msg_events = 0
        self.throttled_byte_events = 0
        self._reserved_msgs = 0
        self._reserved_bytes = 0
        self._changed = asyncio.Event()
        if resolved is not None:
            self.apply(resolved, now)

    @property
    def enabled(self) -> bool:
        """True when at least one dimension limits."""
        return self.msg.limited or self.byte.limited

    def apply(self, resolved: ResolvedRate, now: float) -> None:
        """Take a new resolved value, in place (no reconnect, no lost accounting)."""
        self.resolved = resolved
        period = float(resolved.period)
        self.msg.update(resolved.permits_msg, period, now)
        self.byte.update(resolved.permits_byte, period, now)
        self._notify()

    def available(self, now: float) -> Budget:
        """What is left in the current period (after outstanding reservations)."""
        self.msg.refresh(now)
        self.byte.refresh(now)
        return Budget(
            self.msg.available if self.msg.limited else None,
            self.byte.available if self.byte.limited else None,
        )

    def reserve(self, messages: int | None, size: int | None, now: float) -> None:
        """Take a budget out of the quota before handing anything out."""
        if self.msg.limited and messages is not None:
            self.msg.take(messages, now)
            self._reserved_msgs += messages
        if self.byte.limited and size is not None:
            self.byte.take(size, now)
            self._reserved_bytes += size

    def settle(
        self, reserved_msgs: int | None, reserved_bytes: int | None, messages: int, size: int
    ) -> None:
        """Replace a reservation by what was really handed out (refund or pay the rest)."""
        if self.msg.limited and reserved_msgs is not None:
            self.msg.available += reserved_msgs - messages
            self._reserved_msgs -= reserved_msgs
        elif self.msg.limited:
            self.msg.available -= messages
        if self.byte.limited and reserved_bytes is not None:
            self.byte.available += reserved_bytes - size
            self._reserved_bytes -= reserved_bytes
        elif self.byte.limited:
            self.byte.available -= size
        self._notify()

    def charge(self, messages: int, size: int) -> None:
        """Count dispatches that were not reserved (e.g. an unthrottled catch-up)."""
        self.settle(None, None, messages, size)

    @property
    def has_reservations(self) -> bool:
        """True while another dispatcher holds part of the quota."""
        return self._reserved_msgs > 0 or self._reserved_bytes > 0

    def next_refill(self) -> float:
        """The earliest moment a limited dimension gets new quota."""
        times = [b.next_refill() for b in (self.msg, self.byte) if b.limited]
        return min(times) if times else 0.0

    async def wait_changed(self, timeout: float) -> None:
        """Wait until a reservation settles or the limit changes (or ``timeout``)."""
        await wait_event(self._changed, timeout)

    def _notify(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()
