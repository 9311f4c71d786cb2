"""Fresh data for a report run: ask the workers for the stats interval so far, and say up to
when the data reaches.

Workers append snapshots every stats interval (``SLUICE_STATS_INTERVAL_SECONDS``), so a run
that read only what they appended would miss up to an interval of the latest traffic.  Before
it lands, a run sets ``SNAPSHOT_REQUEST`` to a new value; every live worker (the heartbeat
registry ``sl:{meta}:workers``) snapshots at its next tick (about a second) and notes the time
and the request in ``SNAPSHOT_TAKEN``.  The run waits for all of them, at most ``timeout``
seconds; its data reaches up to the oldest snapshot of a live worker (``data_until``): the
request's time when every worker answered, earlier when one did not.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import orjson

from models.stats import SNAPSHOT_REQUEST, SNAPSHOT_REQUEST_TTL_SECONDS, SNAPSHOT_TAKEN
from sluice.protocol import keys

POLL_SECONDS = 0.1


def _live_workers(redis) -> list[str]:
    """The workers whose heartbeat has not expired (scored by expiry, ms of Redis time)."""
    seconds, micros = redis.time()
    now_ms = seconds * 1000 + micros // 1000
    return [w.decode() for w in redis.zrangebyscore(keys.WORKERS, now_ms, "+inf")]


def _taken(redis, workers: list[str]) -> dict[str, dict]:
    if not workers:
        return {}
    values = redis.hmget(SNAPSHOT_TAKEN, workers)
    return {w: orjson.loads(v) for w, v in zip(workers, values, strict=True) if v is not None}


def request_snapshots(redis, timeout: float = 5.0) -> datetime:
    """Ask every live worker for a snapshot of the interval so far and wait for them (at
    most ``timeout`` seconds); the time up to which the stream then holds every live
    worker's data.  ``redis`` is a synchronous redis-py client."""
    asked = datetime.now(UTC)
    request = f"{int(asked.timestamp() * 1000)}-{uuid.uuid4().hex}"
    redis.set(SNAPSHOT_REQUEST, request, ex=SNAPSHOT_REQUEST_TTL_SECONDS)
    deadline = time.monotonic() + timeout
    while True:
        workers = _live_workers(redis)
        taken = _taken(redis, workers)
        waiting = [w for w in workers if taken.get(w, {}).get("request") != request]
        if not waiting:
            return asked
        if time.monotonic() >= deadline:
            break
        time.sleep(POLL_SECONDS)
    # Some worker did not answer: its data reaches as far as its last snapshot (a worker
    # that never took one has not run a whole interval yet).
    last = [taken[w]["ts"] for w in waiting if w in taken]
    return min(asked, *(datetime.fromtimestamp(ts / 1000, UTC) for ts in last))
