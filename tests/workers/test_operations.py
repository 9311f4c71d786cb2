"""Subscription and topic operations through REST, seen from a consumer.

Skip, clear-backlog, expire-messages and reset-cursor change what the subscription delivers
next; peek and examine read messages without consuming them; internal stats show the stream
and its cursors; unload makes the owner let go and take the partition again; the v2 lookup
says where a topic is served.  Everything goes through the public surface: REST, the client,
the stats document.
"""

from __future__ import annotations

import json
import math
import threading
import time

import httpx
import pytest
import redis
from sqlalchemy import text

import sluice
from sluice.protocol import keys
from sluice.protocol.frames import unpack_batch
from sluice.protocol.names import TopicName
from tests.workers.conftest import ADMIN, rate, wait_until

TOPIC = "persistent://acme/orders/ops"
PATH = f"{ADMIN}/persistent/acme/orders/ops"


def sub_path(subscription: str = "audit", topic_path: str = PATH) -> str:
    return f"{topic_path}/subscription/{subscription}"


def produce(client: sluice.Client, count: int, prefix: str = "m", topic: str = TOPIC, **kw):
    """Send ``count`` messages ``{prefix}0``...; their ids."""
    producer = client.create_producer(topic)
    try:
        return [producer.send(f"{prefix}{i}".encode(), **kw) for i in range(count)]
    finally:
        producer.close()


def receive(consumer: sluice.Consumer, seconds: float, expected: int | None = None) -> list[str]:
    """Payloads received (and acknowledged) within ``seconds``, or until ``expected`` came."""
    got: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and (expected is None or len(got) < expected):
        try:
            message = consumer.receive(timeout_millis=100)
        except sluice.Timeout:
            continue
        got.append(message.data().decode())
        consumer.acknowledge(message)
    return got


def backlog(http: httpx.Client, subscription: str = "audit", path: str = PATH) -> int | None:
    """msgBacklog in the stats document (None until the owner reports the subscription)."""
    sub = http.get(f"{path}/stats").json()["subscriptions"].get(subscription)
    return None if sub is None else sub["msgBacklog"]


def lag(http: httpx.Client, subscription: str = "audit", path: str = PATH) -> int:
    """What the subscription's consumer group has not read, from the internal stats."""
    return http.get(f"{path}/internalStats").json()["cursors"][subscription]["lag"]


def wait_backlog(http, expected: int, subscription: str = "audit", path: str = PATH) -> None:
    wait_until(lambda: backlog(http, subscription, path) == expected, timeout=5)


@pytest.fixture
def topic(http, namespace, worker):
    """Non-partitioned topic ``ops`` with subscription ``audit`` (no consumer yet)."""
    assert http.put(PATH).status_code == 204
    assert http.put(sub_path()).status_code == 204
    return TOPIC


def audit_rows(db, operation: str) -> list[dict]:
    with db.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT action, entity_type, entity, before, after FROM audit_log "
                "WHERE after->>'operation' = :op ORDER BY id"
            ),
            {"op": operation},
        ).all()
    return [dict(row._mapping) for row in rows]


# --- skip, clear-backlog, expire ------------------------------------------------------------


def test_skip_acknowledges_the_oldest_messages(http, topic, client, db):
    produce(client, 10)
    wait_backlog(http, 10)
    assert http.post(f"{sub_path()}/skip/3").status_code == 204
    wait_backlog(http, 7)
    consumer = client.subscribe(TOPIC, "audit")
    assert receive(consumer, 3, expected=8) == [f"m{i}" for i in range(3, 10)]
    rows = audit_rows(db, "skip")
    assert len(rows) == 1
    assert rows[0]["action"] == "update" and rows[0]["entity"] == f"{TOPIC}#audit"
    assert rows[0]["before"] == {"msgBacklog": 10}
    assert rows[0]["after"]["skippedEntries"] == 3 and rows[0]["after"]["msgBacklog"] == 7


