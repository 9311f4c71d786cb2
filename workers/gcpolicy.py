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
"""

from __future__ import annotations

import gc

YOUNG = 5_000  # net allocations of tracked objects between two young collections
MIDDLE = 100  # young collections between two of the middle generation


def tune_collector() -> None:
    """Set the worker's collection thresholds (the oldest generation's is kept)."""
    gc.set_threshold(YOUNG, MIDDLE, gc.get_threshold()[2])
