"""Following the admin service's change events, applying them, and confirming.

The stream is read by ``dataplane.events.ChangeFollower``, the reader the admin service's
policy cache uses too.  Each batch goes to ``apply`` (the worker reloads the policies it names
and re-applies every limit in place, or updates the catalog).  Then the follower waits until
no dispatch call issued under the old limits is still running (the ``DispatchGate``), and
only then confirms the stream position it has reached (``sl:{meta}:applied`` and the
``sl:applied`` channel).  The admin service answers a write only once every live worker has
confirmed a position at or past the write's events (``api.enforcement``).

A batch that fails to apply is not confirmed: ``resync`` re-reads everything and the batch is
read again.  Meanwhile the admin service waits (and in the end fences this worker off) rather
than answer a write this worker may not enforce.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import InitVar, dataclass, field

from redis.asyncio import Redis
from redis.exceptions import RedisError

from dataplane.events import ChangeEvent, ChangeFollower
from sluice.protocol import keys
from sluice.protocol.frames import parse_position
from sluice.waits import wait_event
from workers.gate import DispatchGate

log = logging.getLogger(__name__)

POLICY_KINDS = frozenset({"policy", "broker.config", "resourcegroup"})  # not the catalog's


@dataclass(eq=False)
class EventFollower:
    """Reads the change-event stream from a position, applies it, confirms what it applied."""

    control: Redis
    stream: InitVar[str]
    worker_id: str
    gate: DispatchGate
    start: InitVar[str]
    apply: Callable[[list[ChangeEvent]], Awaitable[None]]
    resync: Callable[[], Awaitable[None]]
    reader: ChangeFollower = field(init=False)
    _advanced: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)

    def __post_init__(self, stream: str, start: str) -> None:
        self.reader = ChangeFollower(self.control, stream, start, count=500, retry_seconds=0.5)

    @property
    def position(self) -> str:
        """The last event read, applied and confirmed."""
        return self.reader.position

    async def run(self) -> None:
        """Apply events until cancelled."""
        await self.reader.follow(self._on_batch, self._on_unavailable)

    def _on_unavailable(self, exc: RedisError) -> None:
        log.warning("event stream unavailable (%s); retrying", exc)

    async def _on_batch(self, events: list[ChangeEvent]) -> bool:
        try:
            await self.apply(events)
        except asyncio.CancelledError:
            raise
        except Exception:
            # Not confirmed: the admin service waits (and in the end fences this worker
            # off) rather than answer a write this worker may not enforce.
            log.exception("applying change events failed; retrying with a full resync")
            await self._resync_after_failure()
            return False
        await self.confirm(events[-1].id)
        return True

    async def _resync_after_failure(self) -> None:
        try:
            await self.resync()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("resync failed; retrying")
            await asyncio.sleep(0.5)

    async def confirm(self, position: str) -> None:
        """Record that every change up to ``position`` is enforced by this worker."""
        await self.gate.drained(self.gate.generation)
        self.reader.position = position
        async with self.control.pipeline(transaction=False) as pipe:
            pipe.hset(keys.APPLIED, self.worker_id, position)
            pipe.publish(keys.APPLIED_CHANNEL, f"{self.worker_id}\t{position}")
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
            if not await wait_event(self._advanced, left):
                return False
        return True


def split_events(
    events: list[ChangeEvent],
) -> tuple[set[str | None], bool, list[ChangeEvent]]:
    """A batch as the worker applies it: the namespaces whose policies changed (None: any,
    reload everything), whether the broker configuration changed, and the catalog events."""
    namespaces = {e.payload.get("namespace") for e in events if e.kind == "policy"}
    broker = any(e.kind == "broker.config" for e in events)
    return namespaces, broker, [e for e in events if e.kind not in POLICY_KINDS]