def test_skip_takes_delivered_unacknowledged_messages_first(http, topic, client):
    produce(client, 6)
    consumer = client.subscribe(TOPIC, "audit", receiver_queue_size=2)
    held = [consumer.receive(timeout_millis=5000) for _ in range(2)]  # not acknowledged
    assert [m.data() for m in held] == [b"m0", b"m1"]
    assert http.get(f"{sub_path()}/position/1").content == b"m0"
    assert http.post(f"{sub_path()}/skip/3").status_code == 204  # m0, m1 (delivered), m2
    assert http.get(f"{sub_path()}/position/1").content == b"m3"
    wait_backlog(http, 3)
    # What the consumer held unacknowledged goes to the next consumer, but for the skipped.
    consumer.close()
    again = client.subscribe(TOPIC, "audit")
    assert sorted(receive(again, 3, expected=4)) == ["m3", "m4", "m5"]


def test_clear_backlog_drops_everything_published_so_far(http, topic, client, db):
    produce(client, 5, "old")
    wait_backlog(http, 5)
    assert http.post(f"{sub_path()}/skip_all").status_code == 204
    wait_backlog(http, 0)
    consumer = client.subscribe(TOPIC, "audit")
    assert receive(consumer, 1.5) == []
    produce(client, 2, "new")
    assert receive(consumer, 5, expected=2) == ["new0", "new1"]
    row = audit_rows(db, "clearBacklog")[0]
    assert row["before"] == {"msgBacklog": 5} and row["after"]["msgBacklog"] == 0


def test_expire_messages_by_age(http, topic, client, db):
    assert http.put(sub_path("other")).status_code == 204
    produce(client, 4, "old")
    time.sleep(2.5)
    produce(client, 3, "new")
    assert http.post(f"{sub_path()}/expireMessages/2").status_code == 204
    assert lag(http, "other") == 7  # another subscription keeps everything
    # On every subscription at once.
    assert http.post(f"{PATH}/all_subscription/expireMessages/2").status_code == 204
    assert lag(http, "other") == 3

    def expired():
        sub = http.get(f"{PATH}/stats").json()["subscriptions"].get("audit", {})
        return sub.get("msgBacklog") == 3 and sub.get("totalMsgExpired") == 4

    wait_until(expired, timeout=5)
    consumer = client.subscribe(TOPIC, "audit")
    assert receive(consumer, 3, expected=4) == ["new0", "new1", "new2"]
    rows = audit_rows(db, "expireMessages")
    assert [r["entity"] for r in rows] == [f"{TOPIC}#audit", TOPIC]
    assert rows[0]["after"]["expiredMessages"] == 4 and rows[1]["after"]["expiredMessages"] == 4


# --- reset-cursor ---------------------------------------------------------------------------


def test_reset_cursor_by_time_redelivers_what_was_published_after(http, topic, client, db):
    produce(client, 3, "a")
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce(client, 3, "b")
    consumer = client.subscribe(TOPIC, "audit", initial_position=sluice.InitialPosition.Earliest)
    assert receive(consumer, 5, expected=6) == ["a0", "a1", "a2", "b0", "b1", "b2"]
    wait_backlog(http, 0)
    assert http.post(f"{sub_path()}/resetcursor/{middle}").status_code == 204
    assert receive(consumer, 3, expected=4) == ["b0", "b1", "b2"]
    # Back to the beginning: a timestamp before every message.
    assert http.post(f"{sub_path()}/resetcursor/0").status_code == 204
    assert receive(consumer, 3, expected=7) == ["a0", "a1", "a2", "b0", "b1", "b2"]
    row = audit_rows(db, "resetCursor")[0]
    assert row["after"]["timestamp"] == middle and row["after"]["msgBacklog"] == 3


def test_reset_cursor_by_message_id(http, topic, client):
    ids = produce(client, 6)
    consumer = client.subscribe(TOPIC, "audit", initial_position=sluice.InitialPosition.Earliest)
    assert len(receive(consumer, 5, expected=6)) == 6
    # Pulsar's ResetCursorData: ledgerId and entryId are the parts of the stream id.
    target = {"ledgerId": ids[2].ledger_id(), "entryId": ids[2].entry_id()}
    assert http.post(f"{sub_path()}/resetcursor", json=target).status_code == 204
    assert receive(consumer, 3, expected=5) == ["m2", "m3", "m4", "m5"]
    excluded = {**target, "isExcluded": True}
    assert http.post(f"{sub_path()}/resetcursor", json=excluded).status_code == 204
    assert receive(consumer, 3, expected=4) == ["m3", "m4", "m5"]
    # What the Python client's MessageId serialises to.
    serialized = json.loads(ids[4].serialize())
    assert http.post(f"{sub_path()}/resetcursor", json=serialized).status_code == 204
    assert receive(consumer, 3, expected=3) == ["m4", "m5"]
    assert http.post(f"{sub_path()}/resetcursor", json="earliest").status_code == 204
    assert len(receive(consumer, 3, expected=7)) == 6
    assert http.post(f"{sub_path()}/resetcursor", json="latest").status_code == 204
    assert receive(consumer, 1) == []
    wait_backlog(http, 0)


