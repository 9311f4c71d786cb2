"""The client library against a real worker: subscription types, acks, redelivery, DLQ."""

from __future__ import annotations

import math
import threading
import time

import pytest

import sluice
from sluice import heartbeats
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from sluice.routing import key_partition
from tests.workers.conftest import (
    ADMIN,
    WorkerThread,
    client_ports,
    drain,
    monitored,
    wait_until,
)

TOPIC = "persistent://acme/orders/created"


def make_topic(http, partitions: int = 0) -> None:
    path = f"{ADMIN}/persistent/acme/orders/created"
    if partitions:
        assert http.put(f"{path}/partitions", json=partitions).status_code == 204
    else:
        assert http.put(path).status_code == 204


def assert_nothing_more(consumer: sluice.Consumer, millis: int = 800) -> None:
    """No further message arrives within ``millis``."""
    with pytest.raises(sluice.Timeout):
        consumer.receive(timeout_millis=millis)


def test_message_accessors_and_ids(http, namespace, client):
    make_topic(http)
    consumer = client.subscribe(TOPIC, "sub")
    producer = client.create_producer(TOPIC, producer_name="p1")
    sent = producer.send(
        b"payload", properties={"a": "1"}, partition_key="key-1", event_timestamp=1234
    )
    message = consumer.receive(timeout_millis=5000)
    assert message.data() == b"payload"
    assert message.value() == b"payload"
    assert message.properties() == {"a": "1"}
    assert message.partition_key() == "key-1"
    assert message.event_timestamp() == 1234
    assert abs(message.publish_timestamp() - time.time() * 1000) < 60_000
    assert message.message_id() == sent
    assert message.topic_name() == TOPIC
    assert message.redelivery_count() == 0
    assert sluice.MessageId.deserialize(sent.serialize()) == sent
    assert producer.producer_name() == "p1"
    assert producer.last_sequence_id() == 0
    consumer.acknowledge(message)

    # A message with a payload only (the consumer's fast path) has the same accessors.
    plain_id = producer.send(b"plain")
    plain = consumer.receive(timeout_millis=5000)
    assert (plain.data(), plain.message_id(), plain.topic_name()) == (b"plain", plain_id, TOPIC)
    assert (plain.properties(), plain.partition_key(), plain.event_timestamp()) == ({}, "", 0)
    assert abs(plain.publish_timestamp() - time.time() * 1000) < 60_000
    assert plain.publish_timestamp() >= message.publish_timestamp()
    assert plain.redelivery_count() == 0
    consumer.acknowledge(plain)


def test_exclusive_subscription_refuses_a_second_consumer(http, namespace, client):
    make_topic(http)
    first = client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Exclusive)
    with pytest.raises(sluice.ConsumerBusy):
        client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Exclusive)
    with pytest.raises(sluice.SubscriptionBusy):
        client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
    first.close()
    second = client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Exclusive)
    second.close()


def test_shared_subscription_spreads_messages(http, namespace, client):
    make_topic(http)
    consumers = [
        client.subscribe(
            TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared, receiver_queue_size=5
        )
        for _ in range(2)
    ]
    producer = client.create_producer(TOPIC)
    for i in range(40):
        producer.send(str(i).encode())
    seen: dict[int, set[bytes]] = {0: set(), 1: set()}
    deadline = time.monotonic() + 10
    while sum(len(s) for s in seen.values()) < 40 and time.monotonic() < deadline:
        for index, consumer in enumerate(consumers):
            try:
                message = consumer.receive(timeout_millis=20)
            except sluice.Timeout:
                continue
            seen[index].add(message.data())
            consumer.acknowledge(message)
    assert seen[0] | seen[1] == {str(i).encode() for i in range(40)}
    assert not seen[0] & seen[1]
    assert seen[0] and seen[1]


