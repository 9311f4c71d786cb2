"""``Client.create_reader``: a reader from earliest, latest or a message id, on a plain and a
partitioned topic; it leaves no subscription behind."""

from __future__ import annotations

import pytest

import sluice
from sluice import MessageId
from tests.workers.conftest import ADMIN

TOPIC = "persistent://acme/orders/read"
PATH = f"{ADMIN}/persistent/acme/orders/read"


def read_all(reader: sluice.Reader, count: int) -> list[bytes]:
    return [reader.read_next(timeout_millis=5000).data() for _ in range(count)]


def test_a_reader_from_earliest_reads_everything_in_order(http, namespace, client):
    assert http.put(PATH).status_code == 204
    producer = client.create_producer(TOPIC)
    for i in range(5):
        producer.send(f"m{i}".encode())
    reader = client.create_reader(TOPIC, MessageId.earliest)
    assert reader.topic() == TOPIC and reader.is_connected()
    assert reader.has_message_available()
    assert read_all(reader, 5) == [f"m{i}".encode() for i in range(5)]
    assert not reader.has_message_available()
    with pytest.raises(sluice.Timeout):
        reader.read_next(timeout_millis=300)
    producer.send(b"m5")
    assert reader.has_message_available()
    assert read_all(reader, 1) == [b"m5"]
    [subscription] = http.get(f"{PATH}/subscriptions").json()
    assert subscription.startswith("reader-")
    reader.close()
    assert not reader.is_connected()
    assert http.get(f"{PATH}/subscriptions").json() == []  # a reader leaves nothing behind


def test_a_reader_from_latest_reads_only_what_comes_after(http, namespace, client):
    assert http.put(PATH).status_code == 204
    producer = client.create_producer(TOPIC)
    for i in range(3):
        producer.send(f"old{i}".encode())
    with client.create_reader(TOPIC, MessageId.latest) as reader:
        assert not reader.has_message_available()
        producer.send(b"new0")
        producer.send(b"new1")
        assert reader.has_message_available()
        assert read_all(reader, 2) == [b"new0", b"new1"]
        assert not reader.has_message_available()


@pytest.mark.parametrize("inclusive", [False, True])
def test_a_reader_from_a_message_id(http, namespace, client, inclusive):
    assert http.put(PATH).status_code == 204
    producer = client.create_producer(TOPIC)
    ids = [producer.send(f"m{i}".encode()) for i in range(5)]
    reader = client.create_reader(TOPIC, ids[2], start_message_id_inclusive=inclusive)
    expected = [f"m{i}".encode() for i in range(2 if inclusive else 3, 5)]
    assert reader.has_message_available()
    assert read_all(reader, len(expected)) == expected
    assert not reader.has_message_available()
    reader.close()


def test_a_reader_of_a_partitioned_topic(http, namespace, client):
    assert http.put(f"{PATH}/partitions", json=3).status_code == 204
    producer = client.create_producer(TOPIC)
    sent = {f"m{i}".encode() for i in range(12)}
    for body in sorted(sent):
        producer.send(body)
    with client.create_reader(TOPIC, MessageId.earliest) as reader:
        assert set(read_all(reader, 12)) == sent
        assert not reader.has_message_available()


def test_what_a_reader_does_not_support(http, namespace, client):
    assert http.put(PATH).status_code == 204
    with pytest.raises(sluice.NotSupported, match="reader_listener"):
        client.create_reader(TOPIC, MessageId.earliest, reader_listener=lambda r, m: None)
    with pytest.raises(sluice.InvalidConfiguration, match="start_message_id"):
        client.create_reader(TOPIC, "earliest")
    assert http.get(f"{PATH}/subscriptions").json() == []
