"""The cyclic garbage collector tuned for a worker process.

A worker serving thousands of slow subscriptions holds many objects that live about a period
(a second): each period's ring of the alarm clocks, the stats samples, the calls in flight.
With the interpreter's default thresholds (a young collection every 700 net allocations, the
middle one every 10 of those) every such object outlives two young collections and is
promoted to the oldest generation, which then grows by a quarter of its size every few
seconds and is collected whole: a pause of hundreds of milliseconds over the worker's whole
heap, during which no dispatcher wakes for its quota's renewal (a renewal served that late
restarts the period, and the time lost is the subscription's).  With a young collection every
``YOUNG`` net allocations and the middle one every ``MIDDLE`` of those, such objects die in
the middle generation and the oldest one grows only with what really lives on; a young
collection costs a few milliseconds.

Some still reach the oldest generation, and its collection walks every object the worker
holds: at 10,000 subscriptions about a second (py-spy: 99 consecutive samples at 100 Hz in
``gc_collect_main``), long enough for every renewal due meanwhile to restart its period.  So
once the worker's subscriptions stop changing, ``HeapSettler`` collects the whole heap once
and freezes what survives (``gc.freeze``: out of every later collection); later full
collections walk only what was allocated since, and the pause comes once per settled change
of the subscription set instead of every few seconds.  When the set has shrunk by a tenth
(dispatchers stopped), the frozen objects are handed back first, so the garbage among them
(the stopped dispatchers' reference cycles) is collected then.  When it has grown by a tenth
(partitions adopted, subscriptions made), nothing frozen has become garbage for that reason:
the young generation is collected and what lives is frozen with the rest, without the full
collection (so only when the count went down at no tick since the last settling: churn that
nets out as growth still collects whole).  That collection is a pause of 270-730 ms at 10,000
subscriptions, during which every renewal due restarts its period late, and it found only
350-460 unreachable objects in the runs measured (BENCHMARKS.md); those stay until a
settling after a fall.
"""

from __future__ import annotations

import gc
import time

YOUNG = 5_000  # net allocations of tracked objects between two young collections
MIDDLE = 100  # young collections between two of the middle generation


_tuned = False  # this process is a worker's (``sluice worker``): its collector is ours


def tune_collector() -> None:
    """Set the worker's collection thresholds (the oldest generation's is kept), and let the
    heap be settled: only the ``sluice worker`` process calls it."""
    global _tuned
    gc.set_threshold(YOUNG, MIDDLE, gc.get_threshold()[2])
    _tuned = True


SETTLE_MIN_CHANGE = 500  # dispatchers added or gone before the heap is settled again, at least
SETTLE_SHARE = 0.1  # ... or this share of those the last settling saw, if more
SETTLE_QUIET_SECONDS = 2.0  # the count unchanged this long first


class HeapSettler:
    """Settles the heap (a collection, full when the count went down, then ``gc.freeze``) once
    the number of dispatchers has moved by ``SETTLE_MIN_CHANGE`` or a tenth since the last
    time and then stayed put for ``SETTLE_QUIET_SECONDS``.  Only in a process whose collector
    was tuned (``enabled`` by default there alone): a worker run inside another program (the
    tests' in-process workers) leaves that program's collector alone."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = _tuned if enabled is None else enabled
        self.settled_at_count = 0  # dispatchers at the last settling
        self.settlings = 0
        self._count = 0
        self._since = 0.0
        self._fell = False  # the count went down at some observation since the last settling

    def due(self, count: int, now: float) -> bool:
        """Whether the heap is to be settled now, with ``count`` dispatchers."""
        if count != self._count:
            self._fell = self._fell or count < self._count
            self._count, self._since = count, now
            return False
        moved = abs(count - self.settled_at_count)
        wanted = max(SETTLE_MIN_CHANGE, SETTLE_SHARE * self.settled_at_count)
        return moved >= wanted and now - self._since >= SETTLE_QUIET_SECONDS

    def observe(self, count: int, now: float | None = None) -> bool:
        """Settle the heap if due (see ``due``); True when it did."""
        if not self.enabled or not self.due(count, time.monotonic() if now is None else now):
            return False
        if not self._fell:
            gc.collect(0)  # only grown: what is older was looked at on its way there
        else:
            gc.unfreeze()  # what an earlier settling froze: its garbage is collected now
            gc.collect()
        gc.freeze()
        self._fell = False
        self.settled_at_count = count
        self.settlings += 1
        return True
