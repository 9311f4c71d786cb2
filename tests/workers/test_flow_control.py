"""Flow controls end to end: backlog quota (refuse, hold, evict), max unacked, message TTL."""

from __future__ import annotations

import threading
import time

import pytest

import sluice
from sluice.backoff import FakeClock
from sluice.protocol import keys
from sluice.protocol.connection import connect
from sluice.protocol.names import TopicName
from tests.workers.conftest import ADMIN, wait_until

TOPIC = "persistent://acme/orders/flow"
PATH = f"{ADMIN}/persistent/acme/orders/flow"
NAME = TopicName.from_full(TOPIC)


@pytest.fixture
def topic(http, namespace):
    """A non-partitioned topic with a subscription ``sub`` that starts at the end."""
    assert http.put(PATH).status_code == 204
    assert http.put(f"{PATH}/subscription/sub").status_code == 204
    return http


def applied(worker, check) -> None:
    """Wait until the worker resolved the flow limits ``check`` accepts."""
    wait_until(lambda: worker.call(lambda w: check(w.policy.flow(NAME))), timeout=10)


def quota_flag(redis_server) -> bytes | None:
    r = connect(redis_server.url)
    try:
        return r.get(keys.quota(NAME))
    finally:
        r.close()


def stats(http) -> dict:
    return http.get(f"{PATH}/stats").json()


def receive_all(consumer, timeout: float = 1.0) -> list:
    """Receive (without acking) until nothing arrives for ``timeout`` seconds."""
    got = []
    while True:
        try:
            got.append(consumer.receive(timeout_millis=int(timeout * 1000)))
        except sluice.Timeout:
            return got


def test_quota_exception_policy_refuses_after_the_configured_attempts(
    topic, worker, client, redis_server
):
    body = {"limitMessages": 5, "policy": "producer_exception"}
    assert topic.post(f"{PATH}/backlogQuota", json=body).status_code == 204
    applied(worker, lambda f: f.quotas["destination_storage"].value.limit_messages == 5)
    producer = client.create_producer(TOPIC)
    for i in range(5):
        producer.send(str(i).encode())
    wait_until(lambda: quota_flag(redis_server), timeout=5)
    clock = FakeClock()
    refused = client.create_producer(
        TOPIC, backoff_initial_ms=100, backoff_multiplier=2.0, max_send_attempts=4, clock=clock
    )
    with pytest.raises(sluice.ProducerBlockedQuotaExceededException) as raised:
        refused.send(b"too much")
    assert str(raised.value).startswith(
        f"TOO_MANY_REQUESTS: backlog quota exceeded for {TOPIC}: destination_storage messages"
    )
    assert "after 4 attempts" in str(raised.value)
    # Three waits between four attempts, on the curve 0.1, 0.2, 0.4 s (+-20 % jitter).
    assert len(clock.slept) == 3
    for slept, nominal in zip(clock.slept, (0.1, 0.2, 0.4), strict=True):
        assert nominal * 0.8 <= slept <= nominal * 1.2
    assert not isinstance(raised.value, sluice.Timeout)
    doc = wait_until(lambda: (d := stats(topic)).get("publishRejectedByBacklogQuota") and d)
    assert doc["publishRejectedByBacklogQuota"] == 4
    assert "backlog quota exceeded" in doc["backlogQuotaExceeded"]
    assert doc["msgInCounter"] == 5


def test_quota_hold_policy_blocks_until_a_consumer_drains(topic, worker, client, redis_server):
    body = {"limitMessages": 5, "policy": "producer_request_hold"}
    assert topic.post(f"{PATH}/backlogQuota", json=body).status_code == 204
    applied(worker, lambda f: f.quotas["destination_storage"].value.limit_messages == 5)
    producer = client.create_producer(TOPIC, send_timeout_millis=20_000, backoff_initial_ms=100)
    for i in range(5):
        producer.send(str(i).encode())
    wait_until(lambda: quota_flag(redis_server), timeout=5)
    outcome: dict = {}

    def send_held() -> None:
        started = time.monotonic()
        outcome["id"] = producer.send(b"held")
        outcome["after"] = time.monotonic() - started

    sender = threading.Thread(target=send_held, daemon=True)
    sender.start()
    time.sleep(1.0)
    assert sender.is_alive(), "the send must be held while the backlog is at the quota"
    consumer = client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
    for _ in range(5):
        consumer.acknowledge(consumer.receive(timeout_millis=5000))
    sender.join(15)
    assert not sender.is_alive()
    assert "id" in outcome and outcome["after"] >= 1.0
    assert consumer.receive(timeout_millis=5000).data() == b"held"