def test_failover_switches_to_the_next_consumer(http, namespace, client):
    make_topic(http)
    first = client.subscribe(
        TOPIC, "sub", consumer_type=sluice.ConsumerType.Failover, consumer_name="a"
    )
    second = client.subscribe(
        TOPIC, "sub", consumer_type=sluice.ConsumerType.Failover, consumer_name="b"
    )
    producer = client.create_producer(TOPIC)
    for i in range(5):
        producer.send(f"m{i}".encode())
    got = [first.receive(timeout_millis=5000) for _ in range(5)]
    assert_nothing_more(second, 300)
    first.acknowledge(got[0])
    first.close()  # four received, not acknowledged: they go to the next consumer
    again = drain(second, 4, timeout=5)
    assert sorted(m.data() for _t, m in again) == [b"m1", b"m2", b"m3", b"m4"]


def test_cumulative_ack(http, namespace, client):
    make_topic(http)
    consumer = client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Exclusive)
    producer = client.create_producer(TOPIC)
    for i in range(10):
        producer.send(str(i).encode())
    messages = [consumer.receive(timeout_millis=5000) for _ in range(10)]
    consumer.acknowledge_cumulative(messages[6])
    wait_until(
        lambda: (
            http.get(f"{ADMIN}/persistent/acme/orders/created/stats").json()["subscriptions"][
                "sub"
            ]["unackedMessages"]
            == 3
        )
    )
    shared = client.subscribe(TOPIC, "other", consumer_type=sluice.ConsumerType.Shared)
    with pytest.raises(sluice.NotSupported):
        shared.acknowledge_cumulative(messages[0])


def test_negative_ack_redelivers_after_the_delay(http, namespace, client):
    make_topic(http)
    consumer = client.subscribe(
        TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared, negative_ack_redelivery_delay_ms=500
    )
    producer = client.create_producer(TOPIC)
    producer.send(b"again")
    message = consumer.receive(timeout_millis=5000)
    start = time.monotonic()
    consumer.negative_acknowledge(message)
    redelivered = consumer.receive(timeout_millis=5000)
    assert time.monotonic() - start >= 0.45
    assert redelivered.data() == b"again"
    assert redelivered.redelivery_count() == 1
    consumer.acknowledge(redelivered)
    assert_nothing_more(consumer)


def test_ack_timeout_redelivers(http, namespace, client):
    make_topic(http)
    consumer = client.subscribe(
        TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared, unacked_messages_timeout_ms=1000
    )
    client.create_producer(TOPIC).send(b"slow")
    first = consumer.receive(timeout_millis=5000)
    start = time.monotonic()
    second = consumer.receive(timeout_millis=5000)
    assert time.monotonic() - start >= 0.9
    assert second.data() == first.data()
    assert second.redelivery_count() == 1
    consumer.acknowledge(second)


def test_dead_letter_topic_after_max_redeliveries(http, namespace, client):
    make_topic(http)
    policy = sluice.DeadLetterPolicy(max_redeliver_count=2)
    consumer = client.subscribe(
        TOPIC,
        "sub",
        consumer_type=sluice.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=0,
        dead_letter_policy=policy,
    )
    dlq_topic = f"{TOPIC}-sub-DLQ"
    dlq = client.subscribe(dlq_topic, "dlq", initial_position=sluice.InitialPosition.Earliest)
    client.create_producer(TOPIC).send(b"poison", properties={"k": "v"})
    deliveries = []
    for _ in range(3):
        message = consumer.receive(timeout_millis=5000)
        deliveries.append(message.redelivery_count())
        consumer.negative_acknowledge(message)
    assert deliveries == [0, 1, 2]
    dead = dlq.receive(timeout_millis=5000)
    assert dead.data() == b"poison"
    assert dead.properties()["k"] == "v"
    assert dead.properties()["REAL_TOPIC"] == TOPIC
    assert_nothing_more(consumer)


