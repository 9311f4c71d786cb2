"""The runners of a worker follow its leases, whatever fails in between.

After a Redis restart a worker may find its lease expired, take a new one, and fail to start
the partition's runner because Redis drops a connection once more.  The lease is held and
renewed; the worker must still run the partition (within a tick), not wait for the next full
resync while nothing is dispatched.  And a runner being replaced that is fenced on its way
out neither drops the new lease nor stops its successor, and wake-ups that come while a runner
starts (before the worker routes them to it) are not lost.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError

from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.workers.conftest import ADMIN, wait_until
from workers.partition import PartitionRunner
from workers.stats import StatsPublisher

TOPIC = "persistent://acme/orders/retaken"


@pytest.fixture
def worker_settings(worker_settings):
    """Every partition runs (none goes dormant): these tests follow running partitions."""
    return worker_settings.model_copy(update={"worker_dormant_after_seconds": 0})


def flowing(http, client):
    """The topic made, one message sent and acknowledged through it: the consumer and the
    producer."""
    assert http.put(f"{ADMIN}/persistent/acme/orders/retaken").status_code == 204
    consumer = client.subscribe(TOPIC, "sub")
    producer = client.create_producer(TOPIC)
    producer.send(b"before")
    message = consumer.receive(timeout_millis=10_000)
    assert message.data() == b"before"
    consumer.acknowledge(message)
    return consumer, producer


def test_a_runner_that_failed_to_start_is_started_again(
    http, namespace, worker, client, redis_server, monkeypatch
):
    consumer, producer = flowing(http, client)

    plain = redis.Redis.from_url(redis_server.url)
    try:
        # The worker records the subscription the consumer created and the admin service
        # publishes its change event: once the worker applied it, no event makes the worker
        # rebalance (which would start the runner too) during the test.
        def recorded() -> bytes | None:
            entries = plain.xrange(worker.settings.events_stream)
            marker = f"{TOPIC}#sub".encode()
            return next((i for i, fields in entries if marker in repr(fields).encode()), None)

        event = wait_until(recorded, timeout=20, every=0.1)
        assert worker.call(lambda w: w.events.caught_up(event.decode(), 10))

        failed: list[str] = []
        start = PartitionRunner.start

        async def start_failing_once(runner: PartitionRunner) -> None:
            if not failed:
                failed.append(runner.fencing_token)
                raise RedisConnectionError("Connection closed by server.")
            await start(runner)

        monkeypatch.setattr(PartitionRunner, "start", start_failing_once)
        lease = keys.lease(TopicName.from_full(TOPIC))
        old = plain.get(lease)
        plain.delete(lease)  # expired while Redis was down: the worker takes a new one
        wait_until(lambda: failed, timeout=10)
        token = plain.get(lease)
        assert token not in (None, old)
        assert failed == [token.decode()]  # the runner of the new lease failed to start
    finally:
        plain.close()

    producer.send(b"after")
    sent = time.monotonic()
    message = consumer.receive(timeout_millis=10_000)
    assert message.data() == b"after"
    # Within a tick or two, not at the next full resync (30 s).
    assert time.monotonic() - sent < 3.0
    consumer.acknowledge(message)


def test_a_fence_of_a_replaced_runner_leaves_the_new_lease_and_runner(
    http, namespace, worker, client
):
    assert http.put(f"{ADMIN}/persistent/acme/orders/retaken").status_code == 204
    client.subscribe(TOPIC, "sub")
    partition = TopicName.from_full(TOPIC)

    def held(w):
        return w.ownership.token(partition), w.runners.get(partition.full)

    token, runner = wait_until(lambda: worker.call(lambda w: all(held(w)) and held(w)))
    # A runner stopped for a newer lease can still be fenced on its way out (a call in flight
    # with the old token): that says nothing about the lease held now.
    worker.call(lambda w: w.partition_lost(partition, "test-worker:0"))
    assert worker.call(held) == (token, runner)
    # The current runner fenced: its lease is gone and the runner stops.
    worker.call(lambda w: w.partition_lost(partition, token))
    assert worker.call(held) == ("", None)


def test_a_wake_up_that_comes_while_a_runner_starts_is_not_lost(
    http, namespace, worker, client, redis_server, monkeypatch
):
    consumer, producer = flowing(http, client)

    # The runner of a new lease starts its dispatchers, then the worker takes its stats
    # baselines before it routes wake-ups to it: make that last a while.
    starting = threading.Event()
    adopt = StatsPublisher.adopt

    async def slow_adopt(stats: StatsPublisher, runner: PartitionRunner) -> None:
        if not starting.is_set():
            starting.set()
            await asyncio.sleep(1.5)
        await adopt(stats, runner)

    monkeypatch.setattr(StatsPublisher, "adopt", slow_adopt)
    plain = redis.Redis.from_url(redis_server.url)
    try:
        plain.delete(keys.lease(TopicName.from_full(TOPIC)))
    finally:
        plain.close()
    assert starting.wait(10)
    time.sleep(0.3)  # the new dispatcher found nothing and parked
    producer.send(b"after")  # its wake-up finds no runner yet
    sent = time.monotonic()
    message = consumer.receive(timeout_millis=10_000)
    assert message.data() == b"after"
    # Once the runner is known, not at the dispatcher's fallback poll (5 s).
    assert time.monotonic() - sent < 3.0
    consumer.acknowledge(message)
