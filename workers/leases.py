"""Partition ownership for a fleet of workers: heartbeats, rendezvous assignment, leases.

Every worker heartbeats into the registry (``sl:{meta}:workers``, scored by Redis time, so hosts'
clocks do not matter) every ``lease_ttl / 3``.  The live workers are those whose heartbeat
has not expired; each partition belongs to the live worker with the highest rendezvous hash
of (worker, partition), so every worker computes the same assignment, it is balanced, and a
join or leave moves only the partitions that must move.

Assignment is the wish; the lease is the proof.  A worker dispatches a partition only while
it holds the partition's lease, a Redis key with a TTL whose value is a fencing token
``<worker>:<epoch>`` taken from a per-partition counter.  Every dispatch call presents the
token and ``dispatch.lua`` refuses a stale one, so a worker that was paused past its lease
cannot dispatch once another took over, even before it notices.  A partition that moves is
released by its old owner (runner stopped first) and acquired by the new one on its next
cycle; a dead owner's lease simply expires.  The TOPIC and SUBSCRIPTION limiters' periods live
in Redis, so the new owner continues them exactly.

Leases go over the worker's control connections (``WorkerContext.control``), so a busy
dispatch pool never delays a renewal.  The catalog's partitions, rebalancing and the recovery
after a fence are reached through ``OwnershipHooks``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time

import mmh3
from redis.exceptions import RedisError

from dataplane.scripts import ensure_loaded
from sluice.protocol import keys
from sluice.protocol.frames import script_source
from sluice.protocol.names import TopicName
from workers.context import OwnershipHooks, WorkerContext
from workers.scriptcall import PackedScript

log = logging.getLogger(__name__)


def rendezvous_owner(workers: list[str], partition: str) -> str | None:
    """The worker that should own ``partition`` (highest random weight), or None."""
    best, best_score = None, -1
    for worker in workers:
        score = mmh3.hash128(f"{worker}\x00{partition}", signed=False)
        if score > best_score:
            best, best_score = worker, score
    return best


class LeaseOwnership:
    """Owns the partitions that rendezvous hashing gives this worker, through leases."""

    def __init__(self, lease_ttl_seconds: float) -> None:
        self.ttl_ms = max(300, int(lease_ttl_seconds * 1000))
        self.interval = self.ttl_ms / 3000
        self.tokens: dict[str, str] = {}
        self.live: list[str] = []
        self.context: WorkerContext | None = None
        self.hooks: OwnershipHooks | None = None
        self._renew_script: PackedScript | None = None
        self._task: asyncio.Task | None = None
        self._lock = asyncio.Lock()
        # Leases taken or lost since the worker was last asked to rebalance: kept across a
        # cycle that fails after the change (Redis gone again), so the next one still asks.
        self._changed = False

    # --- Ownership protocol ---------------------------------------------------------------

    async def join(self, context: WorkerContext, hooks: OwnershipHooks) -> None:
        """Register in the fleet (heartbeat), holding no partition yet."""
        self.context, self.hooks = context, hooks
        if self._renew_script is None:
            self._renew_script = PackedScript(context.control, script_source("lease_renew"))
        await self._register()
        await self._heartbeat()

    async def start(self) -> None:
        """Take this worker's share of the partitions, and keep it up to date."""
        await self.cycle(rebalance=False)
        self._task = asyncio.create_task(self._run(), name="leases")

    async def stop(self) -> None:
        """Release every lease (the worker stopped its runners already) and deregister."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        context = self.context
        if context is None:
            return
        async with self._lock:
            held, self.tokens = self.tokens, {}
            with contextlib.suppress(RedisError):
                await self._release(held)
        with contextlib.suppress(RedisError):
            redis, me = context.control, context.worker_id
            await redis.zrem(keys.WORKERS, me)
            await redis.delete(keys.worker_info(me), keys.worker_leases(me))
            await redis.hdel(keys.APPLIED, me)
        if self._renew_script is not None:
            await self._renew_script.close()
            self._renew_script = None

    def owns(self, partition: TopicName) -> bool:
        """True while this worker holds the partition's lease."""
        return partition.full in self.tokens

    def token(self, partition: TopicName) -> str:
        """The fencing token of the lease this worker holds."""
        return self.tokens.get(partition.full, "")

    def lost(self, partition: TopicName) -> None:
        """A dispatch call was fenced off: the lease is gone."""
        self.tokens.pop(partition.full, None)

    # --- the cycle ------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.cycle()
            except asyncio.CancelledError:
                raise
            except RedisError as exc:
                log.warning("lease cycle: Redis unavailable (%s)", exc)
            except Exception:
                log.exception("lease cycle failed; will run again")

    async def _register(self) -> None:
        context = self.context
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

    async def _heartbeat(self) -> int:
        """Renew this worker's registration; return Redis time in ms."""
        redis, me = self.context.control, self.context.worker_id
        seconds, micros = await redis.time()
        now_ms = seconds * 1000 + micros // 1000
        async with redis.pipeline(transaction=False) as pipe:
            pipe.zadd(keys.WORKERS, {me: now_ms + self.ttl_ms})
            pipe.zremrangebyscore(keys.WORKERS, "-inf", now_ms)
            pipe.zrangebyscore(keys.WORKERS, now_ms, "+inf")
            pipe.hset(keys.worker_info(me), "partitions", len(self.tokens))
            pipe.pexpire(keys.worker_info(me), self.ttl_ms * 2)
            pipe.pexpire(keys.worker_leases(me), self.ttl_ms * 2)
            pipe.hget(keys.worker_info(me), "fenced")
            results = await pipe.execute()
        self.live = sorted(w.decode() for w in results[2])
        if results[3] == 1:  # the info hash had expired (a long pause): register again
            await self._register()
        if results[6] is not None:
            await self._recover_from_fence(results[6].decode())
        return now_ms

    async def _recover_from_fence(self, position: str) -> None:
        """The admin service fenced this worker off (it did not confirm a change in time):
        give every partition up, re-read everything, then take partitions again."""
        log.error("fenced off by the admin service at change %s: re-reading everything", position)
        self.tokens = {}
        await self.hooks.rebalance()
        if not await self.hooks.recover():
            return  # still behind: stay fenced, try again on the next cycle
        await self.context.control.hdel(keys.worker_info(self.context.worker_id), "fenced")

    async def cycle(self, rebalance: bool = True) -> None:
        """Heartbeat, then renew, release and acquire leases to match the assignment."""
        async with self._lock:
            await ensure_loaded(self.context.control)
            await self._heartbeat()
            me = self.context.worker_id
            live = self.live if me in self.live else [*self.live, me]
            wanted = {
                p.full: p for p in self.hooks.partitions() if rendezvous_owner(live, p.full) == me
            }
            await self._renew(wanted)
            leaving = {name: token for name, token in self.tokens.items() if name not in wanted}
            if leaving:
                for name in leaving:
                    del self.tokens[name]
                self._changed = False
                await self.hooks.rebalance()  # stops their runners before the leases go
                await self._release(leaving)
            missing = [p for name, p in wanted.items() if name not in self.tokens]
            await self._acquire(missing)
        if self._changed:
            self._changed = False
            if rebalance:
                await self.hooks.rebalance()

    async def _renew(self, wanted: dict[str, TopicName]) -> None:
        held = [(name, token) for name, token in self.tokens.items() if name in wanted]
        if not held:
            return
        script = self._renew_script
        results = await asyncio.gather(
            *(
                script.call(script.prefix([keys.lease(wanted[name])]), [token, self.ttl_ms])
                for name, token in held
            )
        )
        lost = [name for (name, _), ok in zip(held, results, strict=True) if not ok]
        for name in lost:
            log.warning("lease of %s lost; stop dispatching it", name)
            # A fenced dispatcher may have dropped it already (``lost``) during the renewal.
            self.tokens.pop(name, None)
            self._changed = True

    async def _acquire(self, partitions: list[TopicName]) -> None:
        if not partitions:
            return
        context = self.context
        script = context.scripts["lease_acquire"]
        async with context.control.pipeline(transaction=False) as pipe:
            for partition in partitions:
                await script(
                    keys=[keys.lease(partition), keys.lease_epoch(partition)],
                    args=[context.worker_id, self.ttl_ms],
                    client=pipe,
                )
            results = await pipe.execute()
        taken = []
        for partition, token in zip(partitions, results, strict=True):
            if token:
                self.tokens[partition.full] = token.decode() if isinstance(token, bytes) else token
                taken.append(partition.full)
                self._changed = True
        if taken:
            log.info("acquired %d partition lease(s)", len(taken))
            await context.control.sadd(keys.worker_leases(context.worker_id), *taken)

    async def _release(self, leases: dict[str, str]) -> None:
        """Give leases up (their runners were stopped first)."""
        if not leases:
            return
        context = self.context
        script = context.scripts["lease_release"]
        async with context.control.pipeline(transaction=False) as pipe:
            for name, token in leases.items():
                partition = TopicName.from_full(name)
                await script(keys=[keys.lease(partition)], args=[token], client=pipe)
            pipe.srem(keys.worker_leases(context.worker_id), *leases)
            await pipe.execute()
        log.info("released %d partition lease(s)", len(leases))