def test_reset_cursor_forward_acknowledges_what_it_passes(http, topic, client):
    ids = produce(client, 5)
    target = {"ledgerId": ids[3].ledger_id(), "entryId": ids[3].entry_id()}
    assert http.post(f"{sub_path()}/resetcursor", json=target).status_code == 204
    wait_backlog(http, 2)
    consumer = client.subscribe(TOPIC, "audit")
    assert receive(consumer, 3, expected=3) == ["m3", "m4"]


def test_reset_cursor_takes_back_queued_messages_and_their_permits(http, topic, client, db):
    produce(client, 20)
    consumer = client.subscribe(TOPIC, "audit", receiver_queue_size=10)
    # Ten entries wait in the consumer's receiver queue; it fetches nothing until it receives.
    wait_until(lambda: lag(http) == 10, timeout=5)
    assert http.post(f"{sub_path()}/resetcursor/0").status_code == 204
    # Taken back with their permits: each message arrives once, in order, to the end.
    assert receive(consumer, 10, expected=21) == [f"m{i}" for i in range(20)]
    row = audit_rows(db, "resetCursor")[0]
    assert row["after"]["takenBackFromQueues"] == 10
    assert row["after"]["droppedPending"] == 10 and row["after"]["msgBacklog"] == 20


def test_reset_cursor_under_a_dispatch_rate_keeps_every_message_and_the_bound(http, topic, client):
    """A reset while the consumer receives at the limit: every message arrives, what was
    acknowledged after the target arrives again, and the strict bound holds throughout (by T
    seconds after the consumer subscribed, at most LIMIT x (floor(T) + 1) arrivals)."""
    limit = 30
    assert http.post(f"{PATH}/audit/dispatchRate", json=rate(limit)).status_code == 204
    produce(client, 60, "a")
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce(client, 60, "b")
    origin = time.monotonic()
    consumer = client.subscribe(TOPIC, "audit", consumer_type=sluice.ConsumerType.Shared)
    arrivals: list[tuple[float, str]] = []
    reset_at: list[float] = []
    answers: list[int] = []

    def reset() -> None:
        reset_at.append(time.monotonic() - origin)
        answers.append(http.post(f"{sub_path()}/resetcursor/{middle}").status_code)

    resetter = threading.Thread(target=reset)
    b_after_reset: set[str] = set()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (len(b_after_reset) < 60 or not answers):
        try:
            message = consumer.receive(timeout_millis=100)
        except sluice.Timeout:
            continue
        at, payload = time.monotonic() - origin, message.data().decode()
        arrivals.append((at, payload))
        consumer.acknowledge(message)
        if reset_at and payload.startswith("b"):
            b_after_reset.add(payload)
        if len(arrivals) == 80:  # all of a and 20 of b received: reset while receiving
            resetter.start()
    resetter.join()
    assert answers == [204]
    received = [p for _, p in arrivals]
    a = [f"a{i}" for i in range(60)]
    b = [f"b{i}" for i in range(60)]
    # Every message at least once; none of a again (acknowledged by the reset's target);
    # every one of b after the reset began, at most twice in all.
    assert [received.count(p) for p in a] == [1] * 60
    assert b_after_reset == set(b)
    assert max(received.count(p) for p in b) <= 2
    times = [at for at, _ in arrivals]
    worst = max(count - limit * (math.floor(at) + 1) for count, at in enumerate(times, 1))
    assert worst <= 0, times[::limit]
    wait_backlog(http, 0)


# --- peek, examine --------------------------------------------------------------------------