def test_unacked_messages_of_a_closed_consumer_go_to_others(http, namespace, client):
    make_topic(http)
    leaving = client.subscribe(
        TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared, receiver_queue_size=20
    )
    producer = client.create_producer(TOPIC)
    for i in range(20):
        producer.send(str(i).encode())
    held = [leaving.receive(timeout_millis=5000) for _ in range(5)]
    leaving.acknowledge(held[0])
    leaving.close()
    staying = client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
    rest = drain(staying, 19, timeout=8)
    assert sorted(int(m.data()) for _t, m in rest) == list(range(1, 20))


def test_a_consumer_that_stops_heartbeating_is_released(http, namespace, worker, redis_server):
    make_topic(http)
    crashed = sluice.Client(redis_server.url, heartbeat_interval_seconds=3600)
    consumer = crashed.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
    with sluice.Client(redis_server.url) as healthy:
        producer = healthy.create_producer(TOPIC)
        for i in range(3):
            producer.send(str(i).encode())
        assert len([consumer.receive(timeout_millis=5000) for _ in range(3)]) == 3
        # No heartbeat, no ack, never closed: like a killed process.
        crashed.ticker.stop()
        other = healthy.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
        got = drain(other, 3, timeout=worker.settings.consumer_timeout_seconds + 6)
        assert sorted(m.data() for _t, m in got) == [b"0", b"1", b"2"]
        assert all(m.redelivery_count() >= 1 for _t, m in got)


def test_unsubscribe(http, namespace, client):
    make_topic(http)
    consumer = client.subscribe(TOPIC, "gone", consumer_type=sluice.ConsumerType.Shared)
    other = client.subscribe(TOPIC, "gone", consumer_type=sluice.ConsumerType.Shared)
    with pytest.raises(sluice.SubscriptionBusy):
        consumer.unsubscribe()
    other.close()
    consumer.unsubscribe()
    assert "gone" not in http.get(f"{ADMIN}/persistent/acme/orders/created/subscriptions").json()


def test_one_heartbeat_renews_every_consumer_in_one_round_trip_and_brings_a_reaped_one_back(
    http, namespace, redis_server, monkeypatch
):
    """A client's heartbeat renews all its consumers' registrations in one pipeline (one
    round trip for 40 consumers on two partitions, not 80); a consumer the workers reaped
    (gone from the subscription's live set) registers again at that heartbeat."""
    make_topic(http, partitions=2)
    sends: list[int] = []
    real_send = heartbeats._send

    def counted(client, batch):
        sends.append(len(batch))
        return real_send(client, batch)

    monkeypatch.setattr(heartbeats, "_send", counted)
    with sluice.Client(redis_server.url, heartbeat_interval_seconds=3600) as client:
        consumers = [
            client.subscribe(TOPIC, f"beat-{i % 4}", consumer_type=sluice.ConsumerType.Shared)
            for i in range(40)
        ]
        reaped = consumers[7]
        alive = [part.flow_keys[2] for part in reaped._parts]
        for key in alive:
            assert client.redis.zrem(key, reaped._id) == 1
        client._beat_consumers()
        assert sends == [80]
        assert all(client.redis.zscore(key, reaped._id) is not None for key in alive)


def test_a_heartbeat_during_unsubscribe_does_not_bring_the_subscription_back(
    http, namespace, client
):
    """The client's heartbeat registers a consumer the worker reaped; one that fires while
    ``unsubscribe`` runs (on the client's background thread) must not register it again and
    so resurrect the subscription just deleted (a WebSocket reader's subscription outlived
    its connection that way).  Here the heartbeat is fired right after the delete."""
    make_topic(http)
    consumer = client.subscribe(TOPIC, "leaving", consumer_type=sluice.ConsumerType.Shared)
    real_call = consumer._call
    beats: list[threading.Thread] = []

    def call(script, script_keys, args):
        answer = real_call(script, script_keys, args)
        if script.name == "unsubscribe":
            beat = threading.Thread(target=consumer._heartbeat)
            beat.start()
            beat.join(0.3)  # it waits for unsubscribe to end (it would have run at once)
            beats.append(beat)
        return answer

    consumer._call = call
    consumer.unsubscribe()
    for beat in beats:
        beat.join(5)
    assert beats and not any(beat.is_alive() for beat in beats)
    members = client.redis.smembers(keys.subs(TopicName.from_full(TOPIC)))
    assert b"leaving" not in members
    assert "leaving" not in http.get(f"{ADMIN}/persistent/acme/orders/created/subscriptions").json()


