"""Consumers coming and going on sleeping partitions with an empty log do not wake them.

The worker sets the flag again and reads such a partition with a runner it never starts
(``workers.glance``): seen from outside, stats show the consumers as they are, a dead
consumer is still released, and the first message still wakes the partition at once.
"""

from __future__ import annotations

import time

import pytest
import redis

import sluice
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.workers.conftest import ADMIN, wait_until
from tests.workers.test_dormancy import awake, dormant, partitions

TOPIC = "persistent://acme/orders/glanced"
PATH = f"{ADMIN}/persistent/acme/orders/glanced"
SHARED = sluice.ConsumerType.Shared


@pytest.fixture
def worker_settings(worker_settings):
    """Partitions sleep after 1.5 quiet seconds (7 s by default)."""
    return worker_settings.model_copy(update={"worker_dormant_after_seconds": 1.5})


def consumers_in_stats(http) -> int:
    stats = http.get(f"{PATH}/partitioned-stats").json()
    return len(stats["subscriptions"]["sub"]["consumers"])


def test_consumers_on_sleeping_empty_partitions_do_not_wake_them(http, namespace, worker, client):
    assert http.put(f"{PATH}/partitions", json=8).status_code == 204
    assert http.put(f"{PATH}/subscription/sub").status_code == 204
    wait_until(lambda: dormant(worker) == partitions(8, TOPIC), timeout=15)
    woken = worker.call(lambda w: w.dormancy.woken)
    consumer = client.subscribe(TOPIC, "sub", consumer_type=SHARED)
    # Stats show the consumer on every partition (their documents were written again) ...
    wait_until(lambda: consumers_in_stats(http) == 8, timeout=10)
    # ... and no partition ran for it.
    assert worker.call(lambda w: w.dormancy.woken) == woken
    assert not awake(worker)
    assert dormant(worker) == partitions(8, TOPIC)
    # Leaving is seen as well, without waking anything.
    consumer.close()
    wait_until(lambda: consumers_in_stats(http) == 0, timeout=10)
    assert worker.call(lambda w: w.dormancy.woken) == woken
    # A message wakes its partition at once, for a consumer that joined while it slept.
    consumer = client.subscribe(TOPIC, "sub", consumer_type=SHARED)
    wait_until(lambda: consumers_in_stats(http) == 8, timeout=10)
    producer = client.create_producer(TOPIC)
    started = time.monotonic()
    producer.send(b"first", partition_key="k")
    assert consumer.receive(timeout_millis=5_000).data() == b"first"
    assert time.monotonic() - started < 1.0
    assert worker.call(lambda w: w.dormancy.woken) == woken + 1


def test_a_dead_consumer_of_a_glanced_partition_is_released(http, namespace, worker, redis_server):
    assert http.put(f"{PATH}/partitions", json=1).status_code == 204
    assert http.put(f"{PATH}/subscription/sub").status_code == 204
    wait_until(lambda: dormant(worker) == partitions(1, TOPIC), timeout=15)
    woken = worker.call(lambda w: w.dormancy.woken)
    crashed = sluice.Client(redis_server.url, heartbeat_interval_seconds=0.5)
    crashed.subscribe(TOPIC, "sub", consumer_type=SHARED)
    wait_until(lambda: consumers_in_stats(http) == 1, timeout=10)
    assert worker.call(lambda w: w.dormancy.woken) == woken
    # No heartbeat, never closed: like a killed process.  Its partition sleeps on, yet the
    # consumer is released after the timeout (the glance scheduled the check).
    crashed.ticker.stop()
    alive = keys.sub_key(TopicName.from_full(TOPIC).partition(0), "sub", "alive")
    plain = redis.Redis.from_url(redis_server.url)
    try:
        timeout = worker.settings.consumer_timeout_seconds
        wait_until(lambda: plain.zcard(alive) == 0, timeout=timeout + 5)
    finally:
        plain.close()
    wait_until(lambda: consumers_in_stats(http) == 0, timeout=10)
