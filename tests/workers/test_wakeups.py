"""The wake-up channel is open to anyone who can publish on Redis: garbage is dropped."""

from __future__ import annotations

import time

import redis

from sluice.protocol import keys
from tests.workers.conftest import ADMIN

TOPIC = "persistent://acme/orders/woken"


def test_unreadable_wake_up_messages_do_not_stop_dispatch(http, namespace, client, redis_server):
    assert http.put(f"{ADMIN}/persistent/acme/orders/woken").status_code == 204
    consumer = client.subscribe(TOPIC, "sub")
    producer = client.create_producer(TOPIC)
    plain = redis.Redis.from_url(redis_server.url)
    try:
        for garbage in (b"\xff\xfe\x00", b"t\tnot a topic", b"s", b"p\t\t\t", b""):
            plain.publish(keys.WAKE_CHANNEL, garbage)
    finally:
        plain.close()
    time.sleep(0.2)
    # An idle subscription is dispatched on the next produce's wake-up, well before the
    # dispatcher's own fallback poll: the wake-up listener is still alive.
    for i in range(3):
        producer.send(f"m{i}".encode())
        started = time.monotonic()
        message = consumer.receive(timeout_millis=5_000)
        assert message.data() == f"m{i}".encode()
        assert time.monotonic() - started < 1.0
        consumer.acknowledge(message)
