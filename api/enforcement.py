"""Read-your-writes for the data plane: a write is answered once every worker enforces it.

A committed change reaches the workers as events on the change-event stream.  Each worker
applies what it reads (policies re-resolved, catalog changes made), waits until no dispatch
call issued under the superseded limits is still running, and then confirms the stream
position it has reached (``sl:{meta}:applied`` and the ``sl:applied`` channel).  After the
commit a request publishes its events itself and waits here until every live worker has
confirmed a position at or past them, so that once the answer is out no entry is dispatched
under a superseded limit and every worker knows the new topics and subscriptions.

A worker that does not confirm within ``timeout`` (stuck, or cut off from the database) is
fenced: its partition leases are deleted, so its next dispatch call is refused, and it may
take partitions again only after it has re-read everything.  A worker whose heartbeat expires
meanwhile has left the fleet and is no longer waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from sluice.protocol import keys
from sluice.protocol.connection import REDIS_FAULTS
from sluice.protocol.frames import parse_position
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import FLEET_READ, LEASE_FENCE
from sluice.waits import wait_event

log = logging.getLogger(__name__)

RECHECK_SECONDS = 0.25  # re-read the fleet and the confirmations this often while waiting


@dataclass
class Outcome:
    """How a wait ended: the workers fenced for not confirming, or why it could not wait."""

    fenced: list[str] = field(default_factory=list)
    pending: str = ""  # a reason when enforcement could not be confirmed (Redis down)


class Enforcement:
    """Tracks the workers' confirmations and waits for a stream position."""

    def __init__(self, redis: Redis, timeout: float) -> None:
        self.redis = redis
        self.timeout = timeout
        self.applied: dict[str, tuple[int, int]] = {}
        self._changed = asyncio.Event()
        self._fence = redis.register_script(LEASE_FENCE.source)
        self._fleet = redis.register_script(FLEET_READ.source)

    async def run(self) -> None:
        """Follow the confirmations channel until cancelled (reconnecting on errors)."""
        while True:
            pubsub = self.redis.pubsub()
            try:
                await pubsub.subscribe(keys.APPLIED_CHANNEL)
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1)
                    if message is not None and message["type"] == "message":
                        worker, _, position = message["data"].decode().partition("\t")
                        self._note(worker, parse_position(position))
            except asyncio.CancelledError:
                raise
            except REDIS_FAULTS as exc:
                log.warning("confirmation channel lost (%s); reconnecting", exc)
                await asyncio.sleep(0.5)
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pubsub.aclose(), 1.0)

    def _note(self, worker: str, position: tuple[int, int]) -> None:
        if position > self.applied.get(worker, (0, 0)):
            self.applied[worker] = position
            event, self._changed = self._changed, asyncio.Event()
            event.set()

    def queue_fleet(self, pipe: Pipeline) -> Any:
        """Queue the read of the live workers and their confirmations on ``pipe`` (to be
        handed to ``wait`` as ``fleet``): the request that publishes its events reads the
        fleet in the same round trip.  Queued as a plain EVALSHA, so that the pipeline does
        not check the script's presence first (``wait`` loads it when Redis lacks it)."""
        fleet_keys, args = FLEET_READ.call()
        return pipe.evalsha(FLEET_READ.sha, len(fleet_keys), *fleet_keys, *args)

    async def wait(self, position: str, fleet: Any = None) -> Outcome:
        """Return once every live worker enforces everything up to ``position``.

        ``fleet``: the reply of ``queue_fleet`` queued after the events were published
        (an error reply, or None, reads the fleet again)."""
        target = parse_position(position)
        deadline = time.monotonic() + self.timeout
        first = fleet if isinstance(fleet, list) else None
        try:
            while True:
                if first is not None:
                    live, first = self._fleet_reply(first), None
                else:
                    live = await self._live_workers()
                missing = [w for w in live if self._behind(w, target)]
                if not missing:
                    return Outcome()
                left = deadline - time.monotonic()
                if left <= 0:
                    await self._fence_off(missing, position)
                    return Outcome(fenced=missing)
                end = time.monotonic() + min(RECHECK_SECONDS, left)
                while time.monotonic() < end and any(self._behind(w, target) for w in missing):
                    await wait_event(self._changed, end - time.monotonic())
                if not any(self._behind(w, target) for w in missing):
                    # Every worker of the fleet read after the events confirmed them.  A
                    # worker that joined since applies every event published before it
                    # joined before it dispatches (``workers.worker``): no second read.
                    return Outcome()
        except REDIS_FAULTS as exc:
            log.warning("cannot confirm enforcement (Redis unavailable): %s", exc)
            return Outcome(pending=f"Redis unavailable: {exc}")

    def _behind(self, worker: str, target: tuple[int, int]) -> bool:
        return self.applied.get(worker, (0, 0)) < target

    async def _live_workers(self) -> list[str]:
        """Workers whose heartbeat has not expired (by Redis time), in one round trip; the
        positions they stored are noted too (confirmations sent before this process
        listened, or lost)."""
        fleet_keys, args = FLEET_READ.call()
        return self._fleet_reply(await self._fleet(keys=fleet_keys, args=args))

    def _fleet_reply(self, reply: list[Any]) -> list[str]:
        """The live workers of a ``fleet_read.lua`` reply; their stored positions noted."""
        live = []
        for worker, position in zip(reply[::2], reply[1::2], strict=True):
            name = worker.decode()
            live.append(name)
            if position:
                self._note(name, parse_position(position.decode()))
        return live

    async def _fence_off(self, workers: list[str], position: str) -> None:
        """Delete the leases of workers that did not confirm; mark them to re-read all."""
        for worker in workers:
            log.error(
                "worker %s did not confirm change %s within %.1f s: fencing it off",
                worker,
                position,
                self.timeout,
            )
            await self.redis.hset(keys.worker_info(worker), "fenced", position)
            partitions = await self.redis.smembers(keys.worker_leases(worker))
            async with self.redis.pipeline(transaction=False) as pipe:
                for name in partitions:
                    partition = TopicName.from_full(name.decode())
                    lease_keys, args = LEASE_FENCE.call(partition, worker)
                    await self._fence(keys=lease_keys, args=args, client=pipe)
                await pipe.execute()
