"""Message priority (``send(..., priority=N)``) against a real worker.

A subscription hands out its backlog highest priority first and in send order within one
priority, under the same dispatch limit (every priority counts against the one budget, the
strict bound holds); the default priority is 4 and stores nothing; out-of-range priorities
are refused by the client; delayed messages join the order when due; nacked messages come
back as redeliveries; Key_Shared keeps each key's order.  See docs/priority.md.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

import sluice
from sluice.protocol import keys
from sluice.protocol.connection import connect
from sluice.protocol.names import TopicName
from tests.receiving import receive_some
from tests.workers.conftest import ADMIN, rate, wait_until
from tests.workers.test_strict_bound import excess

TOPIC = "persistent://acme/orders/urgent"
PATH = f"{ADMIN}/persistent/acme/orders/urgent"
PARTITION = TopicName.from_full(TOPIC)
# How the tests' partition keeps its priorities (docs/priority.md): "index" (one stream,
# ordered per subscription through the priority index) or "streams" (a stream per level).
LAYOUT: dict[str, object] = {}


@pytest.fixture(autouse=True, params=["index", "streams"])
def layout(request, http, redis_server) -> str:
    """Every test runs with both layouts: ``priorityLevelStreams`` false, then true (the
    default)."""
    LAYOUT.update(name=request.param, url=redis_server.url)
    if request.param == "index":
        answer = http.post(f"{ADMIN}/brokers/configuration/priorityLevelStreams/false")
        assert answer.status_code == 204, answer.text
    return request.param


def make_topic(http) -> None:
    """Create the topic; with the priority index, wait until its owner has written the switch
    its first message of another priority than 4 reads (level streams need none: the
    default)."""
    assert http.put(PATH).status_code == 204
    if LAYOUT["name"] == "index":
        redis_client = connect(str(LAYOUT["url"]))
        wait_until(lambda: redis_client.hget(keys.limits(PARTITION), "priorityIndexOnly") == b"1")
        redis_client.close()


def priority_stream(level: int) -> str:
    """The stream a message of ``level`` is stored in, in this test's layout."""
    if LAYOUT["name"] == "streams":
        return keys.level_log(PARTITION, level)
    return keys.log(PARTITION)


def receive(consumer: sluice.Consumer, count: int, seconds: float, ack: bool = True, origin=None):
    """(seconds since ``origin``, else the call, message) for up to ``count`` messages."""
    start = time.monotonic() if origin is None else origin
    return receive_some(consumer, count, seconds, lambda: time.monotonic() - start, ack)


def idle_subscription(http, client, kind=sluice.ConsumerType.Shared) -> None:
    """The topic and its subscription "s", closed: the backlog builds while nobody consumes."""
    make_topic(http)
    client.subscribe(TOPIC, "s", consumer_type=kind).close()


def mixed(count: int) -> list[tuple[int, bytes]]:
    """(priority, payload) for ``count`` messages spread over every level, in send order."""
    return [((i * 7) % 10, f"m{i:03d}".encode()) for i in range(count)]


def waiting_backlog(http, client, count: int) -> tuple[sluice.Producer, list[tuple[int, bytes]]]:
    """Send ``count`` messages spread over every level (``mixed``) to the topic and wait until
    subscription "s" has them all in its backlog; the producer and what it sent."""
    producer = client.create_producer(TOPIC)
    sent = mixed(count)
    for priority, payload in sent:
        producer.send(payload, priority=priority)
    wait_until(lambda: backlog(http) == count)
    return producer, sent


def expected_order(sent: list[tuple[int, bytes]]) -> list[bytes]:
    """Highest priority first, send order within one priority."""
    order = sorted(range(len(sent)), key=lambda i: (-sent[i][0], i))
    return [sent[i][1] for i in order]


def backlog(http, name: str = "s") -> int:
    return http.get(f"{PATH}/stats").json()["subscriptions"][name]["msgBacklog"]


@pytest.mark.parametrize(
    "kind",
    [sluice.ConsumerType.Shared, sluice.ConsumerType.Exclusive, sluice.ConsumerType.Failover],
)
def test_backlog_goes_highest_priority_first_fifo_within_a_level(http, namespace, client, kind):
    idle_subscription(http, client, kind)
    _producer, sent = waiting_backlog(http, client, 60)
    consumer = client.subscribe(TOPIC, "s", consumer_type=kind)
    received = receive(consumer, 60, 15)
    assert [m.data() for _, m in received] == expected_order(sent)
    assert all(m.redelivery_count() == 0 for _, m in received)
    wait_until(lambda: backlog(http) == 0)
    consumer.close()


