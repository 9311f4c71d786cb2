"""The data-plane protocol check of the admin service and the workers (``sluice.protocol.version``).

``announce`` runs at start: it records the protocol this release speaks and the oldest it
works beside, or raises ``ProtocolMismatch`` (nothing recorded) when the deployment already
requires a newer one.  ``watch`` runs beside a worker's other loops and ends with that error
once a newer release that drops this one's protocol has announced itself, so the worker stops
(its leases released) instead of half-working.
"""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from sluice.protocol import keys
from sluice.protocol.scripts import PROTOCOL_ANNOUNCE
from sluice.protocol.version import (
    NEWEST_FIELD,
    OLDEST_FIELD,
    OLDEST_PEER,
    PROTOCOL,
    check,
    mismatch,
)


async def announce(redis: Redis, component: str) -> tuple[int, int]:
    """Announce this release's protocol; the deployment's (oldest, newest) afterwards."""
    script_keys, args = PROTOCOL_ANNOUNCE.call(PROTOCOL, OLDEST_PEER)
    try:
        reply = await redis.eval(PROTOCOL_ANNOUNCE.source, len(script_keys), *script_keys, *args)
    except ResponseError as exc:
        words = str(exc).split()
        if words and words[0] == "ProtocolMismatch":
            raise mismatch(component, int(words[1]), int(words[2])) from None
        raise
    return int(reply[0]), int(reply[1])


async def watch(redis: Redis, component: str, every: float = 5.0) -> None:
    """Return never; raise ``ProtocolMismatch`` once the deployment requires a newer protocol
    (Redis not answering is someone else's alarm: the next turn reads again)."""
    while True:
        await asyncio.sleep(every)
        try:
            oldest, newest = await redis.hmget(keys.CLIENT_CONFIG, OLDEST_FIELD, NEWEST_FIELD)
        except RedisError:
            continue
        check(component, oldest, newest)
