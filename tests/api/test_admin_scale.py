"""The batched and incremental paths of the admin service answer as the plain ones did.

Topic lists built as strings and merged with the registry, subscriptions created by an
insert that reports the conflict itself, audit entries and change events written by one
statement, the policy cache re-reading only the topics a write names, and subscription
scripts queued as plain EVALSHA (loaded again when Redis lost them), and pooled database
connections checked only after idling.
"""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
import redis
from sqlalchemy import text

from api.dataplane import SUMMED_SUBSCRIPTION, aggregate
from dataplane.catalog import topic_record
from models.db import make_async_engine
from sluice.protocol import keys
from sluice.protocol.names import TopicName

NS = "/admin/v2/namespaces/acme/orders"
BASE = "/admin/v2/persistent/acme/orders"
PREFIX = "persistent://acme/orders/"


@pytest.fixture
def ns(http):
    tenant = http.put("/admin/v2/tenants/acme", json={"allowedClusters": ["standalone"]})
    assert tenant.status_code == 204
    assert http.put(NS).status_code == 204
    return http


@pytest.fixture
def redis_client(redis_server):
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


def fresh_cache(admin_server):
    cache = admin_server.app.state.sluice.cache
    deadline = time.monotonic() + 10
    while not cache.fresh:
        assert time.monotonic() < deadline, "cache never became fresh"
        time.sleep(0.02)
    return cache


def test_lists_merge_the_registry_in_name_order(ns, redis_client):
    http = ns
    assert http.put(f"{BASE}/b/partitions", json=3).status_code == 204
    assert http.put(f"{BASE}/a").status_code == 204
    assert http.put(f"{BASE}/c/partitions", json=11).status_code == 204
    # As clients auto-create them: in the registry only, not yet in the database.  A stale
    # registry count of a topic the database knows does not count.
    redis_client.hset(keys.TOPICS, f"{PREFIX}auto", topic_record(0))
    redis_client.hset(keys.TOPICS, f"{PREFIX}bb", topic_record(2))
    redis_client.hset(keys.TOPICS, f"{PREFIX}b", topic_record(7))
    redis_client.hset(keys.TOPICS, "persistent://acme/other/x", topic_record(0))
    expected = (
        [f"{PREFIX}a", f"{PREFIX}auto"]
        + [f"{PREFIX}b-partition-{i}" for i in range(3)]
        + [f"{PREFIX}bb-partition-{i}" for i in range(2)]
        + [f"{PREFIX}c-partition-{i}" for i in range(11)]
    )
    assert http.get(BASE).json() == expected
    assert http.get(f"{NS}/topics").json() == expected
    assert http.get(f"{BASE}/partitioned").json() == [f"{PREFIX}b", f"{PREFIX}bb", f"{PREFIX}c"]
    assert http.get("/admin/v2/persistent/acme/nope").status_code == 404


def test_a_registry_larger_than_one_scan_is_listed_whole(ns, redis_client):
    http = ns
    names = {f"{PREFIX}t{i:05d}": topic_record(0) for i in range(12_000)}
    redis_client.hset(keys.TOPICS, mapping=names)
    redis_client.hset(
        keys.TOPICS, mapping={f"persistent://acme/else/t{i}": topic_record(0) for i in range(3000)}
    )
    assert http.get(BASE).json() == sorted(names)


def test_an_existing_subscription_is_a_conflict_before_the_limit(ns):
    http = ns
    assert http.put(f"{BASE}/t/partitions", json=2).status_code == 204
    assert http.put(f"{BASE}/t/subscription/first").status_code == 204
    assert http.post(f"{NS}/maxSubscriptionsPerTopic", json=1).status_code == 204
    assert http.put(f"{BASE}/t/subscription/first").status_code == 409
    refused = http.put(f"{BASE}/t/subscription/second")
    assert refused.status_code == 412
    assert "maximum number of subscriptions" in refused.json()["reason"]
    assert http.delete(f"{NS}/maxSubscriptionsPerTopic").status_code == 204
    assert http.put(f"{BASE}/t/subscription/second").status_code == 204
    assert http.put(f"{BASE}/t/subscription/second").status_code == 409
    assert http.get(f"{BASE}/t/subscriptions").json() == ["first", "second"]


def test_one_write_audits_and_emits_once(ns, db, redis_server, settings):
    http = ns
    with db.connect() as connection:
        before = connection.execute(text("SELECT max(id) FROM outbox_events")).scalar() or 0
    assert http.put(f"{BASE}/t/partitions", json=2).status_code == 204
    with db.connect() as connection:
        audit = connection.execute(
            text("SELECT action, entity_type, entity, before, after FROM audit_log")
        ).all()
        events = connection.execute(
            text("SELECT id, kind, entity, payload FROM outbox_events WHERE id > :id"),
            {"id": before},
        ).all()
    topic = f"{PREFIX}t"
    assert ("create", "topic", topic, None, {"partitions": 2, "properties": {}}) in audit
    assert [(kind, entity) for _id, kind, entity, _p in events] == [("topic", topic)]
    assert events[0][3] == {"action": "create", "partitions": 2}
    # The stream entry the request published names the outbox row.
    client = redis.Redis.from_url(redis_server.url)
    try:
        published = [
            fields
            for _id, fields in client.xrange(settings.events_stream)
            if fields[b"entity"] == topic.encode()
        ]
    finally:
        client.close()
    assert published and published[-1][b"id"] == str(events[0][0]).encode()
    assert orjson.loads(published[-1][b"payload"]) == {"action": "create", "partitions": 2}


