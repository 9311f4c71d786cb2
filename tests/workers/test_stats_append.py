"""``StatsPublisher.append``: thousands of snapshot rows go out in round trips of at most
``ROWS_PER_CALL`` rows, every row in order, the snapshot's note last."""

from __future__ import annotations

import asyncio
import uuid

import redis
from redis.asyncio import Redis

from models.stats import SNAPSHOT_FIELD, SNAPSHOT_STREAM, SNAPSHOT_TAKEN, StatsSnapshot
from tests.workers.parts import make_context
from workers.stats import ROWS_PER_CALL, StatsPublisher

TOPIC = f"persistent://t/ns/append-{uuid.uuid4().hex[:8]}"  # the stream is shared


def row(index: int) -> StatsSnapshot:
    return StatsSnapshot(
        ts=1,
        interval_ms=10_000,
        worker="unit",
        tenant="t",
        namespace="ns",
        topic=TOPIC,
        partition=-1,
        subscription=f"s{index}",
    )


def test_many_rows_go_in_several_round_trips(settings, redis_server):
    count = 2 * ROWS_PER_CALL + 7
    sync = redis.Redis.from_url(redis_server.url)

    async def scenario():
        client = Redis.from_url(redis_server.url)
        publisher = StatsPublisher(make_context(settings, client))
        pipelines = []
        pipeline = client.pipeline

        def counted(*args, **kwargs):
            pipelines.append(pipeline(*args, **kwargs))
            return pipelines[-1]

        client.pipeline = counted  # type: ignore[method-assign]
        try:
            await publisher.append([row(i) for i in range(count)], ("doc", b"{}"), b"taken")
        finally:
            await client.aclose()
        return len(pipelines)

    assert asyncio.run(scenario()) == 3
    rows = sync.xrange(SNAPSHOT_STREAM)
    field = SNAPSHOT_FIELD.encode()
    snapshots = [StatsSnapshot.from_json(fields[field]) for _id, fields in rows]
    names = [snapshot.subscription for snapshot in snapshots if snapshot.topic == TOPIC]
    assert names == [f"s{i}" for i in range(count)]
    assert sync.hget(SNAPSHOT_TAKEN, "unit") == b"taken"
    assert sync.get("doc") == b"{}"
    sync.close()
