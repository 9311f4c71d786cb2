"""Restart Redis (append-only file on) in the middle of throttled dispatch.

A private ``redis-server`` runs with ``appendonly yes`` and ``appendfsync always``: every write
is fsynced before it is acknowledged, so an acknowledged message or ack survives a restart
and even a crash.  (With ``everysec``, Redis's default, a crash, unlike this SIGTERM shutdown,
can lose up to a second of writes: sends the producer saw succeed, and acks that are then
redelivered.)

A worker process and a client use that server.  A topic dispatch rate set before the restart
throttles a backlog; Redis is stopped with SIGTERM and started again on the same port and
data folder.  (The 1 s outage outlasts the worker's 1.5 s lease only sometimes; when it does,
the worker takes a new lease once Redis is back, which the tolerance below allows for.)  The
worker, the consumer and the producer carry on without being restarted, the limit still
holds (by T seconds after the subscription exists, at most LIMIT x (floor(T) + 1) were
delivered, and no second holds more than two periods' quotas), nothing that was
acknowledged comes back, and every message, including those sent after the restart, is
received and acknowledged.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

import sluice
from server.embedded_redis import EmbeddedRedis
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.fleet import Collector, Fleet
from tests.workers.conftest import ADMIN, rate, wait_until

pytestmark = pytest.mark.faults

TOPIC = "persistent://acme/orders/restart"
LIMIT = 300  # messages per 1 s period
QUEUE = 50
BEFORE, AFTER = 1200, 300
DOWN_SECONDS = 1.0


@pytest.fixture
def aof_redis(tmp_path: Path):
    """A private redis-server with an fsync-always append-only file."""
    server = EmbeddedRedis(
        tmp_path / "redis-aof", appendonly=True, extra_args=("--appendfsync", "always")
    )
    server.start()
    yield server
    server.stop()


def most_in_any_window(times: list[float], seconds: float) -> int:
    """The largest number of ``times`` (sorted) inside any window ``seconds`` long."""
    best, start = 0, 0
    for end in range(len(times)):
        while times[end] - times[start] > seconds:
            start += 1
        best = max(best, end - start + 1)
    return best


def test_dispatch_survives_a_redis_restart_and_keeps_its_limit(
    http, namespace, settings, aof_redis, tmp_path
):
    assert http.put(f"{ADMIN}/persistent/acme/orders/restart").status_code == 204
    assert (
        http.post(
            f"{ADMIN}/persistent/acme/orders/restart/dispatchRate", json=rate(msg=LIMIT)
        ).status_code
        == 204
    )
    # The worker reads the policy and the topic from the database at start.
    fleet = Fleet(settings, tmp_path, redis_url=aof_redis.url)
    try:
        fleet.start("w1")
        wait_until(lambda: fleet.tokens(TOPIC, 0)[TOPIC], timeout=15)
        with sluice.Client(aof_redis.url) as client:
            subscribed_at = time.monotonic()  # the subscription exists from here on
            collector = Collector(client, TOPIC, receiver_queue_size=QUEUE)
            producer = client.create_producer(TOPIC, block_if_queue_full=True)
            for i in range(BEFORE):
                producer.send_async(f"m{i}".encode(), None)
            producer.flush()
            wait_until(lambda: len(collector.seen) >= LIMIT, timeout=10)

            stopped_at = time.monotonic()
            aof_redis.stop()
            time.sleep(DOWN_SECONDS)
            aof_redis.start()
            restarted_at = time.monotonic()

            for i in range(BEFORE, BEFORE + AFTER):
                producer.send_async(f"m{i}".encode(), None)
            producer.flush()
            total = BEFORE + AFTER
            wait_until(lambda: len(collector.seen) == total, timeout=30, every=0.1)
            time.sleep(0.5)  # late duplicates, if any, would show up now
            collector.stop()
            base = TopicName.from_full(TOPIC)
            left_pending = fleet.redis.xpending(keys.log(base), "sub")["pending"]
        assert fleet.processes["w1"].poll() is None, "the worker died with Redis"
    finally:
        fleet.stop_all()

    receipts = sorted(collector.receipts)
    after = [t for t in receipts if t >= restarted_at]
    busiest = most_in_any_window(receipts, 1.0)
    after_rate = len(after) / (after[-1] - after[0]) if len(after) > 1 else 0.0
    report = (
        f"sent {total}, received {len(collector.seen)} distinct, {collector.duplicates} "
        f"duplicates, {left_pending} left pending; Redis down {restarted_at - stopped_at:.2f} s; "
        f"busiest 1 s window {busiest} (limit {LIMIT}), {len(after)} after the restart at "
        f"{after_rate:.0f} msg/s; client errors during the outage: {len(collector.errors)}"
    )
    assert set(collector.seen) == {f"m{i}".encode() for i in range(total)}, report
    # Only what sat unacknowledged in the receiver queue may come again, never an acked one.
    assert collector.duplicates <= QUEUE, report
    assert left_pending == 0, report
    # Tolerance: one period's allowance on top of limit x elapsed (a window can straddle two
    # periods), so at most 2 x LIMIT in any one-second window.
    assert busiest <= 2 * LIMIT, report
    # The strict bound: by T seconds after the subscription exists, at most
    # LIMIT x (floor(T) + 1) (counted from the first receipt instead, a consumer that got the
    # first quota late would make the bound tighter than the promise).
    elapsed = receipts[-1] - subscribed_at
    assert len(receipts) <= LIMIT * (math.floor(elapsed) + 1), report
    assert len(after) <= LIMIT * (after[-1] - restarted_at) + LIMIT, report
    # And it did resume dispatching at about the limit, not at a trickle.
    assert after_rate > 0.5 * LIMIT, report