def test_the_cache_follows_topic_writes_without_reading_every_topic(ns, admin_server):
    http = ns
    cache = fresh_cache(admin_server)
    full = cache.full_reloads
    assert http.put(f"{BASE}/t/partitions", json=2).status_code == 204
    assert http.put(f"{BASE}/t/subscription/s").status_code == 204
    cache = fresh_cache(admin_server)
    assert cache.topics[f"{PREFIX}t"] == 2
    assert http.post(f"{BASE}/t/partitions", json=5).status_code == 204
    assert fresh_cache(admin_server).topics[f"{PREFIX}t"] == 5
    assert http.get(f"{BASE}/t-partition-4/dispatchRate").status_code == 200
    assert http.delete(f"{BASE}/t/partitions").status_code == 204
    assert f"{PREFIX}t" not in fresh_cache(admin_server).topics
    assert http.get(f"{BASE}/t/dispatchRate").status_code == 404
    assert cache.full_reloads == full
    # A namespace change still reads everything.
    assert http.put("/admin/v2/namespaces/acme/more").status_code == 204
    assert "acme/more" in fresh_cache(admin_server).namespaces
    assert cache.full_reloads > full


def test_subscriptions_are_created_after_redis_lost_its_scripts(ns, redis_client):
    http = ns
    assert http.put(f"{BASE}/t/partitions", json=300).status_code == 204
    redis_client.script_flush()
    assert http.put(f"{BASE}/t/subscription/s").status_code == 204
    for index in (0, 299):
        partition = TopicName.from_full(f"{PREFIX}t").partition(index)
        assert redis_client.sismember(keys.subs(partition), "s")


def test_pooled_connections_are_checked_only_after_idling(database_url, db):
    async def scenario() -> tuple[int, int]:
        engine = make_async_engine(database_url, pool_size=1, ping_after_idle=0.3)
        pings = []
        real_ping = engine.sync_engine.dialect.do_ping

        def counting_ping(dbapi_connection):
            pings.append(1)
            return real_ping(dbapi_connection)

        engine.sync_engine.dialect.do_ping = counting_ping  # type: ignore[method-assign]
        try:
            async with engine.connect() as connection:
                pid = await connection.scalar(text("SELECT pg_backend_pid()"))
            for _ in range(5):  # steady use: no check
                async with engine.connect() as connection:
                    assert await connection.scalar(text("SELECT 1")) == 1
            steady = len(pings)
            # The server drops the idle connection (as a restart would): checked, replaced.
            with db.connect() as other:
                other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            await asyncio.sleep(0.4)
            async with engine.connect() as connection:
                assert await connection.scalar(text("SELECT 1")) == 1
            return steady, len(pings)
        finally:
            await engine.dispose()

    steady, total = asyncio.run(scenario())
    assert steady == 0
    assert total >= 1


def test_a_policy_update_goes_out_with_its_audit_entry(ns, db):
    http = ns
    path = f"{NS}/dispatchRate"
    assert http.post(path, json={"dispatchThrottlingRateInMsg": 10}).status_code == 204
    query = text("SELECT msg, byte, updated_at FROM dispatch_rate_policies")
    with db.connect() as connection:
        [(msg, byte, first)] = connection.execute(query).all()
    assert (msg, byte) == (10, -1)
    body = {"dispatchThrottlingRateInMsg": 20, "dispatchThrottlingRateInByte": 300}
    assert http.post(path, json=body).status_code == 204
    assert http.post(path, json=body).status_code == 204  # the same value again
    with db.connect() as connection:
        [(msg, byte, second)] = connection.execute(query).all()
        audit = connection.execute(
            text(
                "SELECT action, before, after FROM audit_log"
                " WHERE entity = 'acme/orders' ORDER BY id"
            )
        ).all()
    assert (msg, byte) == (20, 300) and second > first
    assert [action for action, _b, _a in audit[-3:]] == ["create", "update", "update"]
    assert audit[-2][1]["dispatchThrottlingRateInMsg"] == 10
    assert audit[-2][2]["dispatchThrottlingRateInByte"] == 300
    assert audit[-1][1] == audit[-1][2]
    assert http.get(path).json() == audit[-1][2]


def test_partitioned_totals_sum_every_partition_and_subscription():
    docs = {
        f"{PREFIX}t-partition-{i}": {
            "msgInCounter": i,
            "bytesInCounter": 10 * i,
            "subscriptions": {
                "a": {"msgBacklog": i, "type": "Shared", "consumers": [{"c": i}]},
                **({"b": {"msgBacklog": 1, "type": "Failover"}} if i % 2 else {}),
            },
        }
        for i in range(5)
    }
    total = aggregate(docs, per_partition=False)
    assert total["msgInCounter"] == 10 and total["bytesInCounter"] == 100
    assert total["averageMsgSize"] == 10.0
    assert total["subscriptions"]["a"]["msgBacklog"] == 10
    assert total["subscriptions"]["a"]["type"] == "Shared"
    assert total["subscriptions"]["a"]["consumers"] == [{"c": i} for i in range(5)]
    assert total["subscriptions"]["b"] | {"consumers": None} == {
        **dict.fromkeys(SUMMED_SUBSCRIPTION, 0),
        "msgBacklog": 2,
        "type": "Failover",
        "consumers": None,
    }
    assert total["metadata"] == {"partitions": 5} and total["partitions"] == {}
    assert aggregate(docs, per_partition=True)["partitions"] is docs
