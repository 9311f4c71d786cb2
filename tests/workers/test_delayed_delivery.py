"""Delayed delivery (``deliver_at``, ``deliver_after``) against a real worker.

Shared subscriptions hold a delayed message until its time and then deliver it as a first
delivery, in due order, charged to the dispatch limits when it goes; Exclusive and Failover
deliver it at once (as Pulsar does); ``delayedDeliveryEnabled=false`` turns it off; with the
defaults a message never goes early (``isDelayedDeliveryDeliverAtTimeStrict`` is true, unlike
Pulsar's default), and with it false the tick (``delayedDeliveryTickTimeMillis``) lets a
message go that much early; held messages survive the worker's death.

Arrival times are taken when ``receive`` returns, never before the dispatch, so "not before
its time" holds exactly (same machine, same clock); "not much after" gets a stated margin.
"""

from __future__ import annotations

import signal
import time
from datetime import timedelta

import pytest

import sluice
from tests.fleet import with_signal
from tests.receiving import receive_some
from tests.workers.conftest import ADMIN, rate, wait_until
from tests.workers.test_strict_bound import excess

TOPIC = "persistent://acme/orders/later"
PATH = f"{ADMIN}/persistent/acme/orders/later"
CONFIG = f"{ADMIN}/brokers/configuration"
LATE_MARGIN = 1.5  # seconds a due message may take to arrive on a loaded 2-core machine


def configure(http, name: str, value: object) -> None:
    answer = http.post(f"{CONFIG}/{name}/{str(value).lower()}")
    assert answer.status_code == 204, answer.text


def receive(consumer: sluice.Consumer, count: int, seconds: float) -> list[tuple[float, object]]:
    """(wall-clock ms at arrival, message) for up to ``count`` messages, acknowledged."""
    return receive_some(consumer, count, seconds, lambda: time.time() * 1000)


def test_delayed_messages_wait_for_their_time_and_go_in_due_order(http, namespace, client):
    assert http.put(PATH).status_code == 204
    configure(http, "isDelayedDeliveryDeliverAtTimeStrict", True)
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(TOPIC)
    now = int(time.time() * 1000)
    # Sent in one order, due in the reverse one; a plain message goes at once.
    due = {f"d{i}".encode(): now + 2500 - 300 * i for i in range(5)}
    for payload, at in due.items():
        producer.send(payload, deliver_at=at)
    after = producer.send(b"after", deliver_after=timedelta(seconds=1))
    producer.send(b"plain")
    got = receive(consumer, 7, 8)
    payloads = [m.data() for _, m in got]
    assert payloads[0] == b"plain"
    assert payloads[1:] == [b"after", b"d4", b"d3", b"d2", b"d1", b"d0"], payloads
    for arrived, message in got[2:]:
        assert due[message.data()] <= arrived <= due[message.data()] + LATE_MARGIN * 1000
        assert message.redelivery_count() == 0
    assert got[1][1].message_id() == after
    assert got[1][0] >= now + 1000

    def sub_stats():
        return http.get(f"{PATH}/stats").json()["subscriptions"]["s"]

    # Seven first deliveries, counted at once; the backlog is empty once the grouped
    # acknowledgements (sent every 100 ms) arrived.
    assert sub_stats()["msgOutCounter"] == 7
    wait_until(lambda: sub_stats()["msgBacklog"] == 0, timeout=5)
    assert sub_stats()["msgOutCounter"] == 7
    consumer.close()


@pytest.mark.parametrize("kind", [sluice.ConsumerType.Shared, sluice.ConsumerType.KeyShared])
def test_with_the_defaults_a_delayed_message_is_never_early(http, namespace, client, kind):
    """No broker setting changed: a message sent with ``deliver_after`` 2 s arrives no sooner
    than 2 s after the send began (tolerance for early: 0 ms)."""
    assert http.put(PATH).status_code == 204
    assert "isDelayedDeliveryDeliverAtTimeStrict" not in http.get(f"{CONFIG}/values").json()
    consumer = client.subscribe(TOPIC, "s", consumer_type=kind)
    producer = client.create_producer(TOPIC)
    delay_ms = 2000
    sent = []
    for i in range(3):
        sent.append(time.time() * 1000)
        producer.send(f"late-{i}".encode(), deliver_after=timedelta(milliseconds=delay_ms))
        time.sleep(0.3)
    got = receive(consumer, 3, 10)
    assert [m.data() for _, m in got] == [f"late-{i}".encode() for i in range(3)]
    for (arrived, _), at in zip(got, sent, strict=True):
        assert arrived - at >= delay_ms, arrived - at
        assert arrived - at <= delay_ms + LATE_MARGIN * 1000, arrived - at
    consumer.close()