def test_quota_hold_policy_times_out(topic, worker, client, redis_server):
    body = {"limitMessages": 1, "policy": "producer_request_hold"}
    assert topic.post(f"{PATH}/backlogQuota", json=body).status_code == 204
    applied(worker, lambda f: f.quotas["destination_storage"].value.limit_messages == 1)
    clock = FakeClock()
    producer = client.create_producer(TOPIC, send_timeout_millis=5_000, clock=clock)
    producer.send(b"first")
    wait_until(lambda: quota_flag(redis_server), timeout=5)
    with pytest.raises(sluice.ProducerBlockedQuotaExceededError) as raised:
        producer.send(b"second")
    assert isinstance(raised.value, sluice.Timeout)
    # Held on the fake clock: polled at most once a second until the 5 s send timeout.
    assert sum(clock.slept) <= 5.0 and all(s <= 1.0 for s in clock.slept)
    assert len(clock.slept) >= 4


def test_quota_eviction_skips_the_oldest_backlog(topic, worker, client, redis_server):
    body = {"limitMessages": 10, "policy": "consumer_backlog_eviction"}
    assert topic.post(f"{PATH}/backlogQuota", json=body).status_code == 204
    applied(worker, lambda f: f.quotas["destination_storage"].value.limit_messages == 10)
    producer = client.create_producer(TOPIC)
    for i in range(20):
        producer.send(str(i).encode())  # never refused under the eviction policy
    doc = wait_until(
        lambda: (d := stats(topic))["subscriptions"]["sub"].get("msgEvictedCounter", 0) >= 11 and d
    )
    assert quota_flag(redis_server) is None
    # Evicted down to 90 % of the limit: the 9 newest messages are left.
    assert doc["subscriptions"]["sub"]["msgEvictedCounter"] == 11
    consumer = client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
    assert [m.data() for m in receive_all(consumer)] == [str(i).encode() for i in range(11, 20)]


def test_max_unacked_per_subscription_stops_and_resumes_dispatch(topic, worker, client):
    assert topic.post(f"{PATH}/maxUnackedMessagesOnSubscription", json=10).status_code == 204
    applied(worker, lambda f: f.max_unacked_per_subscription.value == 10)
    consumer = client.subscribe(
        TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared, receiver_queue_size=100
    )
    producer = client.create_producer(TOPIC)
    for i in range(40):
        producer.send(str(i).encode())
    first = receive_all(consumer)
    # Exact: the limit is checked atomically with dispatch.
    assert len(first) == 10
    doc = stats(topic)["subscriptions"]["sub"]
    assert doc["unackedMessages"] == 10
    assert doc["blockedSubscriptionOnUnackedMsgs"] is True
    for message in first[:4]:
        consumer.acknowledge(message)
    # The acks wake the dispatcher: exactly 4 more arrive, well before the 5 s park fallback.
    started = time.monotonic()
    second = receive_all(consumer, timeout=1.5)
    assert len(second) == 4
    assert time.monotonic() - started < 4.0
    for message in first[4:] + second:
        consumer.acknowledge(message)
    rest = []
    deadline = time.monotonic() + 15
    while len(first) + len(second) + len(rest) < 40 and time.monotonic() < deadline:
        batch = receive_all(consumer, timeout=0.5)
        for message in batch:
            consumer.acknowledge(message)
        rest.extend(batch)
    assert len(first) + len(second) + len(rest) == 40


def test_max_unacked_per_consumer_caps_each_consumer(topic, worker, client):
    assert topic.post(f"{PATH}/maxUnackedMessagesOnConsumer", json=3).status_code == 204
    applied(worker, lambda f: f.max_unacked_per_consumer.value == 3)
    consumers = [
        client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared) for _ in range(2)
    ]
    producer = client.create_producer(TOPIC)
    for i in range(20):
        producer.send(str(i).encode())
    got = [receive_all(c) for c in consumers]
    assert [len(g) for g in got] == [3, 3]
    doc = stats(topic)["subscriptions"]["sub"]
    assert all(c["blockedConsumerOnUnackedMsgs"] for c in doc["consumers"])
    consumers[0].acknowledge(got[0][0])
    assert len(receive_all(consumers[0], timeout=1.5)) == 1
    assert receive_all(consumers[1], timeout=0.2) == []


def test_message_ttl_expires_undelivered_messages(topic, worker, client):
    assert topic.post(f"{PATH}/messageTTL", params={"messageTTL": 1}).status_code == 204
    applied(worker, lambda f: f.message_ttl.value == 1)
    producer = client.create_producer(TOPIC)
    for i in range(5):
        producer.send(f"old-{i}".encode())
    # TTL 1 s, checked by housekeeping every second.
    doc = wait_until(
        lambda: (d := stats(topic))["subscriptions"]["sub"]["totalMsgExpired"] >= 5 and d,
        timeout=6,
    )
    assert doc["subscriptions"]["sub"]["totalMsgExpired"] == 5
    assert doc["msgExpiredCounter"] == 5
    consumer = client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
    producer.send(b"fresh")
    assert [m.data() for m in receive_all(consumer)] == [b"fresh"]
    # The backlog (lag) is still reported correctly after the cursor moved.
    assert wait_until(lambda: stats(topic)["subscriptions"]["sub"]["msgBacklog"] == 1)
