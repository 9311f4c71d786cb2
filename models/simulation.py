"""The limit simulator: recorded traffic replayed through the fixed-window limiter.

Pure.  ``simulate`` takes one subscription's recorded intervals (what was published, what was
delivered, the backlog), a proposed limit (message permits per period, per partition) and the
consumers' capacity, and steps through time in slices of 1/100 of a period
(``default_step``): published messages arrive evenly over their interval, a ``QuotaBucket``
(``models.quota_bucket``: the class the workers' BROKER limiter is, with the rules of
``dispatch.lua``'s limiters) hands out at most its permits per period, and the consumers
take at most ``capacity`` msg/s.  A slice in which messages waited but the limiter had
nothing left counts as throttled.

Partitions: a limit applies to each partition, and recorded traffic is per topic, so the
simulator runs one bucket of ``permits x partitions`` (exact when the partitions share the
traffic evenly, as round-robin producers make them).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from models.quota_bucket import QuotaBucket


@dataclass(frozen=True, slots=True)
class RecordedInterval:
    """One stats interval of a subscription, all partitions summed."""

    end: float  # epoch seconds
    seconds: float
    published: int
    delivered: int
    backlog: int  # at the end
    throttled: bool
    partitions: int = 1
    waiting: int = 0  # at the end: the backlog less what consumers hold unacknowledged
    consumers: int = 0  # at the end


@dataclass(frozen=True, slots=True)
class SimulatedInterval:
    """What the interval was and what it would have been under the proposed limit."""

    end: float
    seconds: float
    published: int
    delivered: int
    backlog: int
    simulated_delivered: int
    simulated_backlog: int
    simulated_throttled_seconds: float


@dataclass(frozen=True, slots=True)
class Simulation:
    """The replay of one subscription: per interval and totals."""

    intervals: list[SimulatedInterval]
    initial_backlog: int

    @property
    def delivered(self) -> int:
        return sum(i.delivered for i in self.intervals)

    @property
    def simulated_delivered(self) -> int:
        return sum(i.simulated_delivered for i in self.intervals)

    @property
    def simulated_throttled_seconds(self) -> float:
        return sum(i.simulated_throttled_seconds for i in self.intervals)


def observed_capacity(recorded: Sequence[RecordedInterval]) -> float | None:
    """The consumers' observed capacity (as the advice report measures it): the highest
    acknowledgement rate (published less the backlog's growth) of an interval in which
    messages waited, consumers were connected and no limiter throttled; None if none was."""
    best: float | None = None
    for before, interval in itertools.pairwise(recorded):
        if interval.throttled or interval.consumers <= 0 or interval.waiting <= 0:
            continue
        acked = interval.published - (interval.backlog - before.backlog)
        rate = acked / interval.seconds
        best = rate if best is None else max(best, rate)
    return best


def default_step(recorded: Sequence[RecordedInterval], period: float) -> float:
    """The slice: 1/100 of a period, longer for long windows (at most 2 million slices)."""
    span = sum(i.seconds for i in recorded)
    return max(period / 100, span / 2_000_000)


def initial_backlog(first: RecordedInterval) -> int:
    """What waited undelivered at the start of the first interval: what waited at its end,
    less what came in, plus what went out (at least 0)."""
    return max(0, first.waiting - first.published + first.delivered)


def arrival_seconds(recorded: Sequence[RecordedInterval], index: int) -> float:
    """Over how much of its interval an interval's messages arrive, at its end.  All of it,
    except where traffic starts (the first interval, or one after a silent one) and the next
    interval is busier: there the messages are taken to arrive at the next interval's rate,
    at the end (a producer that started late in the interval)."""
    interval = recorded[index]
    starts = index == 0 or recorded[index - 1].published == 0
    if not starts or index + 1 >= len(recorded) or interval.published <= 0:
        return interval.seconds
    following = recorded[index + 1]
    rate = following.published / following.seconds
    if rate * interval.seconds <= interval.published:
        return interval.seconds
    return interval.published / rate


def simulate(
    recorded: Sequence[RecordedInterval],
    *,
    permits: int,
    period: float = 1.0,
    partitions: int = 1,
    capacity: float | None = None,
    step: float | None = None,
) -> Simulation:
    """Replay ``recorded`` under ``permits`` messages per ``period`` per partition (<= 0: no
    limit), the consumers taking at most ``capacity`` msg/s (None: as fast as they come)."""
    if not recorded:
        return Simulation([], 0)
    step = step or default_step(recorded, period)
    start = recorded[0].end - recorded[0].seconds
    bucket = QuotaBucket(permits * max(partitions, 1) if permits > 0 else -1, period, start)
    backlog = float(initial_backlog(recorded[0]))
    waiting = backlog  # not delivered yet (the backlog less what is in the consumers' hands)
    consumer_credit = 0.0
    out: list[SimulatedInterval] = []
    now = start
    for index, interval in enumerate(recorded):
        begin = interval.end - interval.seconds
        now = max(now, begin)
        steps = max(1, math.ceil(interval.seconds / step - 1e-9))
        dt = interval.seconds / steps
        quiet = interval.seconds - arrival_seconds(recorded, index)  # before the first arrival
        arriving = interval.published / max(1, steps - math.floor(quiet / dt + 1e-9))
        delivered = 0
        throttled = 0.0
        arrived = 0.0
        for slice_index in range(steps):
            if slice_index * dt >= quiet - 1e-9:
                arrived += arriving
            whole = math.floor(arrived + 1e-9)
            arrived -= whole
            waiting += whole
            bucket.refresh(now)
            can = math.floor(waiting)
            if capacity is not None:
                consumer_credit = min(consumer_credit + capacity * dt, max(capacity * period, 1))
                can = min(can, math.floor(consumer_credit))
            if bucket.limited:
                if can > 0 and bucket.available <= 0:
                    throttled += dt
                can = min(can, max(bucket.available, 0))
            if can > 0:
                bucket.take(can, now)
                waiting -= can
                delivered += can
                if capacity is not None:
                    consumer_credit -= can
            now += dt
        backlog = waiting
        out.append(
            SimulatedInterval(
                end=interval.end,
                seconds=interval.seconds,
                published=interval.published,
                delivered=interval.delivered,
                backlog=interval.backlog,
                simulated_delivered=delivered,
                simulated_backlog=round(backlog),
                simulated_throttled_seconds=throttled,
            )
        )
    return Simulation(out, initial_backlog(recorded[0]))
