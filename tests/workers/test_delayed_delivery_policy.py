"""The ``delayedDelivery`` policy and ``msgDelayed`` against a real worker, through the client.

A namespace or topic policy that is inactive makes a running worker deliver a delayed message
at once; ``maxDeliveryDelayInMillis`` makes the produce path refuse a send asking a longer
delay (Pulsar's ``NotAllowedException``), storing nothing; the subscription stats'
``msgDelayed`` counts the messages waiting for their time, in ``stats`` and
``partitioned-stats``, and drops as they go, are skipped or are cleared.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

import sluice
from tests.workers.conftest import ADMIN, wait_until
from tests.workers.test_delayed_delivery import receive

TOPIC = "persistent://acme/orders/policy-later"
PATH = f"{ADMIN}/persistent/acme/orders/policy-later"
NS_POLICY = f"{ADMIN}/namespaces/acme/orders/delayedDelivery"
TOPIC_POLICY = f"{PATH}/delayedDelivery"


def policy(active=True, tick=1000, max_delay=0) -> dict:
    return {"tickTime": tick, "active": active, "maxDeliveryDelayInMillis": max_delay}


def sub_stats(http, path: str, name: str = "s", stats: str = "stats") -> dict:
    answer = http.get(f"{path}/{stats}")
    assert answer.status_code == 200, answer.text
    return answer.json()["subscriptions"][name]


def test_an_inactive_policy_delivers_at_once_and_active_holds_again(http, namespace, client):
    assert http.put(PATH).status_code == 204
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(TOPIC)
    # The namespace turns it off (the broker's delayedDeliveryEnabled is true).
    assert http.post(NS_POLICY, json=policy(active=False)).status_code == 204
    sent = time.time() * 1000
    producer.send(b"ns-off", deliver_after=timedelta(seconds=30))
    [(arrived, message)] = receive(consumer, 1, 10)
    assert message.data() == b"ns-off" and arrived - sent < 10_000
    # The topic turns it on over the namespace: held again, the plain message goes first.
    assert http.post(TOPIC_POLICY, json=policy(active=True)).status_code == 204
    producer.send(b"held", deliver_after=timedelta(seconds=2))
    producer.send(b"now")
    got = receive(consumer, 2, 10)
    assert [m.data() for _, m in got] == [b"now", b"held"]
    # The topic turns it off: at once again.
    assert http.post(TOPIC_POLICY, json=policy(active=False)).status_code == 204
    sent = time.time() * 1000
    producer.send(b"topic-off", deliver_after=timedelta(seconds=30))
    [(arrived, message)] = receive(consumer, 1, 10)
    assert message.data() == b"topic-off" and arrived - sent < 10_000
    consumer.close()


def test_the_policy_tick_lets_a_message_go_early_when_not_strict(http, namespace, client):
    assert http.put(PATH).status_code == 204
    assert http.post(f"{ADMIN}/brokers/configuration/isDelayedDeliveryDeliverAtTimeStrict/false")
    try:
        consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
        producer = client.create_producer(TOPIC)
        assert http.post(TOPIC_POLICY, json=policy(tick=20_000)).status_code == 204
        sent = time.time() * 1000
        producer.send(b"within-the-tick", deliver_after=timedelta(seconds=15))
        [(arrived, message)] = receive(consumer, 1, 10)
        assert message.data() == b"within-the-tick" and arrived - sent < 10_000
        consumer.close()
    finally:
        http.delete(f"{ADMIN}/brokers/configuration/isDelayedDeliveryDeliverAtTimeStrict")


def test_max_delay_refuses_a_longer_send_and_stores_nothing(http, namespace, client):
    assert http.put(PATH).status_code == 204
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(TOPIC)
    assert http.post(NS_POLICY, json=policy(max_delay=5000)).status_code == 204
    with pytest.raises(
        sluice.NotAllowedError, match="Exceeds max allowed delivery delay of 5000 milliseconds"
    ):
        producer.send(b"too-late", deliver_after=timedelta(seconds=60))
    producer.send(b"soon-enough", deliver_after=timedelta(milliseconds=500))
    producer.send(b"plain")
    got = receive(consumer, 3, 5)
    assert sorted(m.data() for _, m in got) == [b"plain", b"soon-enough"]
    stats = http.get(f"{PATH}/stats").json()
    assert stats["msgInCounter"] == 2
    # Inactive: no limit (as in Pulsar, the limit applies only while delayed delivery is on).
    assert http.post(NS_POLICY, json=policy(active=False, max_delay=5000)).status_code == 204
    producer.send(b"off-so-anything-goes", deliver_after=timedelta(seconds=60))
    # The topic's policy wins; removing every policy leaves the broker's (no limit).
    assert http.post(TOPIC_POLICY, json=policy(max_delay=1000)).status_code == 204
    with pytest.raises(sluice.NotAllowedError, match="of 1000 milliseconds"):
        producer.send(b"x", deliver_after=timedelta(seconds=2))
    assert http.delete(TOPIC_POLICY).status_code == 204
    assert http.delete(NS_POLICY).status_code == 204
    producer.send(b"unlimited", deliver_after=timedelta(seconds=60))
    consumer.close()


def test_msg_delayed_counts_the_waiting_messages(http, namespace, worker, client):
    assert http.put(PATH).status_code == 204
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(TOPIC)
    assert sub_stats(http, PATH)["msgDelayed"] == 0
    for i in range(3):
        producer.send(f"later-{i}".encode(), deliver_after=timedelta(seconds=60))
    producer.send(b"soon", deliver_after=timedelta(seconds=3))
    producer.send(b"plain")
    wait_until(lambda: sub_stats(http, PATH)["msgDelayed"] == 4)
    got = receive(consumer, 1, 5)
    assert [m.data() for _, m in got] == [b"plain"]
    # (Acknowledgements go grouped, every 100 ms.)
    wait_until(lambda: sub_stats(http, PATH)["msgBacklog"] == 4)
    answer = sub_stats(http, PATH)
    assert (answer["msgDelayed"], answer["msgBacklogNoDelayed"]) == (4, 0)

    # The worker's own stats document (reports, metrics) counts them too.
    def documented():
        doc = worker.call(lambda w: w.stats.docs.get(TOPIC))
        return doc and doc["subscriptions"]["s"]["msgDelayed"]

    wait_until(lambda: documented() == 4)
    # The one due in 3 s goes and is no longer counted.
    got = receive(consumer, 1, 10)
    assert [m.data() for _, m in got] == [b"soon"]
    assert sub_stats(http, PATH)["msgDelayed"] == 3
    # Clearing the backlog takes the waiting ones too.
    assert http.post(f"{PATH}/subscription/s/skip_all").status_code == 204
    assert sub_stats(http, PATH)["msgDelayed"] == 0
    consumer.close()


def test_msg_delayed_in_partitioned_stats(http, namespace, client):
    topic, path = f"{TOPIC}-p", f"{PATH}-p"
    assert http.put(f"{path}/partitions", json=2).status_code == 204
    consumer = client.subscribe(topic, "s", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(6):
        producer.send(
            f"later-{i}".encode(), partition_key=f"k{i}", deliver_after=timedelta(seconds=60)
        )
    wait_until(lambda: sub_stats(http, path, stats="partitioned-stats")["msgDelayed"] == 6)
    answer = http.get(f"{path}/partitioned-stats", params={"perPartition": "true"}).json()
    per_partition = [p["subscriptions"]["s"]["msgDelayed"] for p in answer["partitions"].values()]
    assert sum(per_partition) == 6
    consumer.close()