def test_under_a_limit_order_holds_and_the_strict_bound_too(http, namespace, client):
    """10 msg/s on the subscription, consumer connected while producing: after what the first
    period took, the rest goes highest priority first, and never faster than the bound."""
    make_topic(http)
    limit = 10
    answer = http.post(f"{ADMIN}/namespaces/acme/orders/subscriptionDispatchRate", json=rate(limit))
    assert answer.status_code == 204
    origin = time.monotonic()
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(TOPIC)
    sent = mixed(40)
    for priority, payload in sent:
        producer.send_async(payload, None, priority=priority)
    producer.flush()
    got = receive(consumer, 40, 12, origin=origin)
    assert len(got) == 40
    payloads = [m.data() for _, m in got]
    assert sorted(payloads) == sorted(p for _, p in sent)
    # What went after the first period was in the backlog: strictly ordered.
    later = payloads[limit:]
    assert later == [p for p in expected_order(sent) if p in set(later)]
    assert excess([at for at, _ in got], limit) <= 0
    consumer.close()


def test_default_priority_stores_nothing_and_ranges_are_checked(
    http, namespace, client, redis_server
):
    make_topic(http)
    producer = client.create_producer(TOPIC)
    producer.send(b"plain")
    producer.send(b"four", priority=4)
    producer.send(b"nine", priority=9)
    redis_client = connect(redis_server.url)
    stream = keys.log(PARTITION)
    fields = [f for _, f in redis_client.xrange(stream)]
    assert b"u" not in fields[0] and b"u" not in fields[1]
    stored = redis_client.xrange(priority_stream(9))
    assert stored[-1][1][b"u"] == b"9"
    if LAYOUT["name"] == "streams":
        assert len(fields) == 2 and keys.level_of(stored[-1][0]) == 9
    for bad in (-1, 10, 4.0, "5", True, None):
        with pytest.raises(ValueError):
            producer.send(b"x", priority=bad)
        with pytest.raises(ValueError):
            producer.send_async(b"x", None, priority=bad)
    stored = (len(redis_client.xrange(stream)), len(redis_client.xrange(priority_stream(9))))
    assert stored == ((2, 1) if LAYOUT["name"] == "streams" else (3, 3))


def test_nacked_messages_come_back(http, namespace, client):
    make_topic(http)
    consumer = client.subscribe(
        TOPIC, "s", consumer_type=sluice.ConsumerType.Shared, negative_ack_redelivery_delay_ms=100
    )
    producer = client.create_producer(TOPIC)
    producer.send(b"low", priority=1)
    producer.send(b"high", priority=8)
    first = receive(consumer, 2, 10, ack=False)
    assert len(first) == 2
    for _, message in first:
        consumer.negative_acknowledge(message)
    again = receive(consumer, 2, 10)
    assert sorted(m.data() for _, m in again) == [b"high", b"low"]
    assert all(m.redelivery_count() == 1 for _, m in again)
    wait_until(lambda: backlog(http) == 0)
    consumer.close()


def test_delayed_messages_join_the_order_when_due(http, namespace, client):
    idle_subscription(http, client)
    producer = client.create_producer(TOPIC)
    producer.send(b"late-high", priority=9, deliver_after=timedelta(milliseconds=1500))
    producer.send(b"low", priority=0)
    producer.send(b"mid", priority=5)
    wait_until(lambda: backlog(http) == 3)
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    got = receive(consumer, 3, 10)
    assert [m.data() for _, m in got] == [b"mid", b"low", b"late-high"]
    assert got[2][1].redelivery_count() == 0
    consumer.close()


def test_key_shared_keeps_each_keys_order(http, namespace, client):
    idle_subscription(http, client, sluice.ConsumerType.KeyShared)
    producer = client.create_producer(TOPIC)
    sent = []
    for i in range(30):
        key = f"k{i % 3}"
        priority = (i * 7) % 10
        producer.send(f"{key}-{i}".encode(), partition_key=key, priority=priority)
        sent.append(f"{key}-{i}".encode())
    wait_until(lambda: backlog(http) == 30)
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.KeyShared)
    got = [m.data() for _, m in receive(consumer, 30, 10)]
    assert sorted(got) == sorted(sent)
    for key in ("k0", "k1", "k2"):
        mine = [p for p in got if p.startswith(key.encode())]
        assert mine == [p for p in sent if p.startswith(key.encode())]
    consumer.close()


