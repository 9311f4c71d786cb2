"""Following the admin service's change events (the ``sluice:events`` stream), and confirming.

Policy and broker-config events reload the policy snapshot and re-apply every limit in place;
catalog events (topics, subscriptions, namespaces, tenants) update the Redis side.  Events only
say *what* changed: the worker re-reads the database, so a duplicate or an out-of-order event
is harmless, and a periodic full resync heals a missed one.

After each batch the worker waits until no dispatch call issued under the old limits is still
running, then confirms the stream position it has reached (``sl:meta:applied`` and the
``sl:applied`` channel).  The admin service answers a write only once every live worker has
confirmed a position at or past the write's events (``api.enforcement``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

import orjson
from redis.exceptions import RedisError

from models import keys
from models.protocol import parse_position

if TYPE_CHECKING:
    from workers.worker import Worker

log = logging.getLogger(__name__)

POLICY_KINDS = frozenset({"policy", "broker.config"})


async def stream_position(worker: Worker) -> str:
    """The id of the newest event now (read before a full load, so nothing falls between)."""
    last = await worker.control.xrevrange(worker.settings.events_stream, count=1)
    return last[0][0].decode() if last else "0-0"


class EventFollower:
    """Reads the change-event stream from a position, applies it, confirms what it applied."""

    def __init__(self, worker: Worker, start: str) -> None:
        self.worker = worker
        self.position = start  # the last event read and applied
        self._advanced = asyncio.Event()

    async def run(self) -> None:
        """Apply events until cancelled."""
        worker = self.worker
        stream = worker.settings.events_stream
        while True:
            try:
                reply = await worker.control.xread({stream: self.position}, block=1000, count=500)
            except asyncio.CancelledError:
                raise
            except RedisError as exc:
                log.warning("event stream unavailable (%s); retrying", exc)
                await asyncio.sleep(0.5)
                continue
            if not reply:
                continue
            events = []
            last = self.position
            for _name, entries in reply:
                for entry_id, fields in entries:
                    last = entry_id.decode()
                    events.append(
                        (
                            fields[b"kind"].decode(),
                            fields[b"entity"].decode(),
                            orjson.loads(fields.get(b"payload", b"{}")),
                        )
                    )
            try:
                await apply_events(worker, events)
            except asyncio.CancelledError:
                raise
            except Exception:
                # Not confirmed: the admin service waits (and in the end fences this worker
                # off) rather than answer a write this worker may not enforce.
                log.exception("applying change events failed; retrying with a full resync")
                await self._resync_after_failure()
                continue
            await self.confirm(last)

    async def _resync_after_failure(self) -> None:
        try:
            await self.worker.resync()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("resync failed; retrying")
            await asyncio.sleep(0.5)

    async def confirm(self, position: str) -> None:
        """Record that every change up to ``position`` is enforced by this worker."""
        worker = self.worker
        await worker.gate.drained(worker.gate.generation)
        self.position = position
        async with worker.control.pipeline(transaction=False) as pipe:
            pipe.hset(keys.APPLIED, worker.id, position)
            pipe.publish(keys.APPLIED_CHANNEL, f"{worker.id}\t{position}")
            await pipe.execute()
        event, self._advanced = self._advanced, asyncio.Event()
        event.set()

    async def caught_up(self, target: str, timeout: float) -> bool:
        """Wait until events up to ``target`` are applied; False after ``timeout``."""
        wanted = parse_position(target)
        deadline = time.monotonic() + timeout
        while parse_position(self.position) < wanted:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self._advanced.wait(), left)
            except TimeoutError:
                return False
        return True


async def apply_events(worker: Worker, events: list[tuple[str, str, dict]]) -> None:
    """Reload policies once per batch; hand catalog events to the catalog."""
    started = time.monotonic()
    policy_events = [(kind, payload) for kind, _e, payload in events if kind in POLICY_KINDS]
    if policy_events:
        namespaces = {
            payload.get("namespace") for kind, payload in policy_events if kind == "policy"
        }
        if None in namespaces:
            await worker.policy.reload()
        else:
            broker = any(kind == "broker.config" for kind, _p in policy_events)
            await worker.policy.reload_parts(namespaces, broker)
        worker.apply_limits()
        worker.metrics.policy_reload_seconds = time.monotonic() - started
        if any(kind == "broker.config" for kind, _e, _p in events):
            await worker.catalog.publish_client_config()
    catalog_events = [e for e in events if e[0] not in POLICY_KINDS]
    if catalog_events:
        await worker.catalog.apply_events(catalog_events)
