"""Stats over REST, Prometheus metrics, reporting snapshots, policy propagation and resync."""

from __future__ import annotations

import time

import httpx
import orjson
import pytest
import redis
from sqlalchemy import text

import sluice
from models.stats import SNAPSHOT_STREAM, StatsSnapshot
from sluice.protocol.names import TopicName
from tests.workers.conftest import ADMIN, drain, rate, wait_until
from workers.http import create_http_app

TOPIC = "persistent://acme/orders/created"
PATH = f"{ADMIN}/persistent/acme/orders/created"


def topic_permits(worker) -> int | None:
    """The TOPIC limiter's message permits (of a partition asleep, those it wakes with), or
    None until the worker owns the topic (its partition lease may be a moment away)."""
    runner = worker.runners.get(TOPIC)
    if runner is None and TOPIC in worker.dormancy:
        rate = worker.policy.for_partition(TopicName.from_full(TOPIC)).resolve(None, None).topic
    else:
        rate = None if runner is None else runner.topic_rate
    return None if rate is None else rate.permits_msg


def test_topic_stats_counters_backlog_and_throttling(http, namespace, worker, client):
    assert http.put(PATH).status_code == 204
    consumer = client.subscribe(
        TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared, receiver_queue_size=100
    )
    assert (
        http.post(f"{ADMIN}/namespaces/acme/orders/dispatchRate", json=rate(10)).status_code == 204
    )
    wait_until(lambda: worker.call(lambda w: topic_permits(w)) == 10)
    producer = client.create_producer(TOPIC)
    for _ in range(25):
        producer.send(b"s" * 50)
    assert len(drain(consumer, 10, timeout=3)) == 10

    def stats():
        doc = http.get(f"{PATH}/stats").json()
        sub = doc["subscriptions"]["sub"]
        published = doc["owner"] is not None
        # Counters are read live; the throttling events come from the running partition's
        # document (the partition slept until the first message: a second at most after).
        throttled = sub["dispatchThrottledMsgEventsByTopicLimit"] >= 1
        if published and doc["msgInCounter"] == 25 and sub["msgOutCounter"] >= 10 and throttled:
            return doc
        return None

    doc = wait_until(stats, timeout=5)
    assert doc["bytesInCounter"] == 25 * 50
    sub = doc["subscriptions"]["sub"]
    assert sub["type"] == "Shared"
    assert sub["msgBacklog"] >= 5
    assert sub["dispatchThrottledMsgEventsBySubscriptionLimit"] == 0
    assert len(sub["consumers"]) == 1
    assert sub["consumers"][0]["availablePermits"] >= 0
    assert doc["owner"] == "test-worker"
    assert http.get(f"{PATH}/partitioned-stats").status_code == 404


def test_partitioned_stats_aggregate(http, namespace, worker, client):
    assert http.put(f"{PATH}/partitions", json=3).status_code == 204
    consumer = client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(TOPIC)
    for _ in range(9):
        producer.send(b"p")
    assert len(drain(consumer, 9, timeout=5)) == 9

    def totals():
        doc = http.get(f"{PATH}/partitioned-stats").json()
        return doc if doc["msgInCounter"] == 9 and doc["msgOutCounter"] == 9 else None

    doc = wait_until(totals, timeout=5)
    assert doc["metadata"] == {"partitions": 3}
    assert set(doc["partitions"]) == {f"{TOPIC}-partition-{i}" for i in range(3)}
    assert doc["subscriptions"]["sub"]["msgOutCounter"] == 9
    without = http.get(f"{PATH}/partitioned-stats", params={"perPartition": "false"}).json()
    assert without["partitions"] == {}
    assert http.get(f"{PATH}-partition-1/stats").json()["msgInCounter"] == 3
    # ``stats`` on the partitioned topic itself answers the totals, as Pulsar does.
    totals = http.get(f"{PATH}/stats").json()
    assert (totals["msgInCounter"], totals["metadata"]) == (9, {"partitions": 3})


def test_metrics_endpoint(http, namespace, worker, client):
    assert http.put(PATH).status_code == 204
    consumer = client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
    client.create_producer(TOPIC).send(b"m")
    drain(consumer, 1, timeout=5)
    wait_until(lambda: worker.call(lambda w: TOPIC in w.stats.docs), timeout=5)
    app = create_http_app(worker.worker)
    transport = httpx.ASGITransport(app=app)

    async def scrape():
        async with httpx.AsyncClient(transport=transport, base_url="http://worker") as c:
            return [await c.get(p) for p in ("/metrics", "/healthz", "/readyz", "/limits")]

    metrics, health, ready, limits = worker.call(lambda _w: scrape())
    limits = limits.json()
    assert limits["worker"] == "test-worker"
    assert limits["partitions"][TOPIC]["subscriptions"]["sub"]["permitsPerPeriodInMsg"] == -1
    assert health.status_code == ready.status_code == 200
    body = metrics.text
    assert f'sluice_topic_msg_in_total{{topic="{TOPIC}"}} 1.0' in body
    assert "sluice_subscription_dispatch_throttled_msg_events_total{" in body
    assert 'reason="broker"' in body
    assert "sluice_worker_owned_partitions 1.0" in body