def test_peek_returns_unacknowledged_messages_with_pulsar_headers(http, topic, client):
    ids = produce(
        client,
        3,
        properties={"k1": "v1", "sp ace": "x"},
        partition_key="key-1",
        event_timestamp=1_700_000_000_123,
    )
    answer = http.get(f"{sub_path()}/position/1")
    assert answer.status_code == 200, answer.text
    assert answer.content == b"m0"
    assert answer.headers["content-type"] == "application/octet-stream"
    headers = answer.headers
    assert headers["X-Pulsar-Message-ID"] == f"{ids[0].ledger_id()}:{ids[0].entry_id()}"
    assert headers["X-Pulsar-PROPERTY-k1"] == "v1"
    assert json.loads(headers["X-Sluice-Properties"]) == {"k1": "v1", "sp ace": "x"}
    assert headers["X-Pulsar-partition-key"] == "key-1"
    assert headers["X-Pulsar-event-time"] == "2023-11-14T22:13:20.123Z"
    assert headers["X-Pulsar-publish-time"].endswith("Z")
    assert headers["X-Pulsar-Is-Encrypted"] == "false"
    assert http.get(f"{sub_path()}/position/3").content == b"m2"
    missing = http.get(f"{sub_path()}/position/4")
    assert missing.status_code == 404 and missing.json() == {"reason": "Message not found"}
    # A message delivered and not acknowledged is still the oldest unacknowledged one.
    consumer = client.subscribe(TOPIC, "audit", receiver_queue_size=1)
    held = consumer.receive(timeout_millis=5000)
    assert held.data() == b"m0"
    assert http.get(f"{sub_path()}/position/1").content == b"m0"
    consumer.acknowledge(held)
    wait_until(lambda: http.get(f"{sub_path()}/position/1").content == b"m1", timeout=5)


def test_peek_a_batch_entry(http, topic, client):
    producer = client.create_producer(TOPIC, batching_enabled=True, batching_max_messages=3)
    for i in range(3):
        producer.send_async(f"x{i}".encode(), None)
    producer.flush()
    producer.close()
    answer = http.get(f"{sub_path()}/position/1")
    assert answer.headers["X-Pulsar-num-batch-message"] == "3"
    assert [m[0] for m in unpack_batch(answer.content)] == [b"x0", b"x1", b"x2"]


def test_examine_message(http, topic, client):
    produce(client, 4)
    examine = f"{PATH}/examinemessage"
    assert http.get(examine).content == b"m3"  # latest, position 1
    assert (
        http.get(examine, params={"initialPosition": "latest", "messagePosition": 2}).content
        == b"m2"
    )
    assert (
        http.get(examine, params={"initialPosition": "earliest", "messagePosition": 1}).content
        == b"m0"
    )
    assert (
        http.get(examine, params={"initialPosition": "earliest", "messagePosition": 0}).content
        == b"m0"
    )
    assert (
        http.get(examine, params={"initialPosition": "earliest", "messagePosition": 5}).status_code
        == 404
    )
    bad = http.get(examine, params={"initialPosition": "middle"})
    assert bad.status_code == 412 and "initialPosition" in bad.json()["reason"]


# --- internal stats, unload, lookup ---------------------------------------------------------


def test_internal_stats(http, topic, client):
    ids = produce(client, 5)
    # Two entries go to the consumer's queue; it fetches nothing until it receives.
    client.subscribe(TOPIC, "audit", receiver_queue_size=2)

    def stats():
        doc = http.get(f"{PATH}/internalStats").json()
        return doc if doc["cursors"]["audit"]["pendingCount"] == 2 else None

    doc = wait_until(stats, timeout=5)
    assert doc["numberOfEntries"] == 5 and doc["entriesAddedCounter"] == 5
    assert doc["firstEntryId"] == ids[0].stream_id and doc["lastEntryId"] == ids[4].stream_id
    assert doc["lastConfirmedEntry"] == f"{ids[4].ledger_id()}:{ids[4].entry_id()}"
    assert doc["owner"] == "test-worker" and doc["leaseToken"].startswith("test-worker:")
    cursor = doc["cursors"]["audit"]
    assert cursor["lastDeliveredId"] == ids[1].stream_id
    assert cursor["lag"] == 3 and cursor["messagesConsumedCounter"] == 2
    assert cursor["firstPendingId"] == ids[0].stream_id
    assert cursor["lastPendingId"] == ids[1].stream_id
    assert [c["pendingCount"] for c in cursor["consumers"]] == [2]
    assert http.get(f"{PATH}/partitioned-internalStats").status_code == 404


