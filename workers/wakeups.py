"""Wake-ups from producers and consumers, received over Redis pub/sub.

Producers publish when a subscription that found no data gets some; consumers when they give
permits to a waiting subscription, join, leave or ask for redelivery.  Pub/sub can lose
messages while the connection is down, so every (re)subscription wakes every dispatcher, and
parked dispatchers also look again on their own every few seconds.  The listener knows no
worker: it hands each message to ``on_wake`` and calls ``on_subscribed`` after each
(re)subscription.  A subscription lost again at once (a Redis Cluster client that drops its
connections at every CLUSTERDOWN while a slot has no master) backs off, doubling up to 5 s: the
backoff starts over only once a subscription has held ``HELD_SECONDS``, so a flapping channel
does not wake every dispatcher many times a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis

from sluice.protocol import keys
from sluice.protocol.connection import REDIS_FAULTS

log = logging.getLogger(__name__)
HELD_SECONDS = 5.0  # a subscription that lasted this long starts the backoff over


async def _deliver(on_wake: Callable[[str], Awaitable[None]], data: bytes) -> None:
    """Hand one message on; anyone who can publish on the channel can send anything, so a
    message that cannot be read or handled is logged and dropped, never fatal."""
    try:
        await on_wake(data.decode())
    except (UnicodeDecodeError, ValueError, KeyError) as exc:
        log.warning("ignored an unreadable wake-up message %r: %s", data[:100], exc)


async def listen_for_wakeups(
    redis: Redis,
    on_wake: Callable[[str], Awaitable[None]],
    on_subscribed: Callable[[], None],
) -> None:
    """Hand wake-up messages to ``on_wake`` until cancelled; reconnect on errors."""
    backoff = 0.1
    loop = asyncio.get_running_loop()
    while True:
        pubsub = redis.pubsub()
        subscribed_at = None
        try:
            await pubsub.subscribe(keys.WAKE_CHANNEL)
            subscribed_at = loop.time()
            on_subscribed()
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if message is not None and message["type"] == "message":
                    await _deliver(on_wake, message["data"])
        except asyncio.CancelledError:
            raise
        except REDIS_FAULTS as exc:
            if subscribed_at is not None and loop.time() - subscribed_at >= HELD_SECONDS:
                backoff = 0.1
            log.warning("wake-up channel lost (%s); reconnecting in %.1f s", exc, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
        finally:
            # Closing a connection cancelled mid-read can block: never wait long for it.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pubsub.aclose(), 1.0)
