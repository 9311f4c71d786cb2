"""Partition ownership for a fleet of workers: heartbeats, rendezvous assignment, leases.

Every worker heartbeats into the registry (``sl:{meta}:workers``, a zset scored by heartbeat
expiry in Redis time, so hosts' clocks do not matter) every ``lease_ttl / 3`` with
``worker_heartbeat.lua``: one atomic step that renews the worker's own entry, removes the
expired ones and reads the live workers.  Each partition belongs to the live worker with the
highest rendezvous hash of (worker, partition), so every worker computes the same assignment,
it is balanced, and a join or leave moves only the partitions that must move.  The assignment
is computed again only when the live set or the catalog's partitions (its ``version``) change.

Assignment is the wish; the lease is the proof.  A worker dispatches a partition only while
it holds the partition's lease ``sl:{P}:lease``, a key holding the fencing token
``<worker>:<epoch>`` (the epoch from a per-partition counter).  Every dispatch call (and trim,
limits, skip) presents the token, and the script refuses a stale one (``FENCED``), so a worker
that was paused cannot dispatch once another took over, even before it notices.

A lease has no TTL and is never renewed: it stands while its holder's heartbeat does, so
holding any number of partitions costs a heartbeat, a handful of Redis commands per cycle.
``lease_acquire.lua`` takes a lease that is free, held by the caller itself (a restarted
process with a fixed worker id holds no token in memory), or held by a worker that is not
among the live workers the caller read; otherwise the acquisition fails and is tried again on
the next cycle, by when the holder has let the partition go.  Acquisitions and releases are
pipelined in batches, only for what changed; a script call names one partition on a Redis
Cluster (its keys share a slot) and up to ``PER_CALL`` on a single server.

The heartbeat runs on a thread and a connection of its own (``workers.heartbeat``), so a
worker whose event loop is busy (starting the runners of thousands of partitions, dispatching
for ten thousand subscriptions) stays live; the reconciliation (release,
acquire) runs right after a heartbeat that changed something, and hands the worker's
rebalance to a background task, so a takeover never waits for runners being started.  So:

* a partition that moves is released by its old owner (runner stopped first) once it sees the
  new live set, and taken by the new owner on its next cycle;
* a dead worker drops out of the live set when its heartbeat expires, and the others take its
  partitions right after their next heartbeat: within ``ttl + ttl / 3`` of its last one (plus
  the time to take them: about 1 s for 50,000 here);
* a worker paused past its heartbeat may have lost any lease without knowing: its next
  heartbeat finds its own entry lapsed (expired, or removed by another worker that then saw it
  dead), so it reads its leases, drops the tokens of those another worker took meanwhile,
  stops their runners, and takes again what the assignment gives it, with new tokens (a lease
  still holding its token was taken by no one: it keeps running it);
* a dispatch call refused with ``FENCED`` drops the partition (``lost``); it is taken again on
  a later cycle if the assignment still gives it to this worker;
* the admin service's unload releases the lease and notes the partition in
  ``sl:worker:{id}:unloaded``; the holder's next heartbeat reads that and takes it again;
* the admin service's fence deletes the leases listed in ``sl:worker:{id}:leases`` and marks
  the worker ``fenced``: it gives everything up and takes partitions again only once it has
  re-read everything;
* a lease this worker may hold without knowing its token (its previous process's, one taken by
  an acquisition whose answer was lost, one it dropped on a lapse) is released if it is no
  longer this worker's, so that no live worker ever sits on a partition it does not run.

The TOPIC and SUBSCRIPTION limiters' periods live in Redis, so a new owner continues them
exactly.  Leases go over the worker's control connections (``WorkerContext.control``), so a busy
dispatch pool never delays a heartbeat.  The catalog's partitions (and their version),
rebalancing and the recovery after a fence are reached through ``OwnershipHooks``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Iterable

import mmh3

from dataplane.batches import in_batches
from dataplane.scripts import ensure_loaded
from sluice.protocol import keys
from sluice.protocol.connection import REDIS_FAULTS, is_cluster
from sluice.protocol.frames import lease_holder
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import LEASE_ACQUIRE, LEASE_RELEASE, WORKER_HEARTBEAT
from sluice.waits import wait_event
from workers.context import OwnershipHooks, WorkerContext
from workers.heartbeat import Beat, HeartbeatThread, beat_of, queue_renewal
from workers.jobs import every, guarded

log = logging.getLogger(__name__)

BATCH = 2000  # partitions per pipelined round trip
# Partitions per lease script call on a single server; on a Redis Cluster a call names one
# partition (its keys share one slot).  Fewer, larger calls cost the worker far less than one
# call per partition: taking 50,000 leases over is one round trip per BATCH, not 50,000 calls.
PER_CALL = 500


def rendezvous_owner(workers: list[str], partition: str) -> str | None:
    """The worker that should own ``partition`` (highest random weight), or None."""
    best, best_score = None, -1
    for worker in workers:
        score = mmh3.hash128(f"{worker}\x00{partition}", signed=False)
        if score > best_score:
            best, best_score = worker, score
    return best


def assigned(me: str, workers: list[str], partitions: Iterable[TopicName]) -> dict[str, TopicName]:
    """The partitions ``rendezvous_owner`` gives ``me`` among ``workers``, by full name."""
    hash128 = mmh3.hash128
    prefixes = [(worker, f"{worker}\x00") for worker in workers]
    mine = {}
    for partition in partitions:
        name = partition.full
        best, best_score = None, -1
        for worker, prefix in prefixes:
            score = hash128(prefix + name, signed=False)
            if score > best_score:
                best, best_score = worker, score
        if best == me:
            mine[name] = partition
    return mine


class LeaseOwnership:
    """Owns the partitions that rendezvous hashing gives this worker, through leases.

    Two loops: the heartbeat, every ``interval``, on a thread of its own when given a
    ``heartbeat_url`` (so a worker with a busy event loop stays live), and the reconciliation
    (release and acquire to match the assignment), right after a heartbeat that changed
    something and every ``interval`` otherwise, which asks the worker to rebalance without
    waiting for it (so a takeover is never held up by runners being started).  ``cycle``
    runs both once, and waits for the rebalance."""

    def __init__(self, lease_ttl_seconds: float, heartbeat_url: str | None = None) -> None:
        self.ttl_ms = max(300, int(lease_ttl_seconds * 1000))
        self.interval = self.ttl_ms / 3000
        # Beat on a thread of its own with a connection to this URL (None: on the loop).
        self.heartbeat_url = heartbeat_url
        self._heartbeat: HeartbeatThread | None = None
        self._beats: set[asyncio.Task] = set()
        self.tokens: dict[str, str] = {}
        self.live: list[str] = []
        self.context: WorkerContext | None = None
        self.hooks: OwnershipHooks | None = None
        self._tasks: list[asyncio.Task] = []
        self._lock = asyncio.Lock()  # one reconciliation at a time
        self._beat_lock = asyncio.Lock()  # one heartbeat at a time
        self._wake = asyncio.Event()  # a heartbeat changed something: reconcile now
        self._joined = False
        # A lapse a beat reported whose handling failed (Redis answered the heartbeat's own
        # connection but not this one, right after a cut healed): handled at the next beat.
        self._lapse_unhandled = False
        self._fenced: str | None = None  # the change the admin service fenced this worker at
        self._stop_runners = False  # tokens were dropped: runners must stop before more
        self._generation = 0  # bumped whenever every token is dropped
        # Leases taken or lost since the worker was last asked to rebalance: kept across a
        # cycle that fails after the change (Redis gone again), so the next one still asks.
        self._changed = False
        self._rebalancing: asyncio.Task | None = None
        self._rebalance_again = False
        # The assignment, and the (live workers, catalog version) it was computed for.
        self._assigned_for: tuple[tuple[str, ...], int] | None = None
        self._wanted: dict[str, TopicName] = {}
        # Held and wanted must be compared again (the assignment changed, tokens dropped).
        self._settle = True
        self._missing: dict[str, TopicName] = {}  # wanted, not held: acquired every cycle
        self._releasing: dict[str, str] = {}  # no longer wanted, release not done yet
        # Partitions whose lease may hold a token of this worker's that it does not know.
        self._unsure: dict[str, TopicName] = {}

    @property
    def _ctx(self) -> WorkerContext:
        assert self.context is not None, "join the fleet first"
        return self.context

    @property
    def _hooks(self) -> OwnershipHooks:
        assert self.hooks is not None, "join the fleet first"
        return self.hooks

    # --- Ownership protocol ---------------------------------------------------------------

    async def join(self, context: WorkerContext, hooks: OwnershipHooks) -> None:
        """Register in the fleet (heartbeat), holding no partition yet."""
        self.context, self.hooks = context, hooks
        await self._register()
        await self.beat()
        self._joined = True

    async def start(self) -> None:
        """Take this worker's share of the partitions, and keep it up to date."""
        # A previous process with this worker id may have left leases behind: those that
        # are no longer this worker's are released (the others are simply taken again).
        self._unsure = {p.full: p for p in self._hooks.partitions()}
        # The heartbeat goes on while the first leases are taken (thousands take a while).
        if self.heartbeat_url is not None:
            loop = asyncio.get_running_loop()
            self._heartbeat = HeartbeatThread(
                self.heartbeat_url,
                self._ctx.worker_id,
                self.ttl_ms,
                self.interval,
                lambda: len(self.tokens),
                lambda beat: loop.call_soon_threadsafe(self._beat_arrived, beat),
            )
            self._heartbeat.start()
        else:
            self._tasks = [
                asyncio.create_task(every(self.interval, self.beat, "lease "), name="heartbeat")
            ]
        await self.cycle(rebalance=False)
        self._tasks.append(asyncio.create_task(self._reconcile_loop(), name="leases"))

    async def stop(self) -> None:
        """Release every lease (the worker stopped its runners already) and deregister."""
        if self._heartbeat is not None:
            await asyncio.to_thread(self._heartbeat.stop)
            self._heartbeat = None
        tasks = [
            *self._tasks,
            *self._beats,
            *([self._rebalancing] if self._rebalancing else []),
        ]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks, self._rebalancing = [], None
        context = self.context
        if context is None:
            return
        async with self._lock:
            held = {**self._releasing, **self.tokens}
            self.tokens, self._releasing = {}, {}
            with contextlib.suppress(*REDIS_FAULTS):
                await self._release(held)
        with contextlib.suppress(*REDIS_FAULTS):
            redis, me = context.control, context.worker_id
            await redis.zrem(keys.WORKERS, me)
            await redis.delete(
                keys.worker_info(me), keys.worker_leases(me), keys.worker_unloaded(me)
            )
            await redis.hdel(keys.APPLIED, me)

    def owns(self, partition: TopicName) -> bool:
        """True while this worker holds the partition's lease."""
        return partition.full in self.tokens

    def token(self, partition: TopicName) -> str:
        """The fencing token of the lease this worker holds."""
        return self.tokens.get(partition.full, "")

    def lost(self, partition: TopicName) -> None:
        """A dispatch call was fenced off: the lease is gone (taken again on a later cycle
        if the partition is still this worker's)."""
        name = partition.full
        if self.tokens.pop(name, None) is not None and name in self._wanted:
            self._missing[name] = self._wanted[name]

    # --- the loops ------------------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        while True:
            await wait_event(self._wake, self.interval)
            self._wake.clear()
            await guarded(self.reconcile, "lease ")

    async def cycle(self, rebalance: bool = True, recover: bool = True) -> None:
        """Heartbeat, then release and acquire leases to match the assignment; then, if the
        leases changed and ``rebalance``, have the worker run exactly those (awaited).
        ``recover=False`` for a caller that the recovery from a fence would wait for (the
        change-event follower: recovering waits until it has applied every event)."""
        await self.beat()
        await self.reconcile(wait_for_rebalance=True, rebalance=rebalance, recover=recover)

    async def _register(self) -> None:
        context = self._ctx
        settings = context.settings
        host = settings.worker_advertised_address or socket.gethostname()
        info = {
            "id": context.worker_id,
            "host": host,
            "pid": os.getpid(),
            "startedAt": int(time.time() * 1000),
            # Present from the start, so the heartbeat's update of it reports 0 new fields
            # unless the hash expired (which is how a long pause is noticed).
            "partitions": len(self.tokens),
            "httpUrl": (
                f"http://{host}:{settings.worker_http_port}" if settings.worker_http_port else ""
            ),
        }
        await context.control.hset(keys.worker_info(context.worker_id), mapping=info)

    async def beat(self) -> None:
        """Renew this worker's registration and read the live workers (on the loop: the
        first beat, and every beat when no ``heartbeat_url`` was given), then act on it."""
        async with self._beat_lock:
            context = self._ctx
            redis, me = context.control, context.worker_id
            await ensure_loaded(redis)  # on a cluster: the script goes in a pipeline
            async with redis.pipeline(transaction=False) as pipe:
                # Reads this worker's own entry before renewing it, in one atomic step.
                script_keys, args = WORKER_HEARTBEAT.call(me, self.ttl_ms)
                await context.scripts[WORKER_HEARTBEAT.name](
                    keys=script_keys, args=args, client=pipe
                )
                queue_renewal(pipe, me, self.ttl_ms, len(self.tokens))
                results = await pipe.execute()
            await self._take_beat(beat_of(results[0], results[1:]))

    def _beat_arrived(self, beat: Beat) -> None:
        """A beat of the heartbeat thread (on the loop): act on it, in order."""
        task = asyncio.create_task(self._take_beat_locked(beat), name="heartbeat")
        self._beats.add(task)
        task.add_done_callback(self._beats.discard)

    async def _take_beat_locked(self, beat: Beat) -> None:
        if self._joined and beat.reply[1] == 1:
            self._lapse_unhandled = True  # kept even if this take fails

        async def take() -> None:
            # As ``beat`` does: a replica promoted by a failover lacks the scripts that the
            # worker's cluster pipelines call (a no-op on a single server).
            await ensure_loaded(self._ctx.control)
            await self._take_beat(beat)

        async with self._beat_lock:
            await guarded(take, "lease heartbeat ")

    async def _take_beat(self, beat: Beat) -> None:
        """Act on a beat: a new live set wakes the reconciliation; an entry found lapsed, a
        fence or an unload drops the tokens concerned at once (the runners stop at the next
        reconciliation, which this wakes)."""
        context = self._ctx
        redis, me = context.control, context.worker_id
        if self._joined and beat.reply[1] == 1:
            self._lapse_unhandled = True
        live = sorted(w.decode() if isinstance(w, bytes) else w for w in beat.reply[2:])
        if live != self.live:
            self.live = live
            self._wake.set()
        if beat.info_expired:  # the info hash had expired (a long pause): register again
            await self._register()
        unloaded = [n.decode() for n in beat.unloaded]
        if unloaded:
            await redis.srem(keys.worker_unloaded(me), *unloaded)
        if beat.fenced is not None:
            self._fenced_at(beat.fenced.decode())
        elif self._lapse_unhandled:
            held = bool(self.tokens or self._releasing)
            log.log(
                logging.WARNING if held else logging.INFO,
                "the heartbeat of worker %s had lapsed (paused or cut off past the lease "
                "TTL): it may have lost any lease",
                me,
            )
            await self._drop_taken()
            self._lapse_unhandled = False
        elif unloaded:
            self._drop_unloaded(unloaded)

    def _fenced_at(self, position: str) -> None:
        """The admin service fenced this worker off: drop every token; nothing is taken
        again before everything was re-read."""
        if self._fenced is None:
            log.error(
                "fenced off by the admin service at change %s: re-reading everything", position
            )
        self._fenced = position
        self._drop_all()

    def _drop_all(self) -> None:
        """Forget every token: another worker may have taken any of these leases.  The
        runners stop at the next reconciliation; what the assignment still gives this
        worker is taken again, with new tokens, and the rest is released if this worker
        still holds it."""
        dropped = {**self._releasing, **self.tokens}
        if dropped:
            log.warning(
                "dropping %d partition lease(s) (any may have been taken over): their runners "
                "stop, and what is still this worker's is taken again with new tokens",
                len(dropped),
            )
        self.tokens, self._releasing = {}, {}
        self._unsure.update((name, TopicName.from_full(name)) for name in dropped)
        self._settle = True
        self._generation += 1
        self._stop_runners = True
        self._wake.set()

    async def _drop_taken(self) -> None:
        """After a lapse: drop the tokens of the leases another worker took meanwhile (or
        whose lease is gone), keep the others.

        A worker that takes a lease writes its own token into it, and every dispatch call
        presents the token it holds, so a lease still holding this worker's token was taken
        by no one: keeping it is safe even if another worker takes it a moment later (the
        next dispatch call is refused, ``lost``).  So a worker that was only slow (a loaded
        machine, a long collection pause) keeps dispatching what nobody took, instead of
        stopping every runner and starting them all again.  If the leases cannot be read,
        every token is dropped."""
        held = dict(self.tokens)
        if not held:
            self._drop_all()
            return
        names = list(held)
        try:
            found = await in_batches(
                self._ctx.control,
                [TopicName.from_full(name) for name in names],
                lambda pipe, partition: pipe.get(keys.lease(partition)),
            )
        except REDIS_FAULTS:
            self._drop_all()
            raise
        taken = [
            name
            for name, value in zip(names, found, strict=True)
            if (value.decode() if isinstance(value, bytes) else value) != held[name]
        ]
        dropped = [name for name in taken if self.tokens.get(name) == held[name]]
        for name in dropped:
            del self.tokens[name]
            self._unsure[name] = TopicName.from_full(name)
            if name in self._wanted:
                self._missing[name] = self._wanted[name]
        log.warning(
            "kept %d lease(s) still holding this worker's token; dropped %d taken meanwhile",
            len(held) - len(dropped),
            len(dropped),
        )
        if dropped:
            self._stop_runners = True
            self._wake.set()

    def _drop_unloaded(self, names: list[str]) -> None:
        """The admin service released these leases (unload): their runners stop at the
        next reconciliation; the partitions are taken again, with new tokens, if they are
        still this worker's."""
        dropped = [name for name in names if self.tokens.pop(name, None) is not None]
        if not dropped:
            return
        log.info("%d partition lease(s) unloaded: taking them again", len(dropped))
        for name in dropped:
            if name in self._wanted:
                self._missing[name] = self._wanted[name]
        self._stop_runners = True
        self._wake.set()

    async def reconcile(
        self, wait_for_rebalance: bool = False, rebalance: bool = True, recover: bool = True
    ) -> None:
        """Stop the runners of dropped tokens; re-read everything after a fence (unless not
        ``recover``: then a fenced worker takes nothing yet); release and acquire leases to
        match the assignment; then have the worker rebalance if the leases changed (in the
        background unless ``wait_for_rebalance``)."""
        async with self._lock:
            if self._stop_runners:
                self._stop_runners = False
                self._changed = False
                await self._hooks.rebalance()
        # Recovery waits for the change-event follower, whose own full resync reconciles:
        # it must not hold the lock meanwhile.
        if self._fenced is not None and (not recover or not await self._recover_from_fence()):
            return  # nothing is taken before everything was read again
        async with self._lock:
            if self._fenced is not None:
                return  # fenced again meanwhile
            self._assign()
            if self._settle:
                self._settle_assignment()
            if self._releasing:
                self._changed = False
                await self._hooks.rebalance()  # stops their runners before the leases go
                await self._release(self._releasing)
                self._releasing = {}
            if self._unsure:
                await self._release_unknown()
            await self._acquire(list(self._missing.values()))
        if self._changed:
            self._changed = False
            if not rebalance:
                return  # the caller rebalances itself
            if wait_for_rebalance:
                await self._hooks.rebalance()
            else:
                self._rebalance_soon()

    def _rebalance_soon(self) -> None:
        """Have the worker rebalance in the background (once more if one is under way)."""
        if self._rebalancing is not None and not self._rebalancing.done():
            self._rebalance_again = True
            return
        self._rebalancing = asyncio.create_task(self._rebalance_until_settled(), name="rebalance")

    async def _rebalance_until_settled(self) -> None:
        while True:
            self._rebalance_again = False
            try:
                await self._hooks.rebalance()
            except Exception as exc:  # the worker's tick runs a failed rebalance again
                log.warning("rebalance after a lease change failed: %s", exc)
            if not self._rebalance_again:
                return

    async def _recover_from_fence(self) -> bool:
        """The admin service fenced this worker off (it did not confirm a change in time):
        every token was dropped and the runners stopped; re-read everything; True once it
        may take partitions again."""
        if not await self._hooks.recover():
            return False  # still behind: stay fenced, try again on the next cycle
        await self._ctx.control.hdel(keys.worker_info(self._ctx.worker_id), "fenced")
        self._fenced = None
        return True

    def _assign(self) -> None:
        """Compute the assignment again if the live workers or the catalog changed."""
        me, hooks = self._ctx.worker_id, self._hooks
        live = tuple(self.live if me in self.live else sorted([*self.live, me]))
        version = hooks.partitions_version() if hooks.partitions_version is not None else None
        key = None if version is None else (live, version)
        if key is not None and key == self._assigned_for:
            return
        self._wanted = assigned(me, list(live), hooks.partitions())
        self._assigned_for = key
        self._settle = True

    def _settle_assignment(self) -> None:
        """Compare what is held with what is wanted: what goes, what to take."""
        wanted = self._wanted
        for name in [name for name in self.tokens if name not in wanted]:
            self._releasing[name] = self.tokens.pop(name)
        self._missing = {name: p for name, p in wanted.items() if name not in self.tokens}
        self._settle = False

    def _per_call(self) -> int:
        return 1 if is_cluster(self._ctx.control) else PER_CALL

    async def _acquire(self, partitions: list[TopicName]) -> None:
        """Try to take these leases (pipelined, in batches); those a live other worker holds
        stay missing and are tried again on the next cycle."""
        if not partitions:
            return
        context = self._ctx
        redis, me = context.control, context.worker_id
        script = context.scripts[LEASE_ACQUIRE.name]
        per_call = self._per_call()
        generation = self._generation
        taken = 0
        for start in range(0, len(partitions), BATCH):
            batch = partitions[start : start + BATCH]
            names = [p.full for p in batch]
            # Listed before they are taken, so the admin service's fence finds every lease.
            await redis.sadd(keys.worker_leases(me), *names)
            try:
                async with redis.pipeline(transaction=False) as pipe:
                    for first in range(0, len(batch), per_call):
                        chunk = batch[first : first + per_call]
                        lease_keys, args = LEASE_ACQUIRE.call(chunk, me, self.live)
                        await script(keys=lease_keys, args=args, client=pipe)
                    replies = await pipe.execute()
            except REDIS_FAULTS:
                # Some may have been taken without this worker hearing of it.
                self._unsure.update(zip(names, batch, strict=True))
                raise
            if self._generation != generation:
                # Every token was dropped meanwhile (a lapse, a fence): these too.
                self._unsure.update(zip(names, batch, strict=True))
                return
            failed, got = [], {}
            tokens = [token for reply in replies for token in reply]
            for partition, token in zip(batch, tokens, strict=True):
                if token:
                    got[partition.full] = token.decode() if isinstance(token, bytes) else token
                else:
                    failed.append(partition.full)
            if failed:
                await redis.srem(keys.worker_leases(me), *failed)
            # The admin service marks a worker fenced before it deletes its leases: a fence
            # read after taking these may have missed them (or a lease this worker lost to
            # it, as a refused dispatch call tells, was just taken again): give them back.
            fenced = await redis.hget(keys.worker_info(me), "fenced")
            if fenced is not None:
                await self._release(got)
                self._fenced_at(fenced.decode())
                return
            for name, token in got.items():
                self.tokens[name] = token
                self._missing.pop(name, None)
            taken += len(got)
        if taken:
            self._changed = True
            log.info("acquired %d partition lease(s)", taken)
        if len(partitions) > taken:
            log.debug("%d lease(s) still held by other workers", len(partitions) - taken)

    async def _release(self, leases: dict[str, str]) -> None:
        """Give leases up (their runners were stopped first)."""
        if not leases:
            return
        context = self._ctx
        redis = context.control
        script = context.scripts[LEASE_RELEASE.name]
        per_call = self._per_call()
        items = list(leases.items())
        for start in range(0, len(items), BATCH):
            batch = items[start : start + BATCH]
            async with redis.pipeline(transaction=False) as pipe:
                for first in range(0, len(batch), per_call):
                    chunk = batch[first : first + per_call]
                    lease_keys, args = LEASE_RELEASE.call(
                        (TopicName.from_full(name), token) for name, token in chunk
                    )
                    await script(keys=lease_keys, args=args, client=pipe)
                pipe.srem(keys.worker_leases(context.worker_id), *(name for name, _ in batch))
                await pipe.execute()
        log.info("released %d partition lease(s)", len(leases))

    async def _release_unknown(self) -> None:
        """Release the leases this worker may hold without knowing their tokens, among the
        partitions that are not its own now (those that are, it simply takes again)."""
        me, redis = self._ctx.worker_id, self._ctx.control
        candidates = [
            p
            for name, p in self._unsure.items()
            if name not in self._wanted and name not in self.tokens
        ]
        for start in range(0, len(candidates), BATCH):
            batch = candidates[start : start + BATCH]
            lease_keys = [keys.lease(p) for p in batch]
            if is_cluster(redis):
                async with redis.pipeline(transaction=False) as pipe:
                    for key in lease_keys:
                        pipe.get(key)
                    tokens = await pipe.execute()
            else:
                tokens = await redis.mget(lease_keys)
            mine = {
                p.full: token.decode()
                for p, token in zip(batch, tokens, strict=True)
                if token is not None and lease_holder(token.decode()) == me
            }
            if mine:
                log.info("releasing %d lease(s) left behind by this worker id", len(mine))
                await self._release(mine)
        self._unsure = {}