def published_snapshots(redis_url: str) -> list[StatsSnapshot]:
    """Every snapshot row published so far, oldest first."""
    with redis.Redis.from_url(redis_url) as plain:
        return [
            StatsSnapshot.from_json(fields[b"json"])
            for _id, fields in plain.xrange(SNAPSHOT_STREAM)
        ]


def snapshots_counting(redis_url: str, subscription: str, messages: int) -> list[StatsSnapshot]:
    """Every snapshot row published, once the rows of ``subscription`` count ``messages`` out."""

    def rows():
        found = published_snapshots(redis_url)
        out = sum(r.msg_out for r in found if r.subscription == subscription)
        return found if out >= messages else None

    return wait_until(rows, timeout=15)


def test_snapshots_for_reporting(http, namespace, worker, client, redis_server):
    assert http.put(PATH).status_code == 204
    consumer = client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
    assert (
        http.post(
            f"{ADMIN}/namespaces/acme/orders/subscriptionDispatchRate", json=rate(50)
        ).status_code
        == 204
    )
    producer = client.create_producer(TOPIC)
    for _ in range(5):
        producer.send(b"x" * 10)
    drain(consumer, 5, timeout=5)
    found = [r for r in snapshots_counting(redis_server.url, "sub", 5) if r.subscription == "sub"]
    assert sum(r.msg_in for r in found) >= 5
    latest = found[-1]
    assert latest.topic == TOPIC and latest.partition == -1
    assert latest.limit_msg_per_s == 50.0
    assert latest.limit_msg_limiter == "subscription"
    assert latest.limit_msg_source == "namespace"
    assert latest.interval_ms >= 900
    # What the limit allowed over each interval: at most 50 msg/s over its length (less in
    # the interval in which the policy arrived), and exactly that in an interval that began
    # after it.
    assert latest.allowed_msgs <= 50.0 * latest.interval_ms / 1000 + 1e-6
    assert latest.allowed_bytes is None

    def later():
        found = published_snapshots(redis_server.url)
        found = [r for r in found if r.subscription == "sub" and r.ts > latest.ts]
        return found[1] if len(found) > 1 else None

    steady = wait_until(later, timeout=6)
    assert steady.allowed_msgs == pytest.approx(50.0 * steady.interval_ms / 1000, rel=1e-6)


def test_snapshots_carry_messages_out_and_waiting_per_priority(
    http, namespace, worker, client, redis_server
):
    """A subscription that saw priorities reports, per priority, what went out in each
    interval (every message once over the rows) and what waits; one that read none has no
    message out at any level, its backlog per level being known (level streams:
    docs/priority.md)."""
    assert http.put(PATH).status_code == 204
    consumer = client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
    plain_consumer = client.subscribe(TOPIC, "plain", consumer_type=sluice.ConsumerType.Shared)
    plain_consumer.close()
    producer = client.create_producer(TOPIC)
    for priority in (9, 9, 4, 1):
        producer.send(b"x", priority=priority)
    drain(consumer, 4, timeout=5)
    found = snapshots_counting(redis_server.url, "sub", 4)
    sent: dict[str, int] = {}
    for row in found:
        if row.subscription == "sub" and row.priority_levels:
            for level, (out, _waiting) in orjson.loads(row.priority_levels).items():
                sent[level] = sent.get(level, 0) + out
    assert sent == {"9": 2, "4": 1, "1": 1}
    plain = [orjson.loads(r.priority_levels) for r in found if r.subscription == "plain"]
    assert plain and all(out == 0 for row in plain for out, _waiting in row.values())
    assert plain[-1] == {"9": [0, 2], "4": [0, 1], "1": [0, 1]}


def test_policy_change_reaches_the_worker_quickly(http, namespace, worker, client):
    assert http.put(PATH).status_code == 204
    consumer = client.subscribe(TOPIC, "sub")
    # A message has the partition run (a consumer alone on an empty log does not wake it),
    # and run on for a while after: what is measured is a running limiter's update.
    client.create_producer(TOPIC).send(b"wake")
    assert consumer.receive(timeout_millis=5_000).data() == b"wake"
    wait_until(
        lambda: worker.call(lambda w: TOPIC in w.runners and "sub" in w.runners[TOPIC].dispatchers)
    )
    delays = []
    for value in (100, 200, 300, 400, 500):
        sent = time.monotonic()
        assert http.post(f"{PATH}/dispatchRate", json=rate(value)).status_code == 204
        wait_until(
            lambda v=value: worker.call(lambda w: w.runners[TOPIC].topic_rate.permits_msg) == v,
            timeout=2,
            every=0.002,
        )
        delays.append(time.monotonic() - sent)
    # Generous bound for a shared machine; bench/propagation.py measures p50/p99.
    assert max(delays) < 1.0


