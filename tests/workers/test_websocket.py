"""Pulsar's WebSocket API, through a real WebSocket client (``websockets``) and the admin
service over HTTP: produce, consume, acknowledge, negative-acknowledge, read, refusals, and
the dispatch limits holding for a WebSocket consumer as for any other."""

from __future__ import annotations

import base64
import json
import math
import time

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

import sluice
from tests.workers.conftest import ADMIN, rate

TOPIC_PATH = "persistent/acme/orders/ws"
TOPIC = "persistent://acme/orders/ws"


def ws_url(admin_server, kind: str, tail: str = "", **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    base = admin_server.url.replace("http://", "ws://")
    return f"{base}/ws/v2/{kind}/{TOPIC_PATH}{tail}" + (f"?{query}" if query else "")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def frame(ws, timeout: float = 10) -> dict:
    return json.loads(ws.recv(timeout=timeout))


def test_produce_consume_ack_and_nack(admin_server, http, namespace, worker):
    consumer_url = ws_url(
        admin_server,
        "consumer",
        "/sub",
        subscriptionType="Shared",
        negativeAckRedeliveryDelay="100",
    )
    with connect(consumer_url) as consumer, connect(ws_url(admin_server, "producer")) as producer:
        producer.send(
            json.dumps(
                {
                    "payload": b64(b"hello"),
                    "properties": {"k": "v"},
                    "key": "order-1",
                    "context": "c1",
                }
            )
        )
        sent = frame(producer)
        assert sent["result"] == "ok" and sent["context"] == "c1" and sent["messageId"]

        got = frame(consumer)
        assert base64.b64decode(got["payload"]) == b"hello"
        assert got["properties"] == {"k": "v"}
        assert got["key"] == "order-1"
        assert got["redeliveryCount"] == 0
        assert got["publishTime"].startswith("20")
        consumer.send(json.dumps({"type": "negativeAcknowledge", "messageId": got["messageId"]}))

        again = frame(consumer)  # redelivered after 100 ms
        assert base64.b64decode(again["payload"]) == b"hello"
        assert again["redeliveryCount"] == 1
        consumer.send(json.dumps({"messageId": again["messageId"]}))
        consumer.send(json.dumps({"type": "isEndOfTopic"}))
        assert frame(consumer) == {"endOfTopic": False}

    # Acknowledged: nothing is left for the subscription.
    stats = http.get(f"{ADMIN}/{TOPIC_PATH}/stats").json()
    deadline = time.monotonic() + 5
    while stats["subscriptions"]["sub"]["msgBacklog"] and time.monotonic() < deadline:
        time.sleep(0.1)
        stats = http.get(f"{ADMIN}/{TOPIC_PATH}/stats").json()
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 0


def test_send_errors_answer_as_pulsar_does(admin_server, http, namespace, worker):
    with connect(ws_url(admin_server, "producer")) as producer:
        producer.send("{not json")
        assert frame(producer)["result"] == "send-error:3"
        producer.send(json.dumps({"payload": "%%%", "context": "x"}))
        answer = frame(producer)
        assert answer["result"] == "send-error:7" and answer["context"] == "x"
        assert "errorMsg" in answer
        producer.send(json.dumps({"payload": b64(b"ok"), "context": 7}))
        answer = frame(producer)
        assert answer["result"] == "ok" and answer["context"] == 7 and answer["messageId"]


def test_reader_reads_from_earliest_and_after_a_message_id(admin_server, http, namespace, worker):
    with connect(ws_url(admin_server, "producer")) as producer:
        ids = []
        for i in range(3):
            producer.send(json.dumps({"payload": b64(f"m{i}".encode())}))
            ids.append(frame(producer)["messageId"])
    with connect(ws_url(admin_server, "reader", messageId="earliest")) as reader:
        got = [frame(reader) for _ in range(3)]
        assert [base64.b64decode(m["payload"]) for m in got] == [b"m0", b"m1", b"m2"]
        assert [m["messageId"] for m in got] == ids
    with connect(ws_url(admin_server, "reader", messageId=ids[0])) as reader:
        got = [frame(reader) for _ in range(2)]
        assert [base64.b64decode(m["payload"]) for m in got] == [b"m1", b"m2"]
    # A reader's subscription goes with its connection.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        subs = http.get(f"{ADMIN}/{TOPIC_PATH}/subscriptions").json()
        if not subs:
            break
        time.sleep(0.1)
    assert subs == []


def test_bad_query_parameters_refuse_the_handshake(admin_server, http, namespace, worker):
    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url(admin_server, "consumer", "/sub", subscriptionType="Nope"))
    assert refused.value.response.status_code == 400
    assert b"Invalid query params" in refused.value.response.body


def test_pull_mode_delivers_only_what_was_permitted(admin_server, http, namespace, worker, client):
    with connect(ws_url(admin_server, "consumer", "/pull", pullMode="true")) as consumer:
        producer = client.create_producer(TOPIC)
        for i in range(5):
            producer.send(f"p{i}".encode())
        with pytest.raises(TimeoutError):
            consumer.recv(timeout=1.0)
        consumer.send(json.dumps({"type": "permit", "permitMessages": 2}))
        assert [base64.b64decode(frame(consumer)["payload"]) for _ in range(2)] == [b"p0", b"p1"]
        with pytest.raises(TimeoutError):
            consumer.recv(timeout=1.0)
        producer.close()


