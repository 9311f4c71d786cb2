"""Following the admin service's change events (the ``sluice:events`` stream).

Policy and broker-config events reload the policy snapshot and re-apply every limiter in
place; catalog events (topics, subscriptions, namespaces, tenants) update the Redis side.
Events only say *what* changed: the worker re-reads the database, so a duplicate or an
out-of-order event is harmless, and a periodic full resync heals a missed one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

import orjson
from redis.exceptions import RedisError

if TYPE_CHECKING:
    from workers.worker import Worker

log = logging.getLogger(__name__)

POLICY_KINDS = frozenset({"policy", "broker.config"})


async def stream_position(worker: Worker) -> str:
    """The id of the newest event now (read before a full load, so nothing falls between)."""
    last = await worker.redis.xrevrange(worker.settings.events_stream, count=1)
    return last[0][0].decode() if last else "0-0"


async def follow_events(worker: Worker, start: str) -> None:
    """Apply events after ``start`` until cancelled."""
    stream = worker.settings.events_stream
    position = start
    while True:
        try:
            reply = await worker.redis.xread({stream: position}, block=1000, count=500)
        except asyncio.CancelledError:
            raise
        except RedisError as exc:
            log.warning("event stream unavailable (%s); retrying", exc)
            await asyncio.sleep(0.5)
            continue
        if not reply:
            continue
        events = []
        for _name, entries in reply:
            for entry_id, fields in entries:
                position = entry_id.decode()
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
            log.exception("applying change events failed; the next resync heals it")


async def apply_events(worker: Worker, events: list[tuple[str, str, dict]]) -> None:
    """Reload policies once per batch; hand catalog events to the catalog."""
    started = time.monotonic()
    if any(kind in POLICY_KINDS for kind, _e, _p in events):
        await worker.policy.reload()
        worker.apply_limits()
        worker.metrics.policy_reload_seconds = time.monotonic() - started
        if any(kind == "broker.config" for kind, _e, _p in events):
            await worker.catalog.publish_client_config()
    catalog_events = [e for e in events if e[0] not in POLICY_KINDS]
    if catalog_events:
        await worker.catalog.apply_events(catalog_events)