def test_unload_lets_go_and_a_worker_takes_the_topic_again(http, topic, client, redis_server, db):
    consumer = client.subscribe(TOPIC, "audit")
    produce(client, 2, "before")
    assert receive(consumer, 5, expected=2) == ["before0", "before1"]
    plain = redis.Redis.from_url(redis_server.url)
    lease = keys.lease(TopicName.from_full(TOPIC))
    try:
        token = plain.get(lease).decode()
        assert http.put(f"{PATH}/unload").status_code == 204
        # The answer waits for the worker, which takes the lease again with a new token.
        again = plain.get(lease)
        assert again is not None and again.decode() != token
        owner, _, epoch = again.decode().rpartition(":")
        assert owner == "test-worker" and int(epoch) > int(token.rpartition(":")[2])
    finally:
        plain.close()
    produce(client, 3, "after")
    assert receive(consumer, 5, expected=3) == ["after0", "after1", "after2"]
    row = audit_rows(db, "unload")[0]
    assert row["entity"] == TOPIC and row["before"] == {"owners": ["test-worker"]}
    assert row["after"]["unloadedPartitions"] == 1


def test_lookup_v2(http, topic):
    lookup = "/lookup/v2/topic/persistent/acme/orders"
    answer = wait_until(lambda: (a := http.get(f"{lookup}/ops")).status_code == 200 and a)
    assert set(answer.json()) == {"brokerUrl", "httpUrl"}
    assert answer.json()["brokerUrl"] == "sluice://test-worker"
    assert isinstance(answer.json()["httpUrl"], str)  # "" here: the worker serves no HTTP
    missing = http.get(f"{lookup}/nope")
    assert missing.status_code == 404
    assert missing.json() == {"reason": "Topic persistent://acme/orders/nope not found"}
    assert http.put(f"{ADMIN}/persistent/acme/orders/wide/partitions", json=2).status_code == 204
    assert http.get(f"{lookup}/wide").status_code == 412
    wait_until(lambda: http.get(f"{lookup}/wide-partition-1").status_code == 200)


# --- partitioned topics ---------------------------------------------------------------------


def test_partitioned_topic_operations_apply_to_every_partition(http, namespace, worker, client):
    path = f"{ADMIN}/persistent/acme/orders/wide"
    name = "persistent://acme/orders/wide"
    assert http.put(f"{path}/partitions", json=3).status_code == 204
    assert http.put(sub_path(topic_path=path)).status_code == 204

    def total() -> int:
        doc = http.get(f"{path}/partitioned-stats").json()
        return doc["subscriptions"]["audit"]["msgBacklog"]

    produce(client, 9, topic=name)
    wait_until(lambda: total() == 9, timeout=5)
    assert http.post(f"{sub_path(topic_path=path)}/skip_all").status_code == 204
    wait_until(lambda: total() == 0, timeout=5)
    assert http.post(f"{sub_path(topic_path=path)}/resetcursor/0").status_code == 204
    wait_until(lambda: total() == 9, timeout=5)
    internals = http.get(f"{path}/partitioned-internalStats").json()
    assert internals["metadata"] == {"partitions": 3}
    assert [d["cursors"]["audit"]["lag"] for d in internals["partitions"].values()] == [3, 3, 3]
    # One partition alone.
    assert http.post(f"{sub_path(topic_path=path + '-partition-1')}/skip/2").status_code == 204
    wait_until(lambda: total() == 7, timeout=5)
    assert http.post(f"{path}/all_subscription/expireMessages/0").status_code == 204
    wait_until(lambda: total() == 0, timeout=5)
    consumer = client.subscribe(name, "audit")
    assert receive(consumer, 1.5) == []
    assert http.put(f"{path}/unload").status_code == 204
    produce(client, 3, topic=name)
    assert sorted(receive(consumer, 5, expected=3)) == ["m0", "m1", "m2"]
    # What names one position is refused on the partitioned topic, as in Pulsar.
    sub = sub_path(topic_path=path)
    for method, url, body in (
        ("POST", f"{sub}/skip/1", None),
        ("POST", f"{sub}/resetcursor", {"ledgerId": 1, "entryId": 0}),
        ("GET", f"{sub}/position/1", None),
        ("GET", f"{path}/examinemessage", None),
    ):
        answer = http.request(method, url, json=body)
        assert answer.status_code == 405, (url, answer.text)
        assert "partitioned" in answer.json()["reason"]
    assert http.get(f"{path}/internalStats").status_code == 404