def test_a_websocket_consumer_is_throttled_like_any_other(
    admin_server, http, namespace, worker, client
):
    """Strict bound: by T seconds after the subscription exists at most LIMIT x (floor(T) + 1)
    messages arrive (T measured from before the handshake, so later than the subscription)."""
    limit = 10
    answer = http.post(f"{ADMIN}/namespaces/acme/orders/dispatchRate", json=rate(limit))
    assert answer.status_code == 204
    origin = time.monotonic()
    with connect(
        ws_url(admin_server, "consumer", "/throttled", subscriptionType="Shared")
    ) as consumer:
        producer = client.create_producer(TOPIC)
        for _ in range(limit * 3):
            producer.send_async(b"t", None)
        producer.flush()
        times = []
        deadline = time.monotonic() + 8
        while len(times) < limit * 3 and time.monotonic() < deadline:
            try:
                got = frame(consumer, timeout=0.5)
            except TimeoutError:
                continue
            times.append(time.monotonic() - origin)
            consumer.send(json.dumps({"messageId": got["messageId"]}))
        producer.close()
    assert len(times) == limit * 3
    for count, t in enumerate(times, start=1):
        assert count <= limit * (math.floor(t) + 1), (t, count)
    assert times[-1] >= 2.0  # three periods' worth cannot arrive in less than two seconds


def test_producer_then_python_consumer(admin_server, http, namespace, worker, client):
    consumer = client.subscribe(TOPIC, "py", consumer_type=sluice.ConsumerType.Shared)
    with connect(ws_url(admin_server, "producer")) as producer:
        producer.send(
            json.dumps({"payload": b64(b"from-ws"), "eventTime": "2024-01-02T03:04:05.006Z"})
        )
        assert frame(producer)["result"] == "ok"
    message = consumer.receive(timeout_millis=10_000)
    assert message.data() == b"from-ws"
    assert message.event_timestamp() == 1704164645006
    consumer.acknowledge(message)
    consumer.close()


def test_deliver_after_and_key_shared_over_websocket(admin_server, http, namespace, worker):
    """deliverAfterMs holds a message on a Key_Shared subscription; keys go to one consumer."""
    assert (
        http.post(f"{ADMIN}/brokers/configuration/isDelayedDeliveryDeliverAtTimeStrict/true")
    ).status_code == 204
    urls = [
        ws_url(admin_server, "consumer", "/ks", subscriptionType="Key_Shared", consumerName=n)
        for n in ("one", "two")
    ]
    with (
        connect(urls[0]) as first,
        connect(urls[1]) as second,
        connect(ws_url(admin_server, "producer")) as producer,
    ):
        sent = time.monotonic()
        producer.send(
            json.dumps({"payload": b64(b"late"), "key": "k-late", "deliverAfterMs": 1500})
        )
        assert frame(producer)["result"] == "ok"
        for i in range(40):
            producer.send(json.dumps({"payload": b64(f"{i}".encode()), "key": f"k-{i % 10}"}))
            assert frame(producer)["result"] == "ok"
        owners: dict[str, set[str]] = {}
        late_at = None
        for _ in range(41):
            got = None
            while got is None:
                for name, ws in (("one", first), ("two", second)):
                    try:
                        got = (name, frame(ws, timeout=0.05))
                        break
                    except TimeoutError:
                        continue
                if time.monotonic() - sent > 15:
                    raise AssertionError("messages missing")
            name, message = got
            ws = first if name == "one" else second
            ws.send(json.dumps({"messageId": message["messageId"]}))
            owners.setdefault(message["key"], set()).add(name)
            if base64.b64decode(message["payload"]) == b"late":
                late_at = time.monotonic() - sent
        assert all(len(names) == 1 for names in owners.values()), owners
        assert set().union(*owners.values()) == {"one", "two"}  # 10 keys, both have some
        assert late_at is not None and late_at >= 1.5


def test_priority_over_websocket_and_in_peek(admin_server, http, namespace, worker, client):
    """The producer frame's ``priority`` (0..9): out of range is a send error and stores
    nothing; in range, the backlog goes highest first, and peek shows each priority."""
    client.subscribe(TOPIC, "prio", consumer_type=sluice.ConsumerType.Shared).close()
    with connect(ws_url(admin_server, "producer")) as producer:
        for bad in (10, -1, "9", 2.5, True):
            producer.send(json.dumps({"payload": b64(b"x"), "priority": bad, "context": "c"}))
            answer = frame(producer)
            assert answer["result"] == "send-error:7" and "priority" in answer["errorMsg"]
        for payload, priority in ((b"low", 1), (b"plain", None), (b"high", 8)):
            body = {"payload": b64(payload)}
            if priority is not None:
                body["priority"] = priority
            producer.send(json.dumps(body))
            assert frame(producer)["result"] == "ok"
    sub = f"{ADMIN}/persistent/acme/orders/ws/subscription/prio"
    priorities = [http.get(f"{sub}/position/{n}").headers["X-Sluice-Priority"] for n in (1, 2, 3)]
    assert priorities == ["8", "4", "1"]  # what the subscription hands out next, in order
    consumer = client.subscribe(TOPIC, "prio", consumer_type=sluice.ConsumerType.Shared)
    got = []
    for _ in range(3):
        message = consumer.receive(timeout_millis=10_000)
        got.append(message.data())
        consumer.acknowledge(message)
    assert got == [b"high", b"plain", b"low"]
    consumer.close()
