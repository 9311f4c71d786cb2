"""The broker worker: owns partitions and runs their dispatchers, limiters and housekeeping.

Start-up order matters: note the change-event position, load every policy, sync the catalog,
follow events from the noted position, join the fleet, catch up with every event published
until then, and only then take partitions.  So nothing that happens during start-up is missed,
and a worker dispatches nothing before it enforces every write the admin service has answered
(``api.enforcement`` waits only for workers that have joined).  The BROKER limiter belongs to
the process and is shared by every dispatcher, as in Pulsar.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from dataplane import protocol
from dataplane.batches import in_batches, level_lengths
from dataplane.events import ChangeEvent, latest_position
from dataplane.legacy_keys import migrate_legacy_keys
from dataplane.scripts import register_scripts
from models.resolution import Limiter
from models.settings import Settings
from sluice.protocol import keys
from sluice.protocol.abuse import limit_pairs
from sluice.protocol.connection import REDIS_FAULTS
from sluice.protocol.frames import partitions_of
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import DISPATCH, DISPATCH_MANY, GROUP_BUDGET, LIMITS
from sluice.protocol.text import as_text
from workers.alarms import AlarmClock
from workers.catalog import Catalog
from workers.context import DispatchSettings, OwnershipHooks, SharedDispatch, WorkerContext
from workers.dormancy import CONSUMER_CHECK_MARGIN_MS, Dormancy, Timer
from workers.events import EventFollower, split_events
from workers.gate import DispatchGate
from workers.gcpolicy import HeapSettler
from workers.glance import Glances
from workers.jobs import bounded, every
from workers.limiter import RateLimiter
from workers.ownership import Ownership, default_ownership
from workers.partition import PartitionRunner, limit_values
from workers.policy import PolicyState
from workers.renewal import RenewalClock
from workers.scriptcall import PackedScript
from workers.stats import StatsPublisher, fingerprint
from workers.tracing import DispatchTracer
from workers.wakeups import listen_for_wakeups

__all__ = ["DispatchSettings", "Worker", "WorkerMetrics"]

log = logging.getLogger(__name__)


@dataclass
class WorkerMetrics:
    """Process-level figures exported on /metrics."""

    policy_reload_seconds: float = 0.0
    resyncs: int = 0


class Worker:
    """One broker worker process: builds its parts, wires them, and runs them."""

    def __init__(
        self,
        settings: Settings,
        redis: Redis,
        sessions: async_sessionmaker[AsyncSession],
        ownership: Ownership | None = None,
        control: Redis | None = None,
    ) -> None:
        self.settings = settings
        self.redis = redis
        # Leases, heartbeats and change events go over their own connections, so a busy
        # dispatch pool can never make the worker miss a heartbeat.
        self.control = control or redis
        self.sessions = sessions
        self.id = settings.worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.ownership = ownership or default_ownership(settings)
        self.policy = PolicyState(sessions)
        self.scripts = register_scripts(redis)
        self.context = WorkerContext(
            self.id, settings, redis, self.control, self.scripts, self.policy
        )
        self.shared = SharedDispatch(
            broker_limiter=RateLimiter(Limiter.BROKER, time.monotonic()),
            gate=DispatchGate(),
            alarms=AlarmClock(),
            renewals=RenewalClock(),
            script=PackedScript(redis, DISPATCH.source, DISPATCH_MANY.source),
            settings=DispatchSettings.of(self.policy, settings),
            group_script=PackedScript(redis, GROUP_BUDGET.source),
            tracer=DispatchTracer.global_provider() if settings.worker_tracing else None,
        )
        self.catalog = Catalog(self.context, sessions, on_changed=self.claim_partitions)
        self.stats = StatsPublisher(self.context)
        self.heap = HeapSettler()  # the heap frozen once the subscriptions settle
        self.metrics = WorkerMetrics()
        self.events: EventFollower | None = None
        self.runners: dict[str, PartitionRunner] = {}  # the partitions awake
        self._starting: dict[str, PartitionRunner] = {}  # runners not yet in ``runners``
        self.dormancy = Dormancy()  # the partitions owned but dormant
        self.glances = Glances(self)  # dormant partitions looked at without waking them
        self._waking: dict[str, asyncio.Task] = {}
        self._probing: asyncio.Task | None = None
        self._to_probe: set[str] = set()  # dormant partitions whose flags are read next
        # Abuse limits last written to every dormant partition of a topic (base name).
        self._topic_limits: dict[str, dict[str, int]] = {}
        self.ready = False
        self._tasks: list[asyncio.Task] = []
        self._rebalance_lock = asyncio.Lock()
        # Set while the runners may not match the partitions this worker owns: a rebalance
        # that failed half-way (Redis unavailable) is retried by the next tick.
        self._rebalance_pending = False
        self._new_topics: set[str] = set()
        self._adopting: asyncio.Task | None = None
        self._subscriptions_stale = False
        self._rereading: asyncio.Task | None = None

    @property
    def broker_limiter(self) -> RateLimiter:
        """The BROKER limiter, shared by every dispatcher of the process."""
        return self.shared.broker_limiter

    @property
    def gate(self) -> DispatchGate:
        """Dispatch calls in flight, by limits generation."""
        return self.shared.gate

    @property
    def dispatch_settings(self) -> DispatchSettings:
        """The dispatch settings in force."""
        return self.shared.settings

    @property
    def consumer_timeout_ms(self) -> int:
        """How long a consumer may stay silent before it is released."""
        return self.context.consumer_timeout_ms

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Load, sync, catch up, take partitions, and start the background loops."""
        stream = self.settings.events_stream
        await protocol.announce(self.control, "this worker")
        await migrate_legacy_keys(self.control)
        position = await latest_position(self.control, stream)
        await self.policy.reload()
        self.apply_limits()
        await self.catalog.sync()
        self.events = EventFollower(
            self.control,
            stream,
            self.id,
            self.shared.gate,
            position,
            apply=self.apply_events,
            resync=self.resync,
        )
        self._tasks = [asyncio.create_task(self.events.run(), name="events")]
        hooks = OwnershipHooks(
            self.catalog.partitions, self.rebalance, self.recover, lambda: self.catalog.version
        )
        await self.ownership.join(self.context, hooks)
        # Everything published before this worker joined must be applied before it
        # dispatches: the admin service did not wait for it.
        target = await latest_position(self.control, stream)
        if not await self.events.caught_up(target, timeout=30):
            raise RuntimeError("could not apply the change events at start")
        await self.events.confirm(self.events.position)
        await self.ownership.start()
        await self.rebalance()
        self._tasks += [
            asyncio.create_task(
                listen_for_wakeups(self.redis, self.on_wake, self.wake_everything), name="wakeups"
            ),
            asyncio.create_task(every(1.0, self._tick), name="tick"),
            asyncio.create_task(protocol.watch(self.control, "this worker"), name="protocol"),
            asyncio.create_task(
                every(self.settings.worker_resync_seconds, self.resync), name="resync"
            ),
        ]
        self.ready = True
        log.info("worker %s ready with %d partitions", self.id, len(self.runners))

    @property
    def loops(self) -> tuple[asyncio.Task, ...]:
        """The background loops (events, wake-ups, tick, resync); they end only by failing."""
        return tuple(self._tasks)

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop dispatching, give up ownership, stop the loops (each step time-bounded)."""
        self.ready = False
        # With the loops go the tasks started on demand (reading subscriptions again,
        # adopting new topics, recording subscriptions): a database connection one of them
        # holds goes back before the caller disposes of the engine.
        on_demand = (
            self._rereading,
            self._adopting,
            self._probing,
            self.glances.task,
            self.catalog.recorder,
        )
        tasks = [
            *self._tasks,
            *(t for t in on_demand if t is not None),
            *self._waking.values(),
        ]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        runners = list(self.runners.values())
        if runners:
            await asyncio.wait([asyncio.ensure_future(r.stop()) for r in runners], timeout=timeout)
        await asyncio.wait_for(self.ownership.stop(), timeout)
        self.runners = {}
        await self.shared.script.close()
        if self.shared.group_script is not None:
            await self.shared.group_script.close()

    async def _tick(self) -> None:
        """Once a second: the running partitions' housekeeping and stats (side by side), then
        the quiet ones go dormant and the dormant ones whose time came are checked."""
        if self._rebalance_pending:
            await self.rebalance()
        runners = list(self.runners.values())
        await bounded(runners, lambda runner: runner.housekeeping())
        await self.stats.tick(runners, self.dormancy.report_rows)
        await self._retire_quiet()
        await self._run_timers()
        self.heap.observe(sum(len(runner.dispatchers) for runner in self.runners.values()))

    async def resync(self) -> None:
        """Reload policies and the catalog from the database (heals missed events).  The
        same policies again resolve nothing anew: re-resolving every subscription's limits
        in one turn of the event loop (a third of a second at 10,000) would make every
        renewal due meanwhile late."""
        if await self.policy.reload():
            self.apply_limits()
        await self.write_limits()
        await self.catalog.sync()
        await self.claim_partitions()
        self.metrics.resyncs += 1

    async def recover(self) -> bool:
        """Re-read everything after the admin service fenced this worker off; True once
        every change event published until now is applied."""
        await self.policy.reload()
        self.apply_limits()
        await self.write_limits()
        await self.catalog.sync()
        if self.events is None:
            return True
        last = await self.control.xrevrange(self.settings.events_stream, count=1)
        return not last or await self.events.caught_up(last[0][0].decode(), 10)

    async def apply_events(self, events: list[ChangeEvent]) -> None:
        """Reload policies once per batch and re-apply every limit; hand catalog events to
        the catalog."""
        started = time.monotonic()
        namespaces, broker, catalog_events = split_events(events)
        groups = any(e.kind == "resourcegroup" for e in events)
        if groups and not (namespaces or broker):
            await self.policy.reload_groups()
            self.apply_limits()
            await self.write_limits()
        if namespaces or broker:
            if groups:
                await self.policy.reload_groups()
            if None in namespaces:
                await self.policy.reload()
            else:
                await self.policy.reload_parts({n for n in namespaces if n is not None}, broker)
            self.apply_limits()
            await self.write_limits(None if None in namespaces or broker else namespaces)
            self.metrics.policy_reload_seconds = time.monotonic() - started
            if broker:
                await self.catalog.publish_client_config()
        if catalog_events:
            await self.catalog.apply_events(catalog_events)

    # --- partitions -----------------------------------------------------------------------

    async def rebalance(self) -> None:
        """Run exactly the partitions this worker owns.

        A runner reads its partition's subscriptions when it starts, but wake-ups reach only
        the runners in ``self.runners``: a subscription created after that read and before
        the runner was added (its wake-up found no runner and was dropped) would get no
        dispatcher until another wake-up of its own, which a new consumer waiting for its
        first messages never sends.  So every runner started here reads them once more
        after it was added.

        Ownership calls this once per change of its leases; if it fails half-way (Redis
        unavailable while a runner starts), the tick calls it again until it succeeds, so a
        lease held is never left without a runner."""
        async with self._rebalance_lock:
            self._rebalance_pending = True
            await self._rebalance()
            self._rebalance_pending = False

    async def _rebalance(self) -> None:
        wanted = {p.full: p for p in self.catalog.partitions() if self.ownership.owns(p)}
        # A runner whose lease changed hands since it started presents a stale token.
        stale = {
            name
            for name, runner in self.runners.items()
            if name in wanted and runner.fencing_token != self.ownership.token(wanted[name])
        }
        for name in (set(self.runners) - set(wanted)) | stale:
            runner = self.runners.pop(name, None)
            if runner is None:
                continue  # fenced meanwhile (partition_lost stopped it)
            await runner.stop()
            self.stats.forget(name)
        for name in self.dormancy.retain(wanted):
            self.shared.limits_written.pop(name, None)
        new = [
            partition
            for name, partition in wanted.items()
            if name not in self.runners and name not in self.dormancy and name not in self._waking
        ]
        # Started side by side: each start waits on a few Redis round trips, and a worker
        # taking over hundreds of partitions with a backlog must not take them one by one.
        await bounded(await self._adopt_asleep(new), self._start_runner)

    async def _adopt_asleep(self, partitions: list[TopicName]) -> list[TopicName]:
        """Take partitions new to this worker asleep where that is safe; the ones to run.

        A partition whose flag is there was dormant and nothing happened since; one whose log
        (and priority level streams) hold no entry (new, or drained and trimmed) has nothing
        to deliver: both sleep (the
        flag is set first, so an event after it wakes them).  The consumers of an empty
        partition are watched by a timer, as a retired partition's are.  A partition whose
        flag an event deleted before the partition was registered as dormant (its wake-up
        found none) is woken by the check that follows."""
        if not partitions:
            return []
        if self.settings.worker_dormant_after_seconds <= 0:  # turned off: everything runs
            await in_batches(self.redis, partitions, lambda pipe, p: pipe.delete(keys.dormant(p)))
            return partitions

        def probe(pipe, partition: TopicName) -> None:
            pipe.set(keys.dormant(partition), 0, nx=True, get=True)
            pipe.xlen(keys.log(partition))
            pipe.smembers(keys.subs(partition))
            pipe.hkeys(keys.levels(partition))

        replies = await in_batches(self.redis, partitions, probe)
        rows = [replies[4 * i : 4 * i + 4] for i in range(len(partitions))]
        # A partition without the flag and with an empty log may hold entries in level streams.
        unsure = [
            (p, row[3] if row[0] is None and not row[1] else [])
            for p, row in zip(partitions, rows, strict=True)
        ]
        sides = await level_lengths(self.redis, unsure)
        run, asleep, empty = [], [], []
        for partition, (flag, length, subs, _levels), side in zip(
            partitions, rows, sides, strict=True
        ):
            length += side
            if flag is not None:
                due = int(flag)
                asleep.append((partition, Timer(due, wake_ms=due) if due else None))
            elif not length:
                empty.append((partition, sorted(s.decode() for s in subs)))
            else:
                run.append(partition)
        asleep.extend(await self._consumer_timers(empty))
        if run:
            await in_batches(self.redis, run, lambda pipe, p: pipe.delete(keys.dormant(p)))
        for partition, timer in asleep:
            self.dormancy.add(partition.full, timer)
            self.dormancy.gone_dormant -= 1  # taken asleep, not gone to sleep here
        await self._write_sleepers_limits([p for p, _ in asleep])
        present = await in_batches(
            self.redis, [p for p, _ in asleep], lambda pipe, p: pipe.exists(keys.dormant(p))
        )
        for (partition, _timer), there in zip(asleep, present, strict=True):
            if not there:
                self.wake_partition(partition.full)
        return run

    async def _consumer_timers(
        self, partitions: list[tuple[TopicName, list[str]]]
    ) -> list[tuple[TopicName, Timer | None]]:
        """For partitions with these subscriptions: when their consumers' heartbeats are
        next checked (None where no consumer is connected)."""
        found = await self._oldest_heartbeats(partitions)
        return [
            (partition, Timer.of(self._next_check(oldest), 0, tuple(oldest)))
            for (partition, _subs), oldest in zip(partitions, found, strict=True)
        ]

    async def _oldest_heartbeats(
        self, partitions: list[tuple[TopicName, Sequence[str]]]
    ) -> list[dict[str, float]]:
        """For each partition, its subscriptions' oldest consumer heartbeats (ms; only the
        subscriptions with a consumer), read in one pipelined pass."""
        pairs = [(p, sub) for p, subs in partitions for sub in subs]
        replies = iter(
            await in_batches(
                self.redis,
                pairs,
                lambda pipe, pair: pipe.zrange(
                    keys.sub_key(pair[0], pair[1], "alive"), 0, 0, withscores=True
                ),
            )
        )
        return [{sub: r[0][1] for sub in subs if (r := next(replies))} for _p, subs in partitions]

    def _next_check(self, oldest: dict[str, float]) -> int:
        """When consumers whose oldest heartbeats are ``oldest`` are checked (0: none)."""
        if not oldest:
            return 0
        return int(min(oldest.values())) + self.consumer_timeout_ms + CONSUMER_CHECK_MARGIN_MS

    def new_runner(self, partition: TopicName) -> PartitionRunner:
        """A runner (not started) for an owned partition, with its current limits and token."""
        return PartitionRunner(
            self.context,
            self.shared,
            partition,
            self.policy.for_partition(partition),
            self.ownership.token(partition),
            on_lost=self.partition_lost,
            on_subscription=self.catalog.note_subscription,
        )

    async def _start_runner(
        self, partition: TopicName, since: bytes | None = None
    ) -> PartitionRunner:
        """Start running an owned partition and register its runner (``since``: the last
        stats document of a partition woken from dormancy, see ``StatsPublisher.count_from``)."""
        runner = self.new_runner(partition)
        # Starting (its first reads are awaited): a policy change meanwhile reaches it too,
        # before the worker confirms the change.
        self._starting[partition.full] = runner
        try:
            await runner.start()
            await self.stats.adopt(runner)
            self.stats.count_from(partition.full, since)
        except BaseException:
            await runner.stop()  # no dispatcher of a runner the worker does not know
            raise
        finally:
            if self._starting.get(partition.full) is runner:
                del self._starting[partition.full]
        self.runners[partition.full] = runner
        # Its dispatchers run since start(): wake-ups that came meanwhile found no runner
        # to go to (a consumer's permits, a producer's data), so they look again now
        # rather than at their fallback poll.
        await runner.look_again_now()
        # A subscription created meanwhile has no dispatcher to look again: read them.
        await runner.sync_subscriptions()
        return runner

    # --- dormant partitions (workers.dormancy) ---------------------------------------------

    def wake_partition(self, name: str) -> None:
        """Start running a dormant partition again (a client's event, a timer)."""
        self.glances.cancel(name)
        if name in self._waking or not self.dormancy.remove(name):
            return
        self.dormancy.woken += 1
        self._waking[name] = asyncio.create_task(self._wake(name), name=f"wake {name}")

    async def _wake(self, name: str) -> None:
        partition = TopicName.from_full(name)
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.delete(keys.dormant(partition))
                pipe.get(keys.doc(partition))
                _deleted, last = await pipe.execute()
            if self.ownership.owns(partition) and name not in self.runners:
                runner = await self._start_runner(partition, last)
                if not self.ownership.owns(partition):  # given up meanwhile
                    self.runners.pop(name, None)
                    await runner.stop()
            elif name not in self.runners:
                # Not owned now (a fenced worker before it takes its leases again): a rebalance
                # that ran meanwhile skipped it as waking, so the next tick's looks again.
                self._rebalance_pending = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Neither running nor dormant: the next tick's rebalance starts it.
            log.warning("could not wake %s yet: %s", name, exc)
            self._rebalance_pending = True
        finally:
            self._waking.pop(name, None)

    async def _retire_quiet(self) -> None:
        after = self.settings.worker_dormant_after_seconds
        if after <= 0:
            return  # turned off: every owned partition runs
        now = time.monotonic()
        quiet = [r for r in self.runners.values() if not r.retiring and r.quiet(now, after)]
        await bounded(quiet, self._retire)

    async def _retire(self, runner: PartitionRunner) -> None:
        """Let a quiet partition go dormant (the protocol is in ``workers.dormancy``)."""
        name, partition = runner.partition.full, runner.partition
        flag = keys.dormant(partition)
        redis = self.redis
        runner.retiring, runner.retire_aborted = True, False
        try:
            await redis.set(flag, 0)
            samples = await self.stats.read(runner)
            if fingerprint(runner, samples) != runner.fingerprint:
                await redis.delete(flag)
                return
            timer = await self.timer_for(runner, samples)
            kept = await redis.set(flag, timer.due_ms if timer else 0, xx=True)
            if not kept:
                return  # a client's event deleted it and woke this worker
            if (
                runner.retire_aborted
                or self.runners.get(name) is not runner
                or not runner.quiet(time.monotonic(), self.settings.worker_dormant_after_seconds)
            ):
                await redis.delete(flag)
                return
            del self.runners[name]
            doc, rows, sleeping = self.stats.retire(runner, samples)
            self.dormancy.add(name, timer, sleeping)
        finally:
            runner.retiring = False
        await runner.stop()
        await self.stats.append(rows, (keys.doc(partition), doc))

    async def timer_for(self, runner: PartitionRunner, samples: dict) -> Timer | None:
        """When a partition going dormant must be looked at again: its consumers' oldest
        heartbeat plus the consumer timeout; the first undelivered entry's expiry under a
        message TTL; the end of the retention grace period when it acknowledged entries it
        could not trim yet."""
        partition = runner.partition
        redis = self.redis
        names = sorted(samples)
        ttl = runner.flow.limits.message_ttl.value
        lagging = [n for n in names if ttl > 0 and samples[n].lag > 0]
        acked_any = runner.acked_last > (runner.acked_first or 0)
        async with redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.zrange(keys.sub_key(partition, name, "alive"), 0, 0, withscores=True)
            for name in lagging:
                pipe.get(keys.sub_key(partition, name, "cursor"))
            pipe.xlen(keys.log(partition))
            pipe.hkeys(keys.levels(partition))
            replies = await pipe.execute()
        oldest = {n: r[0][1] for n, r in zip(names, replies, strict=False) if r}
        cursors = replies[len(names) : len(names) + len(lagging)]
        length, levels = replies[-2], replies[-1]
        # Where each lagging subscription stands on each stream: its cursor on the log.
        starts = [(keys.log(partition), cursor or b"0-0") for cursor in cursors]
        if levels:
            side_length, side_starts = await self._level_positions(partition, levels, lagging)
            length += side_length
            starts += side_starts
        wake = []
        if starts:
            async with redis.pipeline(transaction=False) as pipe:
                for stream, position in starts:
                    pipe.xrange(stream, min=b"(" + position, max="+", count=1)
                firsts = await pipe.execute()
            for first in firsts:
                if first:
                    published = int(first[0][0].split(b"-")[0])
                    wake.append(published + ttl * 1000)
        backlog = max((s.lag + s.pending for s in samples.values()), default=0)
        if acked_any and length > backlog:
            wake.append(
                int(time.time() * 1000) + int(self.settings.retention_grace_seconds * 1000) + 1000
            )
        check = self._next_check(oldest)
        return Timer.of(check, min(wake, default=0), tuple(oldest))

    async def _level_positions(
        self, partition: TopicName, levels: list[bytes], names: list[str]
    ) -> tuple[int, list[tuple[str, bytes]]]:
        """Of a partition's priority level streams: their entries, and where each of the
        subscriptions ``names`` stands on each (its group's last-delivered id)."""
        streams = [keys.level_log(partition, int(level)) for level in levels]
        async with self.redis.pipeline(transaction=False) as pipe:
            for stream in streams:
                pipe.xlen(stream)
                pipe.xinfo_groups(stream)
            replies = await pipe.execute(raise_on_error=False)
        positions = []
        for stream, groups in zip(streams, replies[1::2], strict=True):
            at = (
                {as_text(g["name"]): g["last-delivered-id"] for g in groups}
                if isinstance(groups, list)
                else {}
            )
            positions += [(stream, at[name]) for name in names if name in at]
        return sum(n for n in replies[0::2] if isinstance(n, int)), positions

    async def _run_timers(self) -> None:
        """Wake the dormant partitions whose time came; check the consumers' heartbeats of
        those that only watch them, and wake a partition only when one stopped."""
        now_ms = int(time.time() * 1000)
        checks: list[tuple[str, Timer]] = []
        for name, timer in self.dormancy.due(now_ms):
            if (timer.wake_ms and timer.wake_ms <= now_ms) or not timer.watch:
                self.wake_partition(name)
            else:
                checks.append((name, timer))
        if not checks:
            return
        found = await self._oldest_heartbeats(
            [(TopicName.from_full(name), timer.watch) for name, timer in checks]
        )
        cutoff = now_ms - self.consumer_timeout_ms
        for (name, timer), oldest in zip(checks, found, strict=True):
            if name not in self.dormancy:
                continue
            if any(score < cutoff for score in oldest.values()):
                self.wake_partition(name)
                continue
            check = self._next_check(oldest)
            self.dormancy.schedule(name, Timer.of(check, timer.wake_ms, tuple(oldest)))

    def probe_dormant(self, names: Iterable[str] | None = None) -> None:
        """Wake those of these dormant partitions (all when None) whose flag is gone, in the
        background and in batches.

        Every script a client calls deletes the flag before it publishes its wake-up, so a
        wake-up for a partition whose flag is still there brought nothing to do: a
        subscription the admin service created at the end of an empty or drained log, a
        message that arrived after the partition was woken and went to sleep again.  The
        partition sleeps on (the subscription is read when it wakes).  One whose flag is gone
        but whose log is empty sleeps on too, glanced at (``workers.glance``).  Run for all
        after the wake-up channel reconnects: wake-ups may have been lost while it was
        down."""
        self._to_probe.update(self.dormancy.partitions if names is None else names)
        if self._probing is None or self._probing.done():
            self._probing = asyncio.create_task(self._probe_dormant(), name="probe dormant")

    async def _probe_dormant(self) -> None:
        await asyncio.sleep(0)  # wake-ups that arrive together are probed together
        while self._to_probe:
            names = [name for name in self._to_probe if name in self.dormancy]
            self._to_probe = set()
            try:
                flags = await in_batches(
                    self.redis,
                    names,
                    lambda pipe, n: pipe.exists(keys.dormant(TopicName.from_full(n))),
                )
            except REDIS_FAULTS as exc:
                # Not lost: looked at again once Redis answers (nothing dispatches before).
                log.warning("cannot read %d dormant flag(s) yet: %s", len(names), exc)
                self._to_probe.update(names)
                await asyncio.sleep(1.0)
                continue
            gone = [name for name, present in zip(names, flags, strict=True) if not present]
            try:
                wake = await self.glances.sort(gone) if gone else []
            except REDIS_FAULTS as exc:
                log.warning("cannot look at %d dormant partition(s): %s", len(gone), exc)
                wake = gone  # woken: a runner reads them when Redis answers
            # The flags ``sort`` set again on partitions that are awake or waking by now
            # (woken meanwhile) go: a running partition has none.
            stale = [n for n in wake if n in self._waking or n not in self.dormancy]
            for name in wake:
                self.wake_partition(name)
            if stale:
                with contextlib.suppress(*REDIS_FAULTS):
                    await in_batches(
                        self.redis,
                        [TopicName.from_full(n) for n in stale],
                        lambda pipe, p: pipe.delete(keys.dormant(p)),
                    )

    async def claim_partitions(self) -> None:
        """The catalog changed: let ownership claim what is ours now, then run it."""
        refresh = getattr(self.ownership, "cycle", None)
        if refresh is not None:
            # Called from the change-event follower (a catalog event, a resync): a fenced
            # worker recovers in the lease loop, which waits for this follower.
            await refresh(recover=False)
        await self.rebalance()

    def partition_lost(self, partition: TopicName, token: str) -> None:
        """A dispatcher presenting ``token`` was fenced off: stop the partition (ownership
        decides what next).  A runner being replaced may be fenced after the worker took a
        new lease and started its successor: that neither drops the new lease nor stops
        the successor."""
        if self.ownership.token(partition) == token:
            self.ownership.lost(partition)
        runner = self.runners.get(partition.full)
        if runner is not None and runner.fencing_token == token:
            del self.runners[partition.full]
            self.stats.forget(partition.full)
            asyncio.get_running_loop().create_task(runner.stop())

    # --- limits ---------------------------------------------------------------------------

    def apply_limits(self) -> None:
        """Re-resolve every limiter in place after a policy change, and wake the dispatchers
        whose limits changed (one waiting for quota may have more now), or all of them when
        a setting or the BROKER limit did.  The same limits again (a resync every
        ``worker_resync_seconds``) wake nobody: a dispatcher asleep on the renewal clock
        stays there."""
        now = time.monotonic()
        shared = self.shared
        shared.gate.advance()
        settings = DispatchSettings.of(self.policy, self.settings)
        any_partition = TopicName("_", "_", "_")
        broker = self.policy.limits(any_partition).broker
        every = settings != shared.settings or broker != shared.broker_limiter.resolved
        if settings != shared.settings:
            shared.settings = settings  # else the same object: calls compare it at once
        shared.broker_limiter.apply(broker, now)
        for runner in self._live_runners():
            changed = runner.apply_limits(self.policy.for_partition(runner.partition))
            for dispatcher in runner.dispatchers.values() if every else changed:
                dispatcher.wake.set()

    def _live_runners(self) -> list[PartitionRunner]:
        """The running partitions' runners and those still starting."""
        return [*self.runners.values(), *self._starting.values()]

    async def write_limits(self, namespaces: set[str] | None = None) -> None:
        """Put the abuse limits in force where the scripts clients call read them: each owned
        partition's, and each namespace's ``maxTopicsPerNamespace``.  Awaited before a change
        is confirmed, so a write the admin service answered is checked by Redis.  Dormant
        partitions are compared topic by topic (``namespaces``: only theirs; None: all) and
        written only where the values changed."""
        await asyncio.gather(*(r.write_limits() for r in self._live_runners()))
        await self._write_dormant_limits(namespaces)
        await self.catalog.publish_topic_limits()

    async def _write_dormant_limits(self, namespaces: set[str] | None) -> None:
        if not self.dormancy:
            return
        written = self.shared.limits_written
        calls = []
        for name, count in list(self.catalog.topics.items()):
            topic = TopicName.from_full(name)
            if namespaces is not None and f"{topic.tenant}/{topic.namespace}" not in namespaces:
                continue
            values = limit_values(self.policy.flow(topic), self.policy.group(topic))
            if self._topic_limits.get(name) is values:
                continue
            for partition in partitions_of(topic, count):
                if partition.full in self.dormancy and written.get(partition.full) != values:
                    calls.append((partition, values))
            self._topic_limits[name] = values
        await self._write_partition_limits(calls)

    async def _write_sleepers_limits(self, partitions: list[TopicName]) -> None:
        """The abuse limits of partitions taken asleep whose limits this worker never wrote
        (a topic made since the last change of its limits): as a runner's start would write
        them, so the first message is checked against them.  Defaults (no hash) are not
        written."""
        written = self.shared.limits_written
        calls = []
        for partition in partitions:
            if partition.full in written:
                continue
            values = limit_values(self.policy.flow(partition), self.policy.group(partition))
            if limit_pairs(values):
                calls.append((partition, values))
        await self._write_partition_limits(calls)

    async def _write_partition_limits(self, calls: list[tuple[TopicName, dict[str, int]]]) -> None:
        """Write each (dormant partition, limit values) in one pipelined round; a partition
        whose lease was lost meanwhile is dropped."""
        if not calls:
            return
        written = self.shared.limits_written
        script = self.context.scripts[LIMITS.name]

        def queue(pipe, call):
            partition, values = call
            token = self.ownership.token(partition)
            script_keys, args = LIMITS.call(partition, token, limit_pairs(values))
            return script(keys=script_keys, args=args, client=pipe)

        replies = await in_batches(self.redis, calls, queue, raise_on_error=False)
        for (partition, values), reply in zip(calls, replies, strict=True):
            if isinstance(reply, Exception):
                if str(reply).startswith("FENCED"):
                    self.ownership.lost(partition)
                    self.dormancy.remove(partition.full)
                    self._rebalance_pending = True
                    continue
                raise reply
            written[partition.full] = values

    # --- wake-ups -------------------------------------------------------------------------

    def wake_everything(self) -> None:
        """Every dispatcher looks again, and every partition reads its subscriptions again
        (after a missed-message window: a subscription created in it woke no one)."""
        for runner in self.runners.values():
            runner.look_again()
        self._subscriptions_stale = True
        if self._rereading is None or self._rereading.done():
            self._rereading = asyncio.create_task(self._reread_subscriptions())
        if self.dormancy:
            self.probe_dormant()

    async def _reread_subscriptions(self) -> None:
        while self._subscriptions_stale:
            self._subscriptions_stale = False
            try:
                for runner in list(self.runners.values()):
                    await runner.sync_subscriptions()
            except REDIS_FAULTS as exc:
                # The channel is lost too then: its next subscription asks again.
                log.warning("subscriptions not read again yet: %s", exc)
                return

    async def on_wake(self, message: str) -> None:
        """Route one wake-up message."""
        kind, _, rest = message.partition("\t")
        if kind == "d":
            runner = self.runners.get(rest)
            if runner is not None:
                runner.retire_aborted = True
                runner.wake_all()
            elif rest in self.dormancy:
                self.probe_dormant([rest])
        elif kind in ("s", "p"):
            partition, _, subscription = rest.partition("\t")
            runner = self.runners.get(partition)
            if runner is not None:
                runner.retire_aborted = True
                await runner.wake_subscription(subscription, consumers_changed=kind == "s")
            elif partition in self.dormancy:
                self.probe_dormant([partition])
        elif kind == "t":
            # A client created a topic on first use: record it and take its partitions
            # (wake-ups of a burst of new topics are handled together).
            self._new_topics.add(rest)
            if self._adopting is None or self._adopting.done():
                self._adopting = asyncio.create_task(self._adopt_new_topics())

    async def _adopt_new_topics(self) -> None:
        await asyncio.sleep(0)
        while self._new_topics:
            names, self._new_topics = self._new_topics, set()
            try:
                await self.catalog.adopt(names)
            except REDIS_FAULTS as exc:
                log.warning("new topics not adopted yet (the next resync will): %s", exc)