def set_eviction_quota(http, limit: int) -> None:
    body = {"limitMessages": limit, "policy": "lowest_priority_eviction"}
    answer = http.post(f"{PATH}/backlogQuota", json=body)
    assert answer.status_code == 204, answer.text
    got = http.get(f"{PATH}/backlogQuotaMap").json()
    assert got["destination_storage"]["policy"] == "lowest_priority_eviction"


def test_a_full_backlog_evicts_the_oldest_lowest_or_refuses(http, namespace, client):
    make_topic(http)
    set_eviction_quota(http, 5)
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    consumer.close()
    producer = client.create_producer(TOPIC, max_send_attempts=1)
    for payload, priority in [(b"a2", 2), (b"b1", 1), (b"c1", 1), (b"d3", 3), (b"e5", 5)]:
        producer.send(payload, priority=priority)
    assert backlog(http) == 5
    # Full: a higher priority evicts the oldest of the lowest (b1), the backlog stays at 5.
    producer.send(b"f6", priority=6)
    assert backlog(http) == 5
    producer.send(b"g2", priority=2)  # evicts c1, the only 1 left
    assert backlog(http) == 5
    # No message lower than 2 waits now: a 2 (or lower) is refused, nothing changes.
    for priority in (2, 0):
        with pytest.raises(sluice.ProducerBlockedQuotaExceededException) as refused:
            producer.send(b"no", priority=priority)
        assert "lowest_priority_eviction" in str(refused.value)
    assert backlog(http) == 5
    producer.send(b"h4")  # the default priority (4) is higher than 2: evicts a2
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    got = [m.data() for _, m in receive(consumer, 6, 5)]
    assert got == [b"f6", b"e5", b"h4", b"d3", b"g2"]
    wait_until(lambda: backlog(http) == 0)  # nothing evicted is left pending
    consumer.close()


def test_eviction_spares_what_a_consumer_holds(http, namespace, client):
    """Entries out with a consumer (not acknowledged) count in the backlog but are never
    evicted: with all of them out, a send into the full backlog is refused."""
    make_topic(http)
    set_eviction_quota(http, 3)
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(TOPIC, max_send_attempts=1)
    for i in range(3):
        producer.send(f"low{i}".encode(), priority=0)
    held = receive(consumer, 3, 5, ack=False)
    assert len(held) == 3
    with pytest.raises(sluice.ProducerBlockedQuotaExceededException):
        producer.send(b"high", priority=9)
    consumer.acknowledge(held[0][1])
    wait_until(lambda: backlog(http) == 2)
    producer.send(b"high", priority=9)
    consumer.close()


def test_deleting_the_topic_drops_its_eviction_index(http, namespace, client, redis_server):
    """The lowest-priority eviction index (a zset per priority) goes with the topic's other
    keys: a deleted topic leaves nothing of its own in Redis but its fencing epoch (kept so
    that a topic made again never hands out a token an old owner still holds)."""
    make_topic(http)
    set_eviction_quota(http, 5)
    client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared).close()
    producer = client.create_producer(TOPIC)
    for priority in (1, 7):
        producer.send(b"m", priority=priority)
    producer.close()
    redis_client = connect(redis_server.url)
    pattern = keys.partition_prefix(TopicName.from_full(TOPIC)) + "*"
    assert {k for k in redis_client.scan_iter(match=pattern) if b":pq:" in k}
    assert http.delete(PATH, params={"force": "true"}).status_code == 204
    epoch = keys.partition_prefix(TopicName.from_full(TOPIC)).encode() + b"epoch"
    wait_until(lambda: set(redis_client.scan_iter(match=pattern)) <= {epoch}, timeout=10)
    redis_client.close()