def test_an_idle_consumer_schedules_no_flush_and_an_ack_arms_one(http, namespace, client):
    """The acknowledgement flush runs only when something waits to be sent: nothing is due
    for an idle consumer, and one acknowledgement (fewer than a full group) reaches Redis
    within the grouping time all the same."""
    make_topic(http)
    consumer = client.subscribe(TOPIC, "idle", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(TOPIC)

    def flush_due() -> float:
        return client.ticker._jobs[consumer._io_job][2]  # (interval, job, due)

    time.sleep(0.3)
    assert flush_due() == math.inf  # idle: no flush scheduled at all
    producer.send(b"one")
    message = consumer.receive(timeout_millis=10_000)
    time.sleep(0.3)  # the permits given back with it have been flushed by now
    assert flush_due() == math.inf
    acked_at = time.monotonic()
    consumer.acknowledge(message)
    assert flush_due() <= acked_at + 0.2  # armed by the acknowledgement
    log = keys.log(TopicName.from_full(TOPIC))
    wait_until(lambda: client.redis.xpending(log, "idle")["pending"] == 0, timeout=5)
    wait_until(lambda: flush_due() == math.inf, timeout=5)  # and disarmed after it ran


def test_acknowledgements_go_out_in_one_round_trip(http, namespace, client, redis_server):
    """A flush of acknowledgements is one pipeline of script calls: no ``SCRIPT EXISTS``
    before it (a round trip more for every flush), and a server that lost its scripts (a
    restart, ``SCRIPT FLUSH``) still gets every acknowledgement, even from a consumer closed
    right after them: the client loads the scripts again and sends them at once."""
    make_topic(http)
    consumer = client.subscribe(TOPIC, "flush", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(TOPIC)
    for i in range(50):
        producer.send(f"m{i}".encode())
    received = [consumer.receive(timeout_millis=10_000) for _ in range(50)]
    log = keys.log(TopicName.from_full(TOPIC))
    consumer.acknowledge(received[0])  # the first flush may find the script to load
    wait_until(lambda: client.redis.xpending(log, "flush")["pending"] == 49, timeout=5)
    if client.cluster:
        # A cluster pipeline sends script calls as EVALSHA anyway (and MONITOR sees a node).
        for message in received[1:25]:
            consumer.acknowledge(message)
    else:
        with monitored(redis_server.url) as seen:
            for message in received[1:25]:
                consumer.acknowledge(message)
            wait_until(lambda: client.redis.xpending(log, "flush")["pending"] == 25, timeout=5)
        ports = client_ports(client)
        mine = [c["command"] for c in seen if c.get("client_port") in ports]
        assert any(c.startswith("EVALSHA") for c in mine), mine
        assert not [c for c in mine if c.upper().startswith("SCRIPT")], mine
    wait_until(lambda: client.redis.xpending(log, "flush")["pending"] == 25, timeout=5)
    client.redis.script_flush()
    for message in received[25:]:
        consumer.acknowledge(message)
    consumer.close()  # flushes what is pending: its last chance
    assert client.redis.xpending(log, "flush")["pending"] == 0
    stats = http.get(f"{ADMIN}/persistent/acme/orders/created/stats").json()
    assert stats["subscriptions"]["flush"]["msgBacklog"] == 0


def test_batched_messages_and_batch_acks(http, namespace, client):
    make_topic(http)
    consumer = client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Exclusive)
    producer = client.create_producer(
        TOPIC, batching_enabled=True, batching_max_messages=5, batching_max_publish_delay_ms=50
    )
    ids = []
    for i in range(5):
        producer.send_async(str(i).encode(), lambda res, mid: ids.append((res, mid)))
    producer.flush()
    wait_until(lambda: len(ids) == 5)
    assert {res for res, _ in ids} == {sluice.Result.Ok}
    assert sorted(mid.batch_index() for _res, mid in ids) == [0, 1, 2, 3, 4]
    messages = [consumer.receive(timeout_millis=5000) for _ in range(5)]
    assert [m.data() for m in messages] == [b"0", b"1", b"2", b"3", b"4"]
    for m in messages[:4]:
        consumer.acknowledge(m)
    stats = f"{ADMIN}/persistent/acme/orders/created/stats"
    time.sleep(0.5)
    assert http.get(stats).json()["subscriptions"]["sub"]["unackedMessages"] == 1
    consumer.acknowledge(messages[4])
    wait_until(lambda: http.get(stats).json()["subscriptions"]["sub"]["unackedMessages"] == 0)


def test_key_routing_and_round_robin(http, namespace, client):
    make_topic(http, partitions=4)
    producer = client.create_producer(TOPIC)
    keyed = {producer.send(b"k", partition_key="user-42").partition() for _ in range(5)}
    assert keyed == {key_partition("user-42", 4)}
    spread = {producer.send(b"r").partition() for _ in range(8)}
    assert spread == {0, 1, 2, 3}
    consumer = client.subscribe(TOPIC, "sub", initial_position=sluice.InitialPosition.Earliest)
    assert len(drain(consumer, 13, timeout=5)) == 13
    assert client.get_topic_partitions(TOPIC) == [f"{TOPIC}-partition-{i}" for i in range(4)]


def test_a_topic_a_client_just_created_is_found_by_the_admin_api(
    http, namespace, worker_settings, redis_server
):
    """A client creates a topic while no worker runs; admin calls on it made before any worker
    has recorded it wait for that record and answer 200, not 404 (the peek of a message sent
    a moment before found nothing now and then)."""
    WorkerThread(worker_settings).start().stop()  # publishes the client settings, then goes
    topic = "persistent://acme/orders/just-made"
    with sluice.Client(redis_server.url) as client:
        client.subscribe(topic, "s", consumer_type=sluice.ConsumerType.Shared).close()
        client.create_producer(topic).send(b"m", priority=8)
    later = threading.Timer(0.5, lambda: workers.append(WorkerThread(worker_settings).start()))
    workers: list[WorkerThread] = []
    later.start()
    try:
        peek = http.get(f"{ADMIN}/persistent/acme/orders/just-made/subscription/s/position/1")
        assert peek.status_code == 200, peek.text
        assert peek.content == b"m" and peek.headers["X-Sluice-Priority"] == "8"
        assert http.get(f"{ADMIN}/persistent/acme/orders/just-made/stats").status_code == 200
    finally:
        later.join()
        for started in workers:
            started.stop()
    missing = http.get(f"{ADMIN}/persistent/acme/orders/never-made/stats")
    assert missing.status_code == 404, missing.text


def test_auto_creation_and_its_switch(http, namespace, worker, client):
    producer = client.create_producer("persistent://acme/orders/fresh")
    producer.send(b"1")

    def listed() -> bool:
        return (
            "persistent://acme/orders/fresh" in http.get(f"{ADMIN}/persistent/acme/orders").json()
        )

    wait_until(listed)
    with pytest.raises(sluice.NamespaceNotFound):
        client.create_producer("persistent://acme/nowhere/t")
    assert (
        http.post(f"{ADMIN}/brokers/configuration/allowAutoTopicCreation/false").status_code == 204
    )
    wait_until(
        lambda: (
            worker.call(lambda w: w.redis.hget(keys.CLIENT_CONFIG, "allowAutoTopicCreation"))
            == b"false"
        )
    )
    with pytest.raises(sluice.TopicNotFound):
        client.create_producer("persistent://acme/orders/never")
