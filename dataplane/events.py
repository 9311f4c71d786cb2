"""Following the change-event stream (``Settings.events_stream``) the admin service publishes.

An event only says *what* changed (its kind, the entity, a small payload): readers re-read
the database, so a duplicate or an out-of-order event is harmless.  ``ChangeFollower`` is the
one reader of the stream; the admin service's policy cache and every worker use it:

* it reads batches from a position (``$`` = only what comes from now on), blocking a second
  at a time, well under the client's socket timeout;
* it hands each batch to ``on_batch``, which answers whether the batch is done: True moves the
  position past it, False reads the same batch again (a worker that failed to apply it);
* while the stream cannot be read it calls ``on_unavailable`` and retries after a pause.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """One change event: stream id, kind (``policy``, ``topic``, ...), entity, payload."""

    id: str
    kind: str
    entity: str
    payload: dict[str, Any]


def parse_batch(reply: list | None) -> list[ChangeEvent]:
    """The events of an XREAD reply, in stream order."""
    events = []
    for _stream, entries in reply or []:
        for entry_id, fields in entries:
            events.append(
                ChangeEvent(
                    entry_id.decode(),
                    fields[b"kind"].decode(),
                    fields[b"entity"].decode(),
                    orjson.loads(fields.get(b"payload", b"{}")),
                )
            )
    return events


async def latest_position(redis: Redis, stream: str) -> str:
    """The id of the newest event now ("0-0" when there is none)."""
    last = await redis.xrevrange(stream, count=1)
    return last[0][0].decode() if last else "0-0"


@dataclass(eq=False)
class ChangeFollower:
    """Reads the change-event stream in batches from ``position``."""

    redis: Redis
    stream: str
    position: str = "$"  # the last event done with ("$": none yet, start at new ones)
    _: KW_ONLY
    count: int = 500
    block_ms: int = 1000
    retry_seconds: float = 0.5

    async def follow(
        self,
        on_batch: Callable[[list[ChangeEvent]], Awaitable[bool]],
        on_unavailable: Callable[[RedisError], None],
    ) -> None:
        """Hand every batch to ``on_batch`` until cancelled."""
        while True:
            try:
                reply = await self.redis.xread(
                    {self.stream: self.position}, block=self.block_ms, count=self.count
                )
            except asyncio.CancelledError:
                raise
            except RedisError as exc:
                on_unavailable(exc)
                await asyncio.sleep(self.retry_seconds)
                continue
            events = parse_batch(reply)
            if events and await on_batch(events):
                self.position = events[-1].id