def test_stats_per_priority_level(http, namespace, client):
    """``priorityLevels`` of a subscription: messages waiting and dispatched per priority.
    With the priority index, a subscription that never read a priority has none; with level
    streams, every subscription's waiting messages per level are known, read or not."""
    make_topic(http)
    answer = http.post(f"{ADMIN}/namespaces/acme/orders/subscriptionDispatchRate", json=rate(1))
    assert answer.status_code == 204
    for name in ("s", "plain"):
        client.subscribe(TOPIC, name, consumer_type=sluice.ConsumerType.Shared).close()
    producer = client.create_producer(TOPIC)
    for payload, priority in [(b"a", 9), (b"b", 9), (b"c", 0), (b"d", 0), (b"e", 4)]:
        producer.send(payload, priority=priority)
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)

    def levels():
        doc = http.get(f"{PATH}/stats").json()["subscriptions"]["s"]
        return doc.get("priorityLevels")

    got = wait_until(lambda: (lv := levels()) and lv.get("9", {}).get("msgOutCounter") and lv)
    assert list(got) == sorted(got, key=int, reverse=True)  # highest first
    assert got["0"]["msgBacklog"] == 2 and got["0"]["msgOutCounter"] == 0
    plain = http.get(f"{PATH}/stats").json()["subscriptions"]["plain"]
    if LAYOUT["name"] == "streams":
        waiting = {k: v["msgBacklog"] for k, v in plain["priorityLevels"].items()}
        assert waiting == {"9": 2, "4": 1, "0": 2}
    else:
        assert "priorityLevels" not in plain
    received = receive(consumer, 5, 10)
    assert [m.data() for _, m in received] == [b"a", b"b", b"e", b"c", b"d"]
    done = wait_until(lambda: (lv := levels()) and lv.get("0", {}).get("msgOutCounter") == 2 and lv)
    assert {k: v["msgOutCounter"] for k, v in done.items()} == {"9": 2, "4": 1, "0": 2}
    assert all(v["msgBacklog"] == 0 for v in done.values())
    consumer.close()


def test_starvation_guard_sends_the_oldest_every_n_th(http, namespace, client):
    """``priorityOldestEvery`` 3: of every three messages handed out, one is the oldest
    waiting, whatever its priority; 0 (the default) is strict priority."""
    make_topic(http)
    answer = http.post(f"{PATH}/priorityOldestEvery", json=3)
    assert answer.status_code == 204, answer.text
    assert http.get(f"{PATH}/priorityOldestEvery").json() == 3
    assert http.post(f"{PATH}/priorityOldestEvery", json=-1).status_code == 412
    client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared).close()
    producer = client.create_producer(TOPIC)
    for i in range(4):
        producer.send(f"low{i}".encode(), priority=0)
    for i in range(8):
        producer.send(f"high{i}".encode(), priority=9)
    wait_until(lambda: backlog(http) == 12)
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    got = [m.data().decode() for _, m in receive(consumer, 12, 10)]
    assert got == [
        "high0",
        "high1",
        "low0",
        "high2",
        "high3",
        "low1",
        "high4",
        "high5",
        "low2",
        "high6",
        "high7",
        "low3",
    ]
    consumer.close()
    applied = http.get(f"{PATH}/effectiveFlowControls").json()
    assert applied["flowControl"]["priorityOldestEvery"] == {"value": 3, "source": "topic"}


def test_dead_letter_keeps_the_priority_and_messages_tell_theirs(http, namespace, client):
    make_topic(http)
    consumer = client.subscribe(
        TOPIC,
        "s",
        consumer_type=sluice.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=0,
        dead_letter_policy=sluice.DeadLetterPolicy(max_redeliver_count=1),
    )
    dlq = client.subscribe(
        f"{TOPIC}-s-DLQ", "dlq", initial_position=sluice.InitialPosition.Earliest
    )
    producer = client.create_producer(TOPIC)
    producer.send(b"plain")
    producer.send(b"poison", priority=7)
    got = {}
    for _ in range(3):
        message = consumer.receive(timeout_millis=5000)
        got.setdefault(message.data(), []).append(message.priority())
        if message.data() == b"plain":
            consumer.acknowledge(message)
        else:
            consumer.negative_acknowledge(message)
    assert got == {b"plain": [4], b"poison": [7, 7]}
    dead = dlq.receive(timeout_millis=5000)
    assert (dead.data(), dead.priority()) == (b"poison", 7)
    consumer.close()
    dlq.close()


