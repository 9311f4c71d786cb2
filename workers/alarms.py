"""One timer per millisecond for thousands of sleepers.

Every throttled dispatcher sleeps until its limiter's next period, thousands of them a second
on a busy worker, and many wake in the same millisecond.  ``AlarmClock`` keeps one event-loop
timer per millisecond that has sleepers and, when it fires, wakes each of them by setting its
``wake`` event, unless that sleeper has woken for another reason since (its ``alarm``
sequence number moved on).  A sleeper that may wake somewhat late asks for a coarser
timer (``window_ms``): the sleepers of one window wake in the same turn of the event loop,
where the dispatch calls of a partition's subscriptions run in one script call.

A sleeper waits about a period, so whatever its alarm allocates outlives the collector's young
generation; the sleepers of a millisecond are kept in one flat list (sleeper, alarm number,
sleeper, ...) rather than as a pair each, so ten thousand sleepers a second leave no ten
thousand pairs in the young generation for each young collection to walk.
"""

from __future__ import annotations

import asyncio
import math
from typing import Protocol


class Sleeper(Protocol):
    """What the alarm clock wakes: an event, and the number of its current sleep."""

    wake: asyncio.Event
    alarm: int
    rang: int


class AlarmClock:
    """Wakes sleepers at (just after) a loop time, timers shared per millisecond."""

    def __init__(self) -> None:
        # Loop time in ms -> [sleeper, its alarm number, sleeper, ...]
        self._due: dict[int, list] = {}

    def ring_at(self, when: float, sleeper: Sleeper, window_ms: int = 1) -> None:
        """Wake ``sleeper`` at loop time ``when``, rounded up to the millisecond, or to the end
        of its window of ``window_ms`` (windows laid back to back from loop time 0, so a
        sleeper due at the same point of every period is always rounded up by as much),
        unless its current sleep ends before."""
        key = math.ceil(when * 1000 / window_ms) * window_ms
        waiting = self._due.get(key)
        if waiting is None:
            waiting = self._due[key] = []
            asyncio.get_running_loop().call_at(key / 1000, self._ring, key)
        waiting += (sleeper, sleeper.alarm)

    def _pop(self, key: int) -> zip:
        """The (sleeper, alarm number) pairs due at ``key``, taken off the clock."""
        flat = iter(self._due.pop(key, ()))
        return zip(flat, flat, strict=False)  # the list holds pairs: even by construction

    def _ring(self, key: int) -> None:
        for sleeper, alarm in self._pop(key):
            if sleeper.alarm == alarm:
                sleeper.rang = alarm
                sleeper.wake.set()
