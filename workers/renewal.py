"""Quota renewals served by the alarm clock itself: one script call per partition and window.

Thousands of slow subscriptions (one message per period each) spend most of their worker's CPU
waking their dispatcher tasks: each period every dispatcher wakes at its SUBSCRIPTION quota's
renewal, makes one ``dispatch.lua`` call that hands out its quota, and sleeps again.
``RenewalClock`` rings such sleepers (``Dispatcher.sleeps_for_renewal``) without waking them:
when a window's timer fires it makes the calls of its sleepers, whatever their partitions, in
runs of ``dispatch_many.lua`` of at most ``MAX_MERGED`` calls (``PackedScript.call_many``:
each call exactly as the dispatcher would make it, with the limits in force when it is made,
counted by the dispatch gate), and
when the reply comes notes each outcome in its dispatcher's books.  A dispatcher whose call
ended again with its SUBSCRIPTION quota alone spent, as in the period before, stays asleep
and is rung again at its next renewal; any other outcome (more to hand out, no data, another
limiter, an error) wakes it with that outcome, which its next step handles as its own call's.
A dispatcher woken meanwhile (a wake-up, a changed limit) makes its own next call once the
renewal call for it has been answered.

The clock serves only dispatchers whose calls go to one Redis server (``renews_alone``: not
on a Redis Cluster), where one script run may name the keys of any partitions, so the
renewals of one window share runs across partitions: with thousands of slow subscriptions
spread over hundreds of partitions a window holds a handful of renewals of each partition,
and a script run's own cost (the call, its KEYS and ARGV tables, the reply) is paid once for
``MAX_MERGED`` of them instead of once or twice per partition.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING

from sluice.protocol.frames import DispatchResult
from workers.alarms import AlarmClock
from workers.scriptcall import MAX_MERGED

if TYPE_CHECKING:
    from workers.dispatcher import Dispatcher


class RenewalClock(AlarmClock):
    """An alarm clock whose sleepers are dispatchers waiting for their quota's renewal."""

    def _ring(self, key: int) -> None:
        # One server per script (no cluster here): the calls of all partitions may share runs.
        groups: dict[object, list[tuple[Dispatcher, int]]] = {}
        for sleeper, alarm in self._pop(key):
            dispatcher: Dispatcher = sleeper  # type: ignore[assignment]
            if dispatcher.alarm != alarm:
                continue  # woke for another reason since
            if dispatcher.wake.is_set() or not dispatcher.renews_alone():
                dispatcher.rang = alarm
                dispatcher.wake.set()
                continue
            groups.setdefault(dispatcher.shared.script, []).append((dispatcher, alarm))
        for members in groups.values():
            for start in range(0, len(members), MAX_MERGED):
                self._renew(members[start : start + MAX_MERGED])

    def _renew(self, members: list[tuple[Dispatcher, int]]) -> None:
        """One call of ``dispatch_many.lua`` for these sleepers (of any partitions)."""
        shared = members[0][0].shared
        calls = [dispatcher.renewal_call() for dispatcher, _alarm in members]
        generation = shared.gate.enter()
        future = shared.script.call_many(calls, functools.partial(shared.gate.leave, generation))
        for dispatcher, _alarm in members:
            dispatcher.in_call = True
            dispatcher.renewing = future
        future.add_done_callback(functools.partial(self._answered, members))

    def _answered(self, members: list[tuple[Dispatcher, int]], future: asyncio.Future) -> None:
        if future.cancelled():
            outcomes: list = [asyncio.CancelledError()] * len(members)
        elif future.exception() is not None:
            outcomes = [future.exception()] * len(members)
        else:
            outcomes = future.result()
        for (dispatcher, alarm), outcome in zip(members, outcomes, strict=True):
            dispatcher.in_call = False
            dispatcher.renewing = None
            self._take(dispatcher, alarm, outcome)

    def _take(self, dispatcher: Dispatcher, alarm: int, outcome: object) -> None:
        """Note one call's outcome; ring its dispatcher again at its next renewal, or wake
        it with the outcome."""
        if isinstance(outcome, BaseException):
            if dispatcher.alarm == alarm:  # else its own next call meets the same error
                dispatcher.renewed = outcome
                dispatcher.wake.set()
            return
        assert isinstance(outcome, list)
        result = DispatchResult.from_reply(outcome)
        dispatcher.note(result, (None, None))
        if dispatcher.alarm != alarm:
            return  # woken meanwhile: its own step follows
        window = dispatcher.renewal_window(result)
        if window > 1 and not dispatcher.wake.is_set() and dispatcher.renews_alone():
            dispatcher.count_renewal_wait()
            when = asyncio.get_running_loop().time() + result.wait_ms / 1000
            self.ring_at(when, dispatcher, window)
            return
        dispatcher.renewed = result
        dispatcher.wake.set()