def test_resync_heals_a_missed_event(http, namespace, worker_settings, db, client):
    from tests.workers.conftest import WorkerThread

    assert http.put(PATH).status_code == 204
    # A second worker beside the fixture's: it owns every partition without a lease, and runs
    # them all (none sleeps: the test reads the running partition's limiter).
    quick = WorkerThread(
        worker_settings.model_copy(
            update={
                "worker_resync_seconds": 0.5,
                "worker_ownership": "local",
                "worker_dormant_after_seconds": 0,
            }
        )
    )
    quick.start()
    try:
        wait_until(lambda: quick.call(lambda w: TOPIC in w.runners))
        # A policy written behind the admin service's back: no change event at all.
        with db.begin() as connection:
            ns_id = connection.execute(text("SELECT id FROM namespaces")).scalar()
            connection.execute(
                text(
                    "INSERT INTO dispatch_rate_policies (scope_key, namespace_id, kind, msg, byte,"
                    " relative, period, updated_at) VALUES (:k, :n, 'dispatchRate', 77, -1,"
                    " false, 1, now())"
                ),
                {"k": f"{ns_id}//dispatchRate/", "n": ns_id},
            )
        wait_until(
            lambda: quick.call(lambda w: w.runners[TOPIC].topic_rate.permits_msg) == 77,
            timeout=5,
        )
    finally:
        quick.stop()


def test_catalog_records_client_created_subscriptions(http, namespace, worker, client):
    assert http.put(PATH).status_code == 204
    client.subscribe(TOPIC, "from-client")
    assert "from-client" in http.get(f"{PATH}/subscriptions").json()
    worker.call(lambda w: w.catalog.sync())

    def recorded() -> bool:
        # The worker records client-created subscriptions in batches, soon after it sees them.
        audit = http.get(f"{ADMIN}/audit", params={"entityType": "subscription"}).json()
        return any(
            e["entity"] == f"{TOPIC}#from-client" and e["role"] == "sluice-worker" for e in audit
        )

    wait_until(recorded, timeout=10, every=0.1)
    body = orjson.loads(http.get(f"{PATH}/effectiveDispatchRates").content)
    assert "from-client" in body["subscriptions"]


def test_a_subscription_created_over_rest_is_in_stats_before_any_consumer(
    http, namespace, worker, client
):
    assert http.put(PATH).status_code == 204
    assert http.put(f"{PATH}/subscription/rt").status_code == 204
    producer = client.create_producer(TOPIC)
    for i in range(50):
        producer.send(str(i).encode())
    # The worker's published document names the subscription and its backlog, well before
    # the worker's periodic full pass (30 s here).
    wait_until(
        lambda: (
            http.get(f"{PATH}/stats").json()["subscriptions"].get("rt", {}).get("msgBacklog") == 50
        ),
        timeout=5,
    )


def test_metrics_text_is_prometheus_exposition_with_escaped_labels():
    """The hand-written exposition parses as Prometheus text, with every sample and label
    (quotes and backslashes in names escaped) and counters named ``_total``."""
    from prometheus_client.parser import text_string_to_metric_families

    from workers.metrics import render
    from workers.stats import _throttled

    sub = {
        "msgRateOut": 0.5,
        "msgOutCounter": 12,
        "bytesOutCounter": 340,
        "msgBacklog": 7,
        "unackedMessages": 2,
        "consumers": [{}, {}],
        **_throttled(None),
    }
    topic = 'persistent://a/b/odd"name\\x'
    docs = {
        topic: {
            "msgRateIn": 1.5,
            "msgInCounter": 19,
            "bytesInCounter": 550,
            "subscriptions": {'s"1': sub, "s2": sub},
        }
    }
    text = render(docs, owned=3, dormant=2, woken=3).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in families.values()
        for s in f.samples
    }
    assert samples[("sluice_topic_msg_in_total", (("topic", topic),))] == 19
    key = (("subscription", 's"1'), ("topic", topic))
    assert samples[("sluice_subscription_msg_out_total", key)] == 12
    assert samples[("sluice_subscription_consumers_count", key)] == 2
    assert samples[("sluice_subscription_back_log", key)] == 7
    throttled = [k for k in samples if k[0].startswith("sluice_subscription_dispatch_throttled")]
    assert len(throttled) == 2 * 2 * 4  # msg and bytes, two subscriptions, four reasons
    assert samples[("sluice_worker_owned_partitions", ())] == 3
    assert samples[("sluice_worker_dormant_partitions", ())] == 2
    assert samples[("sluice_worker_partition_wakeups_total", ())] == 3
    assert families["sluice_topic_msg_in"].type == "counter"