# --- errors ---------------------------------------------------------------------------------


def test_errors_carry_pulsar_status_codes_and_a_reason(http, topic, client):
    ids = produce(client, 2)
    unknown_topic = f"{ADMIN}/persistent/acme/orders/nope/subscription/audit"
    unknown_sub = sub_path("nobody")
    NO_SUB = f"Subscription nobody not found for topic {TOPIC}"  # named, as Pulsar does
    cases = [
        ("POST", f"{unknown_topic}/skip_all", None, 404, "Topic persistent://acme/orders/nope not"),
        ("POST", f"{unknown_sub}/skip_all", None, 404, NO_SUB),
        ("POST", f"{unknown_sub}/skip/1", None, 404, NO_SUB),
        ("POST", f"{unknown_sub}/expireMessages/1", None, 404, NO_SUB),
        ("POST", f"{unknown_sub}/resetcursor/0", None, 404, NO_SUB),
        ("POST", f"{unknown_sub}/resetcursor", "earliest", 404, NO_SUB),
        ("GET", f"{unknown_sub}/position/1", None, 404, NO_SUB),
        ("GET", f"{ADMIN}/persistent/acme/nons/ops/internalStats", None, 404, "Namespace"),
        ("PUT", f"{ADMIN}/persistent/acme/orders/nope/unload", None, 404, "Topic persistent:"),
        ("POST", f"{sub_path()}/skip/-1", None, 400, "numMessages"),
        ("POST", f"{sub_path()}/skip/many", None, 400, "numMessages"),
        ("POST", f"{sub_path()}/expireMessages/-5", None, 400, "expireTimeInSeconds"),
        ("POST", f"{sub_path()}/resetcursor/-1", None, 400, "timestamp"),
        ("GET", f"{sub_path()}/position/0", None, 400, "messagePosition"),
        ("POST", f"{sub_path()}/resetcursor", {"ledgerId": "x", "entryId": 0}, 400, "Invalid"),
        ("POST", f"{sub_path()}/resetcursor", "middle", 400, "Invalid"),
        ("POST", f"{sub_path()}/resetcursor", {"ledgerId": 1, "entryId": -1}, 412, "entryId"),
        (
            "POST",
            f"{sub_path()}/resetcursor",
            {"ledgerId": ids[1].ledger_id() + 10_000, "entryId": 0},
            412,
            "Unable to find position",
        ),
        (
            "POST",
            f"{sub_path()}/resetcursor",
            [ids[0].stream_id, 1, -1, "persistent://acme/orders/other-partition-1"],
            412,
            "another partition",
        ),
        ("POST", f"{sub_path()}/resetcursor", ["1-x", -1, -1, ""], 412, "stream id"),
        ("POST", f"{sub_path('bad%01name')}/skip_all", None, 412, "control characters"),
    ]
    for method, url, body, status, reason in cases:
        answer = http.request(method, url, json=body)
        assert answer.status_code == status, (method, url, answer.text)
        assert reason in answer.json()["reason"], (url, answer.json())
    missing_body = http.post(f"{sub_path()}/resetcursor")
    assert missing_body.status_code == 400 and missing_body.json()["reason"]
    assert lag(http) == 2  # nothing above changed the subscription


def test_a_dry_run_changes_nothing(http, topic, client, db):
    produce(client, 3)
    assert lag(http) == 3
    assert http.post(f"{sub_path()}/skip_all", params={"dryRun": "true"}).status_code == 204
    assert http.post(f"{sub_path()}/skip_all", params={"dryRun": "true"}).status_code == 204
    assert http.post(f"{sub_path('nobody')}/skip_all", params={"dryRun": "true"}).status_code == 404
    assert lag(http) == 3
    assert audit_rows(db, "clearBacklog") == []