def test_max_unacked_counts_every_level(http, namespace, client):
    """maxUnackedMessagesOnSubscription 3: at most three messages are out unacknowledged,
    whatever their levels (with level streams, pending lists of several streams)."""
    idle_subscription(http, client)
    answer = http.post(f"{PATH}/maxUnackedMessagesOnSubscription", json=3)
    assert answer.status_code == 204, answer.text
    _producer, sent = waiting_backlog(http, client, 9)
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    first = receive(consumer, 9, 2, ack=False)
    assert [m.data() for _, m in first] == expected_order(sent)[:3]
    for _, message in first:
        consumer.acknowledge(message)
    rest = receive(consumer, 6, 10)
    assert [m.data() for _, m in rest] == expected_order(sent)[3:]
    wait_until(lambda: backlog(http) == 0)
    consumer.close()


def test_a_closed_consumers_messages_go_to_the_next_one(http, namespace, client):
    """What a consumer received and did not acknowledge comes back to the next consumer when
    it closes, from every level."""
    idle_subscription(http, client)
    _producer, sent = waiting_backlog(http, client, 10)
    first = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    held = receive(first, 10, 10, ack=False)
    assert len(held) == 10
    first.close()
    second = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    again = receive(second, 10, 10)
    assert sorted(m.data() for _, m in again) == sorted(p for _, p in sent)
    assert all(m.redelivery_count() == 1 for _, m in again)
    wait_until(lambda: backlog(http) == 0)
    second.close()


def test_reset_cursor_to_the_start_hands_every_level_out_again(http, namespace, client):
    idle_subscription(http, client)
    producer = client.create_producer(TOPIC)
    sent = mixed(12)
    for priority, payload in sent:
        producer.send(payload, priority=priority)
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    assert [m.data() for _, m in receive(consumer, 12, 10)] == expected_order(sent)
    wait_until(lambda: backlog(http) == 0)
    consumer.close()
    answer = http.post(f"{PATH}/subscription/s/resetcursor", json="earliest")
    assert answer.status_code == 204, answer.text
    wait_until(lambda: backlog(http) == 12)
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    assert [m.data() for _, m in receive(consumer, 12, 10)] == expected_order(sent)
    consumer.close()


def test_a_subscription_made_again_starts_where_it_is_told(http, namespace, client):
    """Deleted and made again at the latest position, a subscription gets nothing of what was
    sent before, at any level; made at the earliest, everything."""
    idle_subscription(http, client)
    producer, sent = waiting_backlog(http, client, 10)
    assert http.delete(f"{PATH}/subscription/s").status_code == 204
    late = client.subscribe(TOPIC, "late", consumer_type=sluice.ConsumerType.Shared)
    early = client.subscribe(
        TOPIC,
        "early",
        consumer_type=sluice.ConsumerType.Shared,
        initial_position=sluice.InitialPosition.Earliest,
    )
    producer.send(b"after", priority=0)
    assert [m.data() for _, m in receive(late, 11, 3)] == [b"after"]
    got = [m.data() for _, m in receive(early, 11, 10)]
    assert got == expected_order([*sent, (0, b"after")])
    late.close()
    early.close()


def test_a_delayed_message_come_due_waits_for_higher_levels(http, namespace, client):
    """A low-priority delayed message, held while nothing else waited, that comes due while
    higher levels wait (5 msg/s) goes after them, not before."""
    make_topic(http)
    assert http.post(f"{PATH}/subscriptionDispatchRate", json=rate(5)).status_code == 204
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(TOPIC)
    producer.send(b"late-low", priority=1, deliver_after=timedelta(milliseconds=500))
    time.sleep(0.2)  # read, and held until its time
    for i in range(8):
        producer.send(f"high{i}".encode(), priority=8)
    got = [m.data() for _, m in receive(consumer, 9, 10)]
    assert got == [*(f"high{i}".encode() for i in range(8)), b"late-low"]
    consumer.close()


def test_a_large_message_of_a_level_reaches_its_consumer(http, namespace, client):
    """A run too large to travel inside the dispatch packet (over 512 KB) goes as a range of
    ids the consumer reads itself: from the level's own stream, with level streams."""
    idle_subscription(http, client)
    producer = client.create_producer(TOPIC)
    big = b"B" * 600_000
    producer.send(big, priority=7)
    producer.send(b"small", priority=2)
    wait_until(lambda: backlog(http) == 2)
    consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
    assert [m.data() for _, m in receive(consumer, 2, 10)] == [big, b"small"]
    consumer.close()
