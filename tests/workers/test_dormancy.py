"""Quiet partitions go dormant, cost nothing, and wake on every event a client causes.

Every test drives the worker as a user would (REST, the client) and looks at the worker only
to know whether a partition sleeps; what must hold is seen from the outside: messages arrive
promptly after a sleep, stats stay served, dead consumers are still released, policies still
reach a sleeping partition, and a sleeping worker makes (almost) no Redis calls.
"""

from __future__ import annotations

import time

import pytest
import redis

import sluice
from models.stats import SNAPSHOT_STREAM, StatsSnapshot
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.workers.conftest import ADMIN, WorkerThread, drain, monitored, wait_until
from workers.dispatcher import PARK_FALLBACK_SECONDS

TOPIC = "persistent://acme/orders/quiet"
PATH = f"{ADMIN}/persistent/acme/orders/quiet"
SHARED = sluice.ConsumerType.Shared


@pytest.fixture
def worker_settings(worker_settings):
    """Partitions sleep after 1.5 quiet seconds (7 s by default)."""
    return worker_settings.model_copy(update={"worker_dormant_after_seconds": 1.5})


def dormant(worker: WorkerThread) -> set[str]:
    return worker.call(lambda w: set(w.dormancy.partitions))


def awake(worker: WorkerThread) -> set[str]:
    return worker.call(lambda w: set(w.runners))


def partitions(count: int, topic: str = TOPIC) -> set[str]:
    base = TopicName.from_full(topic)
    return {base.partition(i).full for i in range(count)} if count else {base.full}


def test_a_quiet_partition_sleeps_and_wakes_on_a_produce(http, namespace, worker, client):
    assert http.put(f"{PATH}/partitions", json=4).status_code == 204
    consumer = client.subscribe(TOPIC, "sub", consumer_type=SHARED)
    producer = client.create_producer(TOPIC)
    for i in range(8):
        producer.send(f"m{i}".encode(), partition_key=str(i))
    got = drain(consumer, 8, timeout=10)
    assert len(got) == 8
    wait_until(lambda: dormant(worker) == partitions(4), timeout=15)
    assert not awake(worker)
    # Stats stay served while every partition sleeps: counters and the consumer.
    stats = http.get(f"{PATH}/partitioned-stats", params={"perPartition": "true"}).json()
    assert stats["msgInCounter"] == 8
    sub = stats["subscriptions"]["sub"]
    assert sub["msgOutCounter"] == 8 and sub["msgBacklog"] == 0
    assert len(sub["consumers"]) == 4  # one per partition
    # A produce wakes its partition at once, and only that one.
    for i in range(3):
        started = time.monotonic()
        producer.send(f"late{i}".encode(), partition_key="k")
        message = consumer.receive(timeout_millis=5_000)
        assert message.data() == f"late{i}".encode()
        assert time.monotonic() - started < 1.0
        consumer.acknowledge(message)
    assert len(awake(worker)) == 1
    wait_until(lambda: dormant(worker) == partitions(4), timeout=15)


def test_a_sleeping_subscription_without_permits_wakes_on_a_receive(
    http, namespace, worker, client
):
    assert http.put(PATH).status_code == 204
    consumer = client.subscribe(TOPIC, "sub", consumer_type=SHARED, receiver_queue_size=2)
    producer = client.create_producer(TOPIC)
    for i in range(6):
        producer.send(f"m{i}".encode())
    # The consumer's queue is full: the partition sleeps with a backlog.
    wait_until(lambda: dormant(worker) == partitions(0), timeout=15)
    got = drain(consumer, 6, timeout=10)
    assert [m.data() for _t, m in got] == [f"m{i}".encode() for i in range(6)]


