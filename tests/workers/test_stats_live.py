"""A ``stats`` answer is one moment: every counter is read from Redis at the request, in the
same atomic reading as the backlog, so right after a produce or a drain the counters, the
backlog and its size agree (rates stay the worker's, measured over seconds)."""

from __future__ import annotations

import sluice
from tests.workers.conftest import ADMIN, drain

TOPIC = "persistent://acme/orders/created"
PATH = f"{ADMIN}/persistent/acme/orders/created"
SIZE = 130  # bytes per message: averageMsgSize is exact
PARTITIONS = 3


def _consistent(doc: dict, produced: int, waiting: int) -> None:
    """One answer: ``produced`` in, ``waiting`` in the backlog, sizes that agree."""
    assert doc["msgInCounter"] == produced, doc
    assert doc["bytesInCounter"] == produced * SIZE
    assert doc["averageMsgSize"] == SIZE
    sub = doc["subscriptions"]["sub"]
    assert sub["msgBacklog"] == waiting, sub
    assert sub["backlogSize"] == waiting * SIZE
    assert doc["backlogSize"] == waiting * SIZE


def test_counters_are_as_current_as_the_backlog(http, namespace, worker, client):
    assert http.put(f"{PATH}/partitions", json=PARTITIONS).status_code == 204
    consumer = client.subscribe(
        TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared, receiver_queue_size=10
    )
    producer = client.create_producer(TOPIC, batching_enabled=False, block_if_queue_full=True)
    produced = 0
    # Three bursts, each read at once: the worker's documents (a second apart) lag behind.
    for burst in (1000, 1000, 1000):
        # A receiver queue of 10 per partition: at most 30 dispatched, the rest waiting.
        for _ in range(burst):
            producer.send_async(b"x" * SIZE, None)
        producer.flush()
        produced += burst
        totals = http.get(f"{PATH}/partitioned-stats").json()
        waiting = totals["subscriptions"]["sub"]["msgBacklog"]
        assert waiting == produced, totals["subscriptions"]["sub"]
        _consistent(totals, produced, waiting)
        parts = totals["partitions"].values()
        # The partitions' documents of the same answer add up to its totals.
        assert sum(p["msgInCounter"] for p in parts) == produced
        assert sum(p["subscriptions"]["sub"]["msgBacklog"] for p in parts) == waiting
        assert sum(p["backlogSize"] for p in parts) == totals["backlogSize"]
        assert sum(p["msgOutCounter"] for p in parts) == totals["msgOutCounter"]
    # Drain, and read at once: every message received was dispatched, and counted so.
    got = drain(consumer, produced, timeout=30)
    assert len(got) == produced
    totals = http.get(f"{PATH}/partitioned-stats").json()
    assert totals["msgOutCounter"] == produced, totals
    assert totals["subscriptions"]["sub"]["msgOutCounter"] == produced
    assert totals["bytesOutCounter"] >= produced * SIZE
    one = http.get(f"{PATH}-partition-0/stats").json()
    assert one["msgOutCounter"] == one["subscriptions"]["sub"]["msgOutCounter"]
    assert one["msgOutCounter"] == one["msgInCounter"]


def test_a_non_partitioned_topic_right_after_a_produce(http, namespace, worker, client):
    assert http.put(PATH).status_code == 204
    client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(TOPIC, batching_enabled=False, block_if_queue_full=True)
    for _ in range(1000):
        producer.send_async(b"y" * SIZE, None)
    producer.flush()
    doc = http.get(f"{PATH}/stats").json()
    _consistent(doc, 1000, doc["subscriptions"]["sub"]["msgBacklog"])
    sub = doc["subscriptions"]["sub"]
    # Nothing acknowledged yet: what was dispatched is exactly what is pending, in one reading.
    assert sub["msgOutCounter"] == sub["unackedMessages"]
