"""Looking at a dormant partition with an empty log without waking it.

A client's script deletes a dormant partition's flag and wakes the worker whatever it did;
when it only connected, disconnected or gave permits to a consumer of a partition whose log
holds no entry, there is nothing to deliver, and starting its runner (dispatchers, tasks,
meters: tens of KiB) for the two seconds it takes to go dormant again is all cost: a fleet of
idle consumers connecting at once would have every one of their partitions awake together,
and the worker's heap keeps that peak.  So, when a probe finds a flag gone
(``Worker.probe_dormant``), the worker sets it again (``SET NX``) and reads the log's length
after that (and its priority level streams', if it has some): a partition with
subscriptions and an empty log stays dormant and is *glanced* at instead (one at a time per
lane, a few lanes): its subscriptions and consumers are read with a runner that is never
started, its abuse limits are written if they were not yet (as a runner's start would), its
stats document is written again (the consumers as they are now), and its consumers'
heartbeats get a timer, as when it went dormant.  Anything else (an entry in one of its
streams, no subscription, a flag that was there again) wakes it, as before; so does the
first message after the flag was set again, since it deletes the flag.

An event during a glance has the partition glanced at again after it, or woken: a wake-up
wins, and the glance writes nothing (``cancel``).  A runner that never starts holds no task
and, its dispatchers dropped at the end, no reference cycle: it is freed when the glance
ends.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol

from dataplane.batches import in_batches, level_lengths
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from workers.jobs import bounded

if TYPE_CHECKING:
    from workers.dormancy import Dormancy, Timer
    from workers.ownership import Ownership
    from workers.partition import PartitionRunner
    from workers.stats import StatsPublisher

log = logging.getLogger(__name__)

LANES = 4  # glances under way at once, at most


class Host(Protocol):
    """What glances use of their worker (the worker is one; this module does not import it)."""

    redis: Any
    dormancy: Dormancy
    ownership: Ownership
    stats: StatsPublisher

    def new_runner(self, partition: TopicName) -> PartitionRunner: ...

    def wake_partition(self, name: str) -> None: ...

    async def timer_for(self, runner: PartitionRunner, samples: dict) -> Timer | None: ...


class Glances:
    """The dormant partitions of one worker being looked at without waking them."""

    def __init__(self, worker: Host) -> None:
        self.worker = worker
        self.pending: set[str] = set()  # glances queued or under way, not yet cancelled
        self._queue: set[str] = set()  # to glance at next (again, if under way now)
        self._task: asyncio.Task | None = None
        self.count = 0  # glances completed

    @property
    def task(self) -> asyncio.Task | None:
        """The task running the glances, if any."""
        return self._task

    def cancel(self, name: str) -> None:
        """The partition is woken (or no longer dormant): a glance at it writes nothing."""
        self.pending.discard(name)

    async def sort(self, names: list[str]) -> list[str]:
        """Of these dormant partitions whose flag is gone, set the flag again and keep asleep
        those with subscriptions and an empty log (glanced at soon); the ones to wake."""
        worker = self.worker
        partitions = [TopicName.from_full(name) for name in names]

        def probe(pipe, partition: TopicName) -> None:
            pipe.set(keys.dormant(partition), 0, nx=True)
            pipe.xlen(keys.log(partition))
            pipe.scard(keys.subs(partition))
            pipe.hkeys(keys.levels(partition))

        replies = await in_batches(worker.redis, partitions, probe)
        rows = [replies[4 * i : 4 * i + 4] for i in range(len(partitions))]
        # A partition with an empty log may hold entries in its priority level streams.
        unsure = [
            (p, row[3] if row[0] and not row[1] else [])
            for p, row in zip(partitions, rows, strict=True)
        ]
        sides = await level_lengths(worker.redis, unsure)
        wake = []
        for name, partition, row, side in zip(names, partitions, rows, sides, strict=True):
            flagged, length, subscriptions, _levels = row
            if (
                flagged
                and not length + side
                and subscriptions
                and name in worker.dormancy
                and worker.ownership.owns(partition)
            ):
                self.pending.add(name)
                self._queue.add(name)
            else:
                wake.append(name)
        if self._queue and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._run(), name="glance dormant")
        return wake

    async def _run(self) -> None:
        while self._queue:
            names, self._queue = sorted(self._queue), set()
            await bounded(names, self._glance, LANES)

    async def _glance(self, name: str) -> None:
        if name not in self.pending:
            return
        worker = self.worker
        try:
            await self._look(name)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # Redis away, or anything else: waking is always right
            log.warning("could not look at dormant %s (waking it): %s", name, exc)
            if name in self.pending:
                worker.wake_partition(name)
        finally:
            if name not in self._queue:  # else read again next: something changed meanwhile
                self.pending.discard(name)

    async def _look(self, name: str) -> None:
        """Read the partition with a runner that never starts; write its document and its
        timer, unless it was woken meanwhile."""
        worker = self.worker
        partition = TopicName.from_full(name)
        runner = worker.new_runner(partition)
        runner.apply_limits()
        try:
            # Its abuse limits, unless written already (as a runner's start would): the first
            # message is checked against them.
            await runner.write_limits()
            members = await worker.redis.smembers(keys.subs(partition))
            await runner.read_consumers([runner.look_at(s.decode()) for s in sorted(members)])
            samples = await worker.stats.read(runner)
            timer = await worker.timer_for(runner, samples)
            if (
                name not in self.pending
                or name not in worker.dormancy
                or not worker.ownership.owns(partition)
            ):
                return  # woken (or fenced off) meanwhile: its runner writes what it finds
            # The document only: its snapshot rows would count the partition's history
            # again (its counters from zero), and an empty log has no backlog to report.
            doc, _rows, _sleeping = worker.stats.retire(runner, samples)
        finally:
            runner.dispatchers.clear()  # no cycle left: freed as soon as the glance ends
        worker.dormancy.schedule(name, timer)
        worker.dormancy.keep_rows(name, [])
        await worker.redis.set(keys.dormant(partition), timer.due_ms if timer else 0, xx=True)
        await worker.stats.append([], (keys.doc(partition), doc))
        self.count += 1