def test_a_dead_consumer_of_a_sleeping_partition_is_released(http, namespace, worker, redis_server):
    assert http.put(PATH).status_code == 204
    crashed = sluice.Client(redis_server.url, heartbeat_interval_seconds=0.5)
    consumer = crashed.subscribe(TOPIC, "sub", consumer_type=SHARED)
    with sluice.Client(redis_server.url) as healthy:
        producer = healthy.create_producer(TOPIC)
        for i in range(3):
            producer.send(str(i).encode())
        held = [consumer.receive(timeout_millis=5000) for _ in range(3)]
        assert len(held) == 3
        wait_until(lambda: dormant(worker) == partitions(0), timeout=15)
        woken = worker.call(lambda w: w.dormancy.woken)
        # No heartbeat, no ack, never closed: like a killed process.  Nothing else happens on
        # the partition, yet its consumer is released after the timeout.
        crashed.ticker.stop()
        alive = keys.sub_key(TopicName.from_full(TOPIC), "sub", "alive")
        plain = redis.Redis.from_url(redis_server.url)
        try:
            timeout = worker.settings.consumer_timeout_seconds
            wait_until(lambda: plain.zcard(alive) == 0, timeout=timeout + 5)
        finally:
            plain.close()
        assert worker.call(lambda w: w.dormancy.woken) > woken
        other = healthy.subscribe(TOPIC, "sub", consumer_type=SHARED)
        got = drain(other, 3, timeout=8)
        assert sorted(m.data() for _t, m in got) == [b"0", b"1", b"2"]


def test_a_policy_reaches_a_sleeping_partition(http, namespace, worker, client):
    assert http.put(PATH).status_code == 204
    client.subscribe(TOPIC, "sub", consumer_type=SHARED)
    wait_until(lambda: dormant(worker) == partitions(0), timeout=15)
    limit = f"{ADMIN}/namespaces/acme/orders/maxConsumersPerSubscription"
    assert http.post(limit, json=1).status_code == 204
    # Answered once enforced: the sleeping partition's limits are in Redis already.
    with pytest.raises(sluice.ConsumerBusy):
        client.subscribe(TOPIC, "sub", consumer_type=SHARED)


def test_a_new_worker_takes_sleeping_partitions_over_asleep(
    http, namespace, worker_settings, redis_server
):
    first = WorkerThread(worker_settings).start()
    try:
        assert http.put(f"{PATH}/partitions", json=3).status_code == 204
        with sluice.Client(redis_server.url) as client:
            client.subscribe(TOPIC, "sub", consumer_type=SHARED).close()
        wait_until(lambda: dormant(first) == partitions(3), timeout=15)
    finally:
        first.stop()
    successor = WorkerThread(worker_settings.model_copy(update={"worker_id": "next"})).start()
    try:
        assert dormant(successor) == partitions(3)
        assert not awake(successor)
        with sluice.Client(redis_server.url) as client:
            consumer = client.subscribe(TOPIC, "sub", consumer_type=SHARED)
            producer = client.create_producer(TOPIC)
            producer.send(b"after", partition_key="x")
            assert consumer.receive(timeout_millis=5_000).data() == b"after"
    finally:
        successor.stop()


def test_sleeping_partitions_cost_no_redis_calls(http, namespace, worker, redis_server):
    """A worker with 200 sleeping partitions (a subscription each) makes no Redis call for
    them: its fixed cost (a fleet heartbeat, change-event reads) is all it spends.

    The calls are told apart by what they name (MONITOR shows a script's own commands with
    their keys): the session's Redis serves earlier tests' clients too, whose calls say
    nothing about these partitions."""
    assert http.put(f"{PATH}/partitions", json=200).status_code == 204
    assert http.put(f"{PATH}/subscription/sub").status_code == 204
    wait_until(lambda: len(dormant(worker)) == 200, timeout=30)
    named = "acme/orders/quiet-partition-"
    seconds = 4.0
    with monitored(redis_server.url) as seen:
        # Taking the partitions asleep ends with one check of all their flags, which a busy
        # machine may send after they all count as dormant: the window opens after a quiet
        # second (a steady cost never gives one, and the wait then fails).
        quiet_since = time.monotonic()
        deadline = quiet_since + 15
        counted = 0
        while time.monotonic() - quiet_since < 1.0:
            assert time.monotonic() < deadline, "no quiet second in 15 s"
            time.sleep(0.1)
            now = sum(named in c["command"] for c in list(seen))
            if now != counted:
                counted, quiet_since = now, time.monotonic()
        start = len(seen)
        time.sleep(seconds)
    mine = [c for c in seen[start:] if named in c["command"]]
    # A call per sleeping partition and second would be 800 here; a wake-up that a late
    # event still causes may touch a few.  Tolerance: 2 calls/s (1 % of the partitions).
    assert len(mine) / seconds <= 2, f"{len(mine)} calls on sleeping partitions: {mine[:20]}"
    assert len(dormant(worker)) == 200