def test_exclusive_and_failover_deliver_at_once(http, namespace, client):
    assert http.put(PATH).status_code == 204
    producer = client.create_producer(TOPIC)
    for kind in (sluice.ConsumerType.Exclusive, sluice.ConsumerType.Failover):
        consumer = client.subscribe(TOPIC, f"s-{kind.value}", consumer_type=kind)
        sent = time.time() * 1000
        producer.send(kind.value.encode(), deliver_after=timedelta(seconds=30))
        [(arrived, message)] = receive(consumer, 1, 10)
        assert message.data() == kind.value.encode()
        assert arrived - sent < 10_000  # not held for the 30 s
        consumer.close()


def test_turned_off_or_within_a_tick_goes_at_once(http, namespace, client):
    assert http.put(PATH).status_code == 204
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(TOPIC)
    # Not strict (Pulsar's default): a message due within a tick goes now.
    configure(http, "isDelayedDeliveryDeliverAtTimeStrict", False)
    configure(http, "delayedDeliveryTickTimeMillis", 20_000)
    sent = time.time() * 1000
    producer.send(b"within-a-tick", deliver_after=timedelta(seconds=15))
    [(arrived, message)] = receive(consumer, 1, 10)
    assert message.data() == b"within-a-tick" and arrived - sent < 10_000
    # Turned off: every message goes at once.
    configure(http, "delayedDeliveryTickTimeMillis", 1000)
    configure(http, "delayedDeliveryEnabled", False)
    sent = time.time() * 1000
    producer.send(b"off", deliver_after=timedelta(seconds=30))
    [(arrived, message)] = receive(consumer, 1, 10)
    assert message.data() == b"off" and arrived - sent < 10_000
    # Back on: held again (the next message arrives first).
    configure(http, "delayedDeliveryEnabled", True)
    producer.send(b"held", deliver_after=timedelta(seconds=3))
    producer.send(b"now")
    got = receive(consumer, 2, 10)
    assert [m.data() for _, m in got] == [b"now", b"held"]
    consumer.close()


def test_arguments_are_checked(http, namespace, client):
    assert http.put(PATH).status_code == 204
    producer = client.create_producer(TOPIC)
    with pytest.raises(sluice.InvalidConfiguration):
        producer.send(b"x", deliver_after=5)
    with pytest.raises(sluice.InvalidConfiguration):
        producer.send(b"x", deliver_at="soon")


def test_delayed_messages_count_against_the_limit_when_dispatched(http, namespace, client):
    """10 msg/s on the subscription: 30 messages due in 2 s do not use the quota when sent
    (10 plain ones go meanwhile); from their due time on, the strict bound holds."""
    assert http.put(PATH).status_code == 204
    configure(http, "isDelayedDeliveryDeliverAtTimeStrict", True)
    limit = 10
    answer = http.post(f"{ADMIN}/namespaces/acme/orders/subscriptionDispatchRate", json=rate(limit))
    assert answer.status_code == 204
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(TOPIC)
    due = int(time.time() * 1000) + 2500
    for i in range(30):
        producer.send_async(f"late-{i}".encode(), None, deliver_at=due)
    producer.flush()
    start = time.time() * 1000
    for i in range(limit):
        producer.send_async(f"plain-{i}".encode(), None)
    producer.flush()
    got = receive(consumer, 40, 12)
    assert len(got) == 40
    plain = [at for at, m in got if m.data().startswith(b"plain")]
    late = [at for at, m in got if m.data().startswith(b"late")]
    # The plain messages had the whole first period: all went before the delayed were due.
    assert max(plain) < due, max(plain) - start
    assert min(late) >= due
    assert excess([(at - due) / 1000 for at in late], limit) <= 0, sorted(late)
    # ... and the limit was used: 30 at 10/s take at least two more periods.
    assert max(late) - due >= 2000
    consumer.close()


def test_held_messages_survive_the_death_of_their_worker(fleet, http, redis_server):
    assert http.put(PATH).status_code == 204
    configure(http, "isDelayedDeliveryDeliverAtTimeStrict", True)
    first = fleet.start("w1")
    with sluice.Client(redis_server.url) as client:
        consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
        producer = client.create_producer(TOPIC)
        due = int(time.time() * 1000) + 4000
        for i in range(5):
            producer.send(f"late-{i}".encode(), deliver_at=due + i)
        producer.send(b"plain")
        assert [m.data() for _, m in receive(consumer, 1, 10)] == [b"plain"]
        # The worker held them (read into the group, scheduled); now it dies.
        wait_until(lambda: fleet.redis.xpending("sl:{acme/orders/later}:log", "s")["pending"])
        with_signal(first, signal.SIGKILL)
        first.wait(10)
        fleet.start("w2")
        got = receive(consumer, 5, 15)
        assert [m.data() for _, m in got] == [f"late-{i}".encode() for i in range(5)]
        assert all(at >= due for at, _ in got)
        assert all(m.redelivery_count() == 0 for _, m in got)
        consumer.close()
