"""Durable acknowledgements on a single server, which has no replica: a send asked to wait for
one fails with ``Timeout`` within the timeout, and is never reported as stored.

The namespace's ``durableAcks`` policy reaches a live producer without a restart (a send that
promises fewer replicas is refused by ``produce.lua`` and sent again waiting for them), the
producer's ``durable_ack_replicas`` asks for it alone, and removing the policy brings the
default acknowledgement back.  The API's shape (400s, GET, ``effectiveFlowControls``) is
tested here too.
"""

from __future__ import annotations

import time

import pytest
import redis

import sluice
from sluice.producer import Result
from sluice.protocol import keys
from sluice.protocol.frames import wake_data
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import PRODUCE_SCRIPT
from tests.workers.conftest import ADMIN

TOPIC = "persistent://acme/orders/durable"
PATH = f"{ADMIN}/persistent/acme/orders/durable"
POLICY = f"{ADMIN}/namespaces/acme/orders/durableAcks"
NAME = TopicName.from_full(TOPIC)


@pytest.fixture
def topic(http, namespace):
    assert http.put(PATH).status_code == 204
    return http


def entries(redis_server) -> int:
    with redis.Redis.from_url(redis_server.url) as r:
        return int(r.xlen(keys.log(NAME)))


def test_the_policy_is_stored_read_and_resolved(topic):
    assert topic.get(POLICY).json() is None
    assert topic.post(POLICY, json={"replicas": 2}).status_code == 204
    assert topic.get(POLICY).json() == {"replicas": 2, "timeoutMs": 1000}
    controls = topic.get(f"{PATH}/effectiveFlowControls").json()["flowControl"]
    assert controls["durableAcks"] == {
        "value": {"replicas": 2, "timeoutMs": 1000},
        "source": "namespace",
    }
    for body in ({}, {"replicas": -1}, {"replicas": "1"}, {"replica": 1}, {"timeoutMs": 0}, 3):
        assert topic.post(POLICY, json=body).status_code == 400, body
    assert topic.delete(POLICY).status_code == 204
    controls = topic.get(f"{PATH}/effectiveFlowControls").json()["flowControl"]
    assert controls["durableAcks"]["value"]["replicas"] == 0


def test_a_send_waiting_for_a_missing_replica_fails_within_its_timeout(
    topic, worker, client, redis_server
):
    producer = client.create_producer(TOPIC)
    producer.send(b"before: acknowledged once the master has it")
    assert topic.post(POLICY, json={"replicas": 1, "timeoutMs": 200}).status_code == 204
    started = time.monotonic()
    with pytest.raises(sluice.Timeout, match=r"not confirmed by 1 replica\(s\) within 200 ms"):
        producer.send(b"no replica to confirm it")  # the live producer, told by produce.lua
    assert time.monotonic() - started < 1.5
    results = []
    producer.send_async(b"nor this one", lambda result, message_id: results.append(result))
    producer.flush()
    assert results == [Result.Timeout]
    # Written to the master (an honest failure: it may be delivered), never acknowledged.
    assert entries(redis_server) == 3
    # Removed: the producer learns it at its next heartbeat (until then it still waits).
    assert topic.delete(POLICY).status_code == 204
    time.sleep(client.heartbeat_interval + 0.5)
    producer.send(b"after: acknowledged again")


def test_the_producer_option_asks_for_replicas_without_a_policy(topic, worker, client):
    producer = client.create_producer(TOPIC, durable_ack_replicas=1, durable_ack_timeout_ms=100)
    started = time.monotonic()
    with pytest.raises(sluice.Timeout):
        producer.send(b"x")
    assert time.monotonic() - started < 1.0
    with pytest.raises(sluice.InvalidConfiguration):
        client.create_producer(TOPIC, durable_ack_replicas=-1)
    client.create_producer(TOPIC).send(b"a producer without the option is acknowledged")


def test_a_batch_waits_once(topic, worker, client, redis_server):
    """Every message of a batch shares its entry's fate: one WAIT, one failure for all."""
    producer = client.create_producer(
        TOPIC,
        batching_enabled=True,
        batching_max_publish_delay_ms=50,
        durable_ack_replicas=1,
        durable_ack_timeout_ms=100,
    )
    results = []
    for number in range(10):
        producer.send_async(f"m{number}".encode(), lambda r, _m: results.append(r))
    producer.flush()
    assert results == [Result.Timeout] * 10
    assert entries(redis_server) == 1


def test_a_raw_call_promising_fewer_replicas_is_refused(topic, worker, client, redis_server):
    assert topic.post(POLICY, json={"replicas": 2, "timeoutMs": 300}).status_code == 204
    script = client.scripts[PRODUCE_SCRIPT.name]
    base = [keys.WAKE_CHANNEL, wake_data(TOPIC), 1, 1, "d", b"x"]
    with pytest.raises(redis.exceptions.ResponseError, match=r"^DurableAcks 2 300$"):
        script(keys=PRODUCE_SCRIPT.keys(NAME), args=[*base, 1])
    assert entries(redis_server) == 0
    script(keys=PRODUCE_SCRIPT.keys(NAME), args=[*base, 2])  # promising enough
    script(keys=PRODUCE_SCRIPT.keys(NAME), args=base)  # saying nothing (an older client)
    assert entries(redis_server) == 2


def test_topic_over_namespace_over_the_broker_default(topic, worker, client):
    """The broker's durableAckReplicas applies to topics that set nothing; a namespace's policy
    wins over it and a topic's over both (0 replicas: acknowledged once the master has it)."""
    broker = f"{ADMIN}/brokers/configuration"
    topic_policy = f"{PATH}/durableAcks"
    controls = f"{PATH}/effectiveFlowControls"
    producer = client.create_producer(TOPIC)
    try:
        assert topic.post(f"{broker}/durableAckTimeoutMs/200").status_code == 204
        assert topic.post(f"{broker}/durableAckReplicas/1").status_code == 204
        assert topic.get(controls).json()["flowControl"]["durableAcks"] == {
            "value": {"replicas": 1, "timeoutMs": 200},
            "source": "broker",
        }
        with pytest.raises(sluice.Timeout, match=r"not confirmed by 1 replica\(s\) within 200 ms"):
            producer.send(b"the broker default asks for a replica this server lacks")
        assert topic.post(POLICY, json={"replicas": 0}).status_code == 204
        time.sleep(client.heartbeat_interval + 0.5)  # a lowered ask reaches it at a heartbeat
        producer.send(b"the namespace asks for none")
        assert topic.post(topic_policy, json={"replicas": 1, "timeoutMs": 300}).status_code == 204
        assert topic.get(topic_policy).json() == {"replicas": 1, "timeoutMs": 300}
        assert topic.get(f"{topic_policy}?applied=true").json() == {
            "replicas": 1,
            "timeoutMs": 300,
        }
        with pytest.raises(sluice.Timeout, match=r"within 300 ms"):
            producer.send(b"the topic asks for one again")
        assert topic.delete(topic_policy).status_code == 204
        assert topic.get(controls).json()["flowControl"]["durableAcks"]["source"] == "namespace"
        time.sleep(client.heartbeat_interval + 0.5)  # the producer learns it at a heartbeat
        producer.send(b"the namespace's none again")
    finally:
        topic.delete(f"{broker}/durableAckReplicas")
        topic.delete(f"{broker}/durableAckTimeoutMs")
