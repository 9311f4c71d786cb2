"""Once an admin write is answered, every client and worker sees it: no waiting, no polling.

Onboarding scripts create a namespace, a topic or a broker setting and use it in the very
next line; these tests do exactly that, several times over, through REST and the client.
"""

from __future__ import annotations

import uuid

import pytest

import sluice
from tests.workers.conftest import ADMIN


def test_a_namespace_is_usable_the_moment_its_creation_is_answered(http, namespace, client):
    for _ in range(10):
        name = f"acme/n{uuid.uuid4().hex[:8]}"
        assert http.put(f"{ADMIN}/namespaces/{name}").status_code == 204
        consumer = client.subscribe(f"persistent://{name}/t", "s")  # auto-created topic
        client.create_producer(f"persistent://{name}/t").send(b"hello")
        assert consumer.receive(timeout_millis=5000).data() == b"hello"
        consumer.close()


def test_a_deleted_namespace_is_refused_the_moment_its_deletion_is_answered(
    http, namespace, client
):
    assert http.put(f"{ADMIN}/namespaces/acme/gone").status_code == 204
    assert http.delete(f"{ADMIN}/namespaces/acme/gone").status_code == 204
    with pytest.raises(sluice.NamespaceNotFound):
        client.create_producer("persistent://acme/gone/t")


def test_every_partition_of_a_new_topic_is_dispatched_at_once(http, namespace, worker, client):
    for round_ in range(3):
        path = f"{ADMIN}/persistent/acme/orders/p{round_}"
        assert http.put(f"{path}/partitions", json=4).status_code == 204
        topic = f"persistent://acme/orders/p{round_}"
        consumer = client.subscribe(topic, "s", consumer_type=sluice.ConsumerType.Shared)
        producer = client.create_producer(topic)
        for i in range(40):  # round robin: ten on every partition
            producer.send(f"{i}".encode())
        got = set()
        for _ in range(40):
            got.add(consumer.receive(timeout_millis=5000).data())
        assert len(got) == 40
        consumer.close()


def test_a_broker_setting_is_in_force_for_clients_once_answered(http, namespace, worker, client):
    config = f"{ADMIN}/brokers/configuration/allowAutoTopicCreation"
    assert http.post(f"{config}/false").status_code == 204
    with pytest.raises(sluice.TopicNotFound):
        client.create_producer("persistent://acme/orders/not-yet")
    assert http.post(f"{config}/true").status_code == 204
    client.create_producer("persistent://acme/orders/now").send(b"x")
