"""Abuse limits through the real client against a real worker.

Each limit refuses exactly the (N+1)th, with the ``pulsar-client``-named error; a place freed
(a closed consumer or producer, a deleted subscription or topic) can be taken again.  No test
waits after a policy write: a write answered 2xx is in force in Redis (the worker writes the
partition's limits before it confirms the change).
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

import sluice
from sluice.protocol import keys
from sluice.protocol.frames import wake_data
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import PRODUCE_SCRIPT
from tests.workers.conftest import ADMIN, client_ports, monitored, wait_until

TOPIC = "persistent://acme/orders/abuse"
PATH = f"{ADMIN}/persistent/acme/orders/abuse"
NS = f"{ADMIN}/namespaces/acme/orders"
NAME = TopicName.from_full(TOPIC)
SHARED = sluice.ConsumerType.Shared


@pytest.fixture
def topic(http, namespace):
    """The non-partitioned topic ``abuse``."""
    assert http.put(PATH).status_code == 204
    return http


def entries(redis_server, partition: TopicName = NAME) -> int:
    with redis.Redis.from_url(redis_server.url) as r:
        return int(r.xlen(keys.log(partition)))


# --- producers ------------------------------------------------------------------------------


def test_max_producers_refuses_the_next_until_one_closes(topic, worker, client):
    assert topic.post(f"{PATH}/maxProducers", json=2).status_code == 204
    first = client.create_producer(TOPIC)
    second = client.create_producer(TOPIC)
    with pytest.raises(sluice.ProducerBusy) as refused:
        client.create_producer(TOPIC)
    assert str(refused.value) == f"Topic '{TOPIC}' reached max producers limit"
    first.close()
    third = client.create_producer(TOPIC)
    third.send(b"the third producer may send")
    with pytest.raises(sluice.ProducerBusy):
        client.create_producer(TOPIC)
    # Raised: the limit leaves the producers in place and admits more.
    assert topic.post(f"{PATH}/maxProducers", json=3).status_code == 204
    client.create_producer(TOPIC)
    second.close()


def test_max_producers_applies_to_each_partition(http, namespace, worker, client, redis_server):
    path = f"{ADMIN}/persistent/acme/orders/wide"
    name = TopicName.from_full("persistent://acme/orders/wide")
    assert http.put(f"{path}/partitions", json=2).status_code == 204
    assert http.post(f"{NS}/maxProducersPerTopic", json=1).status_code == 204
    producer = client.create_producer(name.full)
    with redis.Redis.from_url(redis_server.url) as r:
        for index in range(2):
            assert r.zcard(keys.producers(name.partition(index))) == 1
    with pytest.raises(sluice.ProducerBusy):
        client.create_producer(name.full)
    # Refused on one partition: registered on none (the first one stays free for others).
    with redis.Redis.from_url(redis_server.url) as r:
        assert r.zcard(keys.producers(name.partition(0))) == 1
    producer.close()
    client.create_producer(name.full)


def test_a_broker_limit_holds_on_a_topic_made_after_it(http, namespace, worker, client):
    """A topic made after the broker's maxProducersPerTopic was set is quiet from the start
    (its partition sleeps: nothing to dispatch); its limits are written all the same, so its
    first producers are counted (they were not: the partition's limits waited for an
    event)."""
    answer = http.post(f"{ADMIN}/brokers/configuration/maxProducersPerTopic/1")
    assert answer.status_code == 204
    assert http.put(PATH).status_code == 204
    wait_until(lambda: TopicName.from_full(TOPIC).full in worker.worker.dormancy)
    producer = client.create_producer(TOPIC)
    with pytest.raises(sluice.ProducerBusy):
        client.create_producer(TOPIC)
    producer.close()


def test_a_dead_producer_stops_counting_after_the_expiry(topic, worker, client, redis_server):
    """The worker's consumer timeout is 3 s in these tests: a producer whose process died
    (no heartbeat, no close) frees its place within 3 s; a live one keeps it."""
    assert topic.post(f"{PATH}/maxProducers", json=1).status_code == 204
    live = client.create_producer(TOPIC)
    time.sleep(4.0)  # longer than the expiry: heartbeats keep the live producer registered
    with pytest.raises(sluice.ProducerBusy):
        client.create_producer(TOPIC)
    live.close()
    doomed = sluice.Client(redis_server.url)
    doomed.create_producer(TOPIC)
    doomed.ticker.stop()  # the process "dies": no heartbeat, no close
    doomed.redis.close()
    died = time.monotonic()
    with pytest.raises(sluice.ProducerBusy):
        client.create_producer(TOPIC)
    while True:
        try:
            client.create_producer(TOPIC)
            break
        except sluice.ProducerBusy:
            assert time.monotonic() - died < 3.0 + 1.0, "the dead producer still counts"
            time.sleep(0.1)
    assert time.monotonic() - died > 2.0  # its place was kept until it expired


def test_a_heartbeat_racing_a_close_does_not_register_the_producer_again(
    topic, worker, client, redis_server
):
    # The heartbeat runs on the client's ticker thread: one in flight while the producer
    # closes must not put its registration back after the close removed it (a closed
    # producer would keep its place until it expired, refusing the next one).
    assert topic.post(f"{PATH}/maxProducers", json=1).status_code == 204
    with redis.Redis.from_url(redis_server.url) as r:
        for _ in range(40):
            producer = client.create_producer(TOPIC)
            registration = producer._registration
            start = threading.Barrier(2)

            def beat(registration=registration, start=start) -> None:
                start.wait()
                for _ in range(5):
                    registration.renew()

            heartbeat = threading.Thread(target=beat)
            heartbeat.start()
            start.wait()
            producer.close()
            heartbeat.join()
            assert r.zcard(keys.producers(NAME)) == 0


def test_a_producer_heartbeat_is_one_round_trip_and_survives_a_script_flush(
    topic, worker, client, redis_server
):
    # A heartbeat renews every registration in one pipeline of EVALSHA: no SCRIPT EXISTS
    # before it (a round trip more for every producer every heartbeat).  A server that lost
    # its scripts answers NOSCRIPT: the client loads them again and the next heartbeat
    # renews, well within the expiry.
    producer = client.create_producer(TOPIC)
    registration = producer._registration
    with redis.Redis.from_url(redis_server.url) as r:
        before = r.zscore(keys.producers(NAME), registration._id)
        with monitored(redis_server.url) as seen:
            time.sleep(0.01)  # the renewal's score (Redis time, ms) moves on
            registration.renew()
        ports = client_ports(client)
        beats = [c["command"] for c in seen if c.get("client_port") in ports]
        assert beats and all(c.startswith("EVALSHA") for c in beats), beats
        renewed = r.zscore(keys.producers(NAME), registration._id)
        assert renewed > before
        r.script_flush()
        registration.renew()  # NOSCRIPT: loads the scripts again
        time.sleep(0.01)
        registration.renew()
        assert r.zscore(keys.producers(NAME), registration._id) > renewed
    producer.send(b"after the flush")
    producer.close()


# --- subscriptions and consumers -------------------------------------------------------------


def two_admitted(client, subscriptions, error: type[Exception], reason: str) -> list:
    """Shared consumers on the first two of three ``subscriptions`` (a limit of 2 admits them);
    one on the third is refused with ``error`` and ``reason``.  The two admitted consumers."""
    *admitted, third = subscriptions
    consumers = [client.subscribe(TOPIC, name, consumer_type=SHARED) for name in admitted]
    with pytest.raises(error) as refused:
        client.subscribe(TOPIC, third, consumer_type=SHARED)
    assert str(refused.value) == reason
    return consumers


def test_max_subscriptions_refuses_a_new_subscription(topic, worker, client):
    assert topic.post(f"{PATH}/maxSubscriptionsPerTopic", json=2).status_code == 204
    reason = f"Exceed the maximum number of subscriptions of the topic: {TOPIC}"
    first, _ = two_admitted(client, ("one", "two", "three"), sluice.NotAllowedError, reason)
    # An existing subscription takes more consumers.
    again = client.subscribe(TOPIC, "one", consumer_type=SHARED)
    assert "three" not in topic.get(f"{PATH}/subscriptions").json()
    # Consumers leaving do not free a place; a subscription deleted does.
    first.close()
    again.close()
    with pytest.raises(sluice.NotAllowedError):
        client.subscribe(TOPIC, "three", consumer_type=SHARED)
    deleted = topic.delete(f"{PATH}/subscription/one")
    assert deleted.status_code == 204
    if deleted.headers.get("x-sluice-enforcement") == "pending":
        # Redis did not answer the admin service in time (a loaded machine): the workers
        # reconcile the data plane from the database, as the answer's header says.
        wait_until(lambda: "one" not in topic.get(f"{PATH}/subscriptions").json(), timeout=30)
    client.subscribe(TOPIC, "three", consumer_type=SHARED)


def test_max_consumers_per_topic_counts_every_subscription(topic, worker, client):
    assert topic.post(f"{PATH}/maxConsumers", json=2).status_code == 204
    reason = "Topic reached max consumers limit"
    first, _ = two_admitted(client, ("one", "two", "one"), sluice.ConsumerBusy, reason)
    first.close()
    client.subscribe(TOPIC, "one", consumer_type=SHARED)
    with pytest.raises(sluice.ConsumerBusy):
        client.subscribe(TOPIC, "three", consumer_type=SHARED)


def test_max_consumers_per_subscription(topic, worker, client):
    assert topic.post(f"{NS}/maxConsumersPerSubscription", json=2).status_code == 204
    reason = "Subscription reached max consumers limit"
    _, second = two_admitted(client, ("sub", "sub", "sub"), sluice.ConsumerBusy, reason)
    other = client.subscribe(TOPIC, "other", consumer_type=SHARED)  # another subscription
    second.close()
    third = client.subscribe(TOPIC, "sub", consumer_type=SHARED)
    # Consumers registered under the limit still receive.
    producer = client.create_producer(TOPIC)
    producer.send(b"hello")
    assert other.receive(timeout_millis=5000).data() == b"hello"
    assert third.is_connected()


# --- topics per namespace --------------------------------------------------------------------


def test_auto_created_topics_count_against_the_namespace(topic, worker, client):
    """``abuse`` exists (1); with auto-created partitioned topics of 2 partitions, a limit of 4
    admits one (3 topics) and refuses the next (5 > 4) on produce and on subscribe."""
    http = topic
    assert http.post(f"{ADMIN}/brokers/configuration/allowAutoTopicCreationType/partitioned")
    assert http.post(f"{ADMIN}/brokers/configuration/defaultNumPartitions/2").status_code == 204
    assert http.post(f"{NS}/maxTopicsPerNamespace", json=4).status_code == 204
    producer = client.create_producer("persistent://acme/orders/first")
    assert len(client.get_topic_partitions("persistent://acme/orders/first")) == 2
    reason = "Exceed maximum number of topics in namespace."
    with pytest.raises(sluice.NotAllowedError) as refused:
        client.create_producer("persistent://acme/orders/second")
    assert str(refused.value) == reason
    with pytest.raises(sluice.NotAllowedError):
        client.subscribe("persistent://acme/orders/second", "sub")
    answer = http.put(f"{ADMIN}/persistent/acme/orders/second/partitions", json=2)
    assert (answer.status_code, answer.json()) == (412, {"reason": reason})
    producer.send(b"existing topics keep working")
    # Removed: the broker's limit (none) applies.
    assert http.delete(f"{NS}/maxTopicsPerNamespace").status_code == 204
    client.create_producer("persistent://acme/orders/second")
    # The broker's own limit applies when the namespace sets none: 5 topics now.
    assert http.post(f"{ADMIN}/brokers/configuration/maxTopicsPerNamespace/5").status_code == 204
    with pytest.raises(sluice.NotAllowedError):
        client.create_producer("persistent://acme/orders/third")


# --- message size ----------------------------------------------------------------------------


def test_max_message_size_is_checked_by_the_client(topic, worker, client, redis_server):
    assert topic.post(f"{PATH}/maxMessageSize", json=1000).status_code == 204
    producer = client.create_producer(TOPIC)
    producer.send(b"x" * 1000)
    with pytest.raises(sluice.MessageTooBig) as refused:
        producer.send(b"x" * 1001)
    assert str(refused.value) == (
        f"a message of 1001 bytes exceeds maxMessageSize (1000 bytes) of {TOPIC}"
    )
    results = []
    producer.send_async(b"x" * 1001, lambda result, _id: results.append(result))
    assert results == [sluice.Result.MessageTooBig]
    assert entries(redis_server) == 1
    # A live producer learns a new limit within a heartbeat (1 s).
    assert topic.post(f"{PATH}/maxMessageSize", json=2000).status_code == 204
    deadline = time.monotonic() + 5
    while True:
        try:
            producer.send(b"x" * 1500)
            break
        except sluice.MessageTooBig:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_produce_script_refuses_an_entry_over_the_limit(topic, worker, client, redis_server):
    """A raw EVALSHA of produce.lua is checked too; nothing is written."""
    assert topic.post(f"{PATH}/maxMessageSize", json=1000).status_code == 204
    script = client.scripts["produce"]

    def produce(fields: list, script_keys: list[str]):
        args = [keys.WAKE_CHANNEL, wake_data(TOPIC), 1, len(fields) // 2, *fields]
        return script(keys=script_keys, args=args)

    produce(["d", b"x" * 1000], PRODUCE_SCRIPT.keys(NAME))
    too_big = [["d", b"x" * 1001], ["d", b"x" * 10, "p", "y" * 12_000]]
    for fields in too_big:
        for script_keys in (PRODUCE_SCRIPT.keys(NAME), PRODUCE_SCRIPT.keys(NAME)[:3]):
            with pytest.raises(redis.exceptions.ResponseError, match=r"^MessageTooBig"):
                produce(fields, script_keys)
    # Two entries in one call, the second too big: neither is written.
    args = [keys.WAKE_CHANNEL, wake_data(TOPIC), 2, 1, "d", b"ok", 1, "d", b"x" * 1001]
    with pytest.raises(redis.exceptions.ResponseError, match=r"^MessageTooBig"):
        script(keys=PRODUCE_SCRIPT.keys(NAME), args=args)
    assert entries(redis_server) == 1


def test_batches_stay_under_the_limit(topic, worker, client, redis_server):
    """With batching on, the batch entry is what is checked: a batch is sent before it would
    grow past maxMessageSize, so every message gets through in entries of at most 1000."""
    assert topic.post(f"{PATH}/maxMessageSize", json=1000).status_code == 204
    consumer = client.subscribe(TOPIC, "sub", consumer_type=SHARED)
    producer = client.create_producer(
        TOPIC, batching_enabled=True, batching_max_publish_delay_ms=1000
    )
    results = []
    for i in range(10):
        producer.send_async(
            bytes([i]) * 400, lambda result, _id: results.append(result), properties={"i": "x"}
        )
    with pytest.raises(sluice.MessageTooBig):
        producer.send(b"x" * 1001)
    producer.flush()
    assert results == [sluice.Result.Ok] * 10
    with redis.Redis.from_url(redis_server.url) as r:
        sizes = [len(fields[b"d"]) for _id, fields in r.xrange(keys.log(NAME))]
    assert len(sizes) > 1 and max(sizes) <= 1000
    received = sorted(consumer.receive(timeout_millis=5000).data()[0] for _ in range(10))
    assert received == list(range(10))
