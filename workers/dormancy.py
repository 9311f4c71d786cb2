"""Dormant partitions: owned, quiet, and watched only by events and a few timers.

Most partitions of a multi-tenant deployment are quiet most of the time, so a worker keeps a
``PartitionRunner`` (dispatchers, limiters, stats) only for partitions with something to do.
A partition whose stats have not changed for ``worker_dormant_after_seconds`` (7 s: longer
than the rate window, so the final document's rates read 0) and whose every dispatcher is
parked where only a client can give it work (no data, no permits, max unacked reached, no
active consumer; nothing scheduled for redelivery) goes dormant:

1. the worker sets ``sl:{P}:dormant``;
2. it reads the partition once more; if anything changed since the last read, the partition
   stays awake (whatever changed it came before the flag, or deleted it and woke the worker);
3. it writes the final stats document without expiry (the admin service keeps serving it)
   and replaces the flag's value with the time of its next check, only if the flag is still
   there (``SET ... XX``); then it stops the runner.

Every script a client calls (produce, flow, ack, nack, subscribe, unsubscribe, release) and
every cursor operation of the admin service deletes the flag and, when it was there, wakes the
worker, which starts the runner again (``Worker.wake_partition``), or, when the partition has
subscriptions and an empty log (a consumer connected, left or gave permits: nothing to
deliver), sets the flag again and only reads it, its runner never started
(``workers.glance``).  So the flag's presence
means that nothing happened to the partition since it went dormant, and any worker that takes
the partition over (failover, rebalance, restart) reads the flags of its new partitions and
starts runners only where a flag is missing.

A dormant partition costs no Redis call and no CPU, except what is due at a known time:

* consumers connected but not receiving must still be released when they stop heartbeating:
  the partition is checked at its oldest heartbeat plus the consumer timeout (one ``ZRANGE``
  per subscription with consumers), and woken only when one is dead;
* a message TTL: woken when the oldest undelivered entry expires;
* trimming: woken once after the retention grace period when it went dormant holding
  acknowledged entries.

Reports keep seeing a dormant partition's backlog: the worker repeats its last snapshot rows
of subscriptions with a backlog (no Redis read) at every stats interval.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

from models.stats import StatsSnapshot

CONSUMER_CHECK_MARGIN_MS = 100


@dataclass(slots=True)
class Timer:
    """When a dormant partition is looked at again: at ``due_ms``, either its consumers'
    heartbeats are checked (``watch``: the subscriptions that have consumers), or, at
    ``wake_ms`` (0: never), it is woken."""

    due_ms: int
    wake_ms: int = 0
    watch: tuple[str, ...] = ()

    @classmethod
    def of(cls, check_ms: int, wake_ms: int, watch: tuple[str, ...]) -> Timer | None:
        """A timer for a heartbeat check at ``check_ms`` and a wake-up at ``wake_ms`` (each
        0 when not needed); None when neither is."""
        dues = [t for t in (check_ms, wake_ms) if t]
        if not dues:
            return None
        return cls(min(dues), wake_ms, watch if check_ms else ())


class Dormancy:
    """The dormant partitions of one worker, their timers and their report rows."""

    def __init__(self) -> None:
        self.partitions: set[str] = set()
        self._heap: list[tuple[int, str]] = []
        self.timers: dict[str, Timer] = {}
        self.rows: dict[str, list[StatsSnapshot]] = {}  # subscriptions with a backlog
        self.gone_dormant = 0  # counters for /metrics
        self.woken = 0

    def __len__(self) -> int:
        return len(self.partitions)

    def __contains__(self, partition: str) -> bool:
        return partition in self.partitions

    def add(
        self, partition: str, timer: Timer | None = None, rows: list[StatsSnapshot] | None = None
    ) -> None:
        """``partition`` is dormant now, with its next check and its report rows."""
        self.partitions.add(partition)
        self.gone_dormant += 1
        self.schedule(partition, timer)
        if rows:
            self.rows[partition] = rows

    def schedule(self, partition: str, timer: Timer | None) -> None:
        """Replace the partition's timer (None: no timer)."""
        if timer is None:
            self.timers.pop(partition, None)
            return
        self.timers[partition] = timer
        heapq.heappush(self._heap, (timer.due_ms, partition))

    def keep_rows(self, partition: str, rows: list[StatsSnapshot]) -> None:
        """Replace the report rows of a dormant partition (read again while it sleeps)."""
        if rows:
            self.rows[partition] = rows
        else:
            self.rows.pop(partition, None)

    def remove(self, partition: str) -> bool:
        """The partition is awake again (or no longer owned); True when it was dormant."""
        if partition not in self.partitions:
            return False
        self.partitions.discard(partition)
        self.timers.pop(partition, None)
        self.rows.pop(partition, None)
        return True

    def retain(self, owned: Iterable[str]) -> list[str]:
        """Forget dormant partitions not in ``owned``; the ones forgotten."""
        keep = set(owned)
        gone = [p for p in self.partitions if p not in keep]
        for partition in gone:
            self.remove(partition)
        return gone

    def due(self, now_ms: int) -> list[tuple[str, Timer]]:
        """Timers that are due, removed from the schedule."""
        out = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            due_ms, partition = heapq.heappop(heap)
            timer = self.timers.get(partition)
            if timer is None or timer.due_ms != due_ms:
                continue  # replaced or cancelled
            del self.timers[partition]
            out.append((partition, timer))
        if len(heap) > 2 * len(self.timers) + 64:
            self._heap = [(t.due_ms, p) for p, t in self.timers.items()]
            heapq.heapify(self._heap)
        return out

    def report_rows(self, interval_ms: int) -> list[StatsSnapshot]:
        """The dormant partitions' backlog rows for one stats interval: nothing moved."""
        ts = int(time.time() * 1000)
        out = []
        for rows in self.rows.values():
            for row in rows:
                out.append(
                    replace(
                        row,
                        ts=ts,
                        interval_ms=interval_ms,
                        allowed_msgs=_allowed(row.limit_msg_per_s, interval_ms),
                        allowed_bytes=_allowed(row.limit_byte_per_s, interval_ms),
                    )
                )
        return out


def _allowed(rate: float | None, interval_ms: int) -> float | None:
    if rate is None:
        return None
    return rate * interval_ms / 1000