def test_new_partitions_with_a_subscription_sleep_without_running(http, namespace, worker, client):
    """Partitions created empty, and a subscription created on them over REST, never start
    a runner: there is nothing to deliver.  Stats show the subscription, and the first
    message still reaches a consumer promptly."""
    assert http.put(f"{PATH}/partitions", json=40).status_code == 204
    assert http.put(f"{PATH}/subscription/sub").status_code == 204
    wait_until(lambda: dormant(worker) == partitions(40), timeout=10)
    time.sleep(0.5)  # the subscription's wake-ups have been read
    assert dormant(worker) == partitions(40)
    gone, woken = worker.call(lambda w: (w.dormancy.gone_dormant, w.dormancy.woken))
    assert (gone, woken) == (0, 0), "a partition ran although it had nothing to deliver"
    stats = http.get(f"{PATH}/partitioned-stats").json()
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 0
    consumer = client.subscribe(TOPIC, "sub", consumer_type=SHARED)
    producer = client.create_producer(TOPIC)
    started = time.monotonic()
    producer.send(b"first", partition_key="k")
    assert consumer.receive(timeout_millis=5_000).data() == b"first"
    # Woken by the events, not found by a parked dispatcher's fallback look: the consumer's
    # subscription had all 40 partitions read just before (glanced at, not woken: their logs
    # are empty), and under a full test run such reads and a start have taken up to a
    # second (1-10 ms on an idle machine, 0.1-0.2 s on 2 busy cores).
    assert time.monotonic() - started < PARK_FALLBACK_SECONDS / 2


def test_a_sleeping_partition_keeps_no_meters(http, namespace, worker, client):
    """The stats meters of a partition (its priority levels' too) go with its runner: a
    worker's memory does not grow with the partitions that ran once and sleep now."""
    assert http.put(PATH).status_code == 204
    consumer = client.subscribe(TOPIC, "sub", consumer_type=SHARED)
    producer = client.create_producer(TOPIC)
    producer.send(b"high", priority=8)
    producer.send(b"low", priority=1)
    assert len(drain(consumer, 2, timeout=10)) == 2
    wait_until(lambda: dormant(worker) == partitions(0), timeout=15)

    def kept(w) -> list[str]:
        stats = w.stats
        meters = (stats.out_meters, stats.redeliver_meters, stats.expire_meters)
        return [name for m in (*meters, stats.level_meters) for name, _sub in m]

    assert worker.call(kept) == []


def test_the_messages_that_wake_a_partition_are_reported(
    http, namespace, worker, client, redis_server
):
    """Report rows count every message, those that woke a sleeping partition too: its
    runner counts from the document it went to sleep with, not from its first read."""
    assert http.put(PATH).status_code == 204
    wait_until(lambda: dormant(worker) == partitions(0), timeout=15)
    consumer = client.subscribe(TOPIC, "sub", consumer_type=SHARED)

    def consumers() -> int:
        doc = http.get(f"{PATH}/stats").json()
        return len(doc["subscriptions"].get("sub", {}).get("consumers", []))

    # The worker has seen the consumer (its document is written): from here on the
    # partition's counters are known, and every message is reported.
    wait_until(lambda: consumers() == 1, timeout=10)
    producer = client.create_producer(TOPIC)
    for i in range(4):
        producer.send(f"m{i}".encode())
    assert len(drain(consumer, 4, timeout=10)) == 4
    wait_until(lambda: dormant(worker) == partitions(0), timeout=15)
    for i in range(3):
        producer.send(f"late{i}".encode())
    assert len(drain(consumer, 3, timeout=10)) == 3
    plain = redis.Redis.from_url(redis_server.url)

    def reported() -> tuple[int, int]:
        rows = [
            StatsSnapshot.from_json(fields[b"json"])
            for _id, fields in plain.xrange(SNAPSHOT_STREAM)
        ]
        rows = [r for r in rows if r.topic == TOPIC and r.subscription == "sub"]
        return sum(r.msg_in for r in rows), sum(r.msg_out for r in rows)

    try:
        wait_until(lambda: reported() == (7, 7), timeout=15)
    finally:
        plain.close()
