"""Priority level streams (``sl:{P}:log:<L>``, docs/priority.md) outside dispatch: what the
admin service, the workers and a reader read of a partition that has them.

A partition's backlog, its last entry and its entries up to a time are over every stream;
per-level stats give each level's stream's pending + lag; a reader knows when it has read
everything; a worker does not put to sleep a partition whose only entries are in level
streams; deleting the topic leaves no level key.  End to end (REST, the client, a real
worker) where a user sees it; on the Redis side, with the data-plane scripts, otherwise.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
import redis
from redis.asyncio import Redis

import sluice
from dataplane.backlog import Backlog, read_backlogs
from dataplane.catalog import CatalogProjection, Recorded
from dataplane.cursors import Cursors
from dataplane.scripts import register_scripts
from models.base import epoch_ms, utcnow
from sluice import MessageId
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import PRODUCE_SCRIPT, SUBSCRIBE
from tests.workers.conftest import ADMIN, WorkerThread, wait_until

TOPIC = "persistent://acme/orders/levels"
PATH = f"{ADMIN}/persistent/acme/orders/levels"
PARTITION = TopicName.from_full(TOPIC)
SHARED = sluice.ConsumerType.Shared


# --- on Redis, through the data-plane scripts ---------------------------------------------


class Levelled:
    """A partition that uses level streams, driven through the data-plane scripts."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.name = TopicName("acme", "orders", f"t-{uuid.uuid4().hex[:8]}")
        for spec in SUBSCRIBE, PRODUCE_SCRIPT:
            client.script_load(spec.source)

    def subscribe(self, subscription: str) -> None:
        call = SUBSCRIBE.call(
            self.name, subscription, "", "Shared", "earliest", int(time.time() * 1000), "{}", 1
        )
        self.client.evalsha(SUBSCRIBE.sha, len(call[0]), *call[0], *call[1])

    def produce(self, *levels: int) -> list[str]:
        """One entry per level given; their ids."""
        entries = [["d", f"p{level}", "u", str(level)] for level in levels]
        script_keys, args = PRODUCE_SCRIPT.call(self.name, entries)
        ids = self.client.evalsha(PRODUCE_SCRIPT.sha, len(script_keys), *script_keys, *args)
        return [entry.decode() for entry in ids] if isinstance(ids, list) else []


def _url(client: redis.Redis) -> str:
    kwargs = client.connection_pool.connection_kwargs
    return f"redis://{kwargs['host']}:{kwargs['port']}/0"


@pytest.fixture
def levelled(redis_server):
    client = redis.Redis.from_url(redis_server.url)
    yield Levelled(client)
    client.close()


def _run(levelled: Levelled, work):
    async def run():
        client = Redis.from_url(_url(levelled.client))
        try:
            return await work(client, register_scripts(client))
        finally:
            await client.aclose()

    return asyncio.run(run())


def test_a_backlog_is_summed_over_every_stream(levelled):
    levelled.subscribe("a")
    levelled.produce(7, 4, 2, 7, 9)
    assert sorted(levelled.client.hkeys(keys.levels(levelled.name))) == [b"2", b"7", b"9"]

    async def whole(client, scripts):
        return (await read_backlogs(client, scripts, [levelled.name]))[levelled.name.full]

    assert _run(levelled, whole) == {"a": Backlog(5, 0)}
    # A level stream's lag Redis cannot tell (an entry deleted ahead of the group, which is
    # moved to an id without its counter) is counted on that stream.
    seven = keys.level_log(levelled.name, 7)
    _first, second = (entry_id for entry_id, _ in levelled.client.xrange(seven))
    levelled.client.xdel(seven, second)
    levelled.client.execute_command("XGROUP", "SETID", seven, "a", "0-0")
    assert levelled.client.xinfo_groups(seven)[0]["lag"] is None
    assert _run(levelled, whole) == {"a": Backlog(4, 0)}


def test_the_last_entry_of_a_partition_is_over_every_stream(levelled):
    levelled.subscribe("a")
    ids = levelled.produce(4, 7, 2)

    async def last(client, scripts):
        return await Cursors(client, scripts).last_entries([levelled.name])

    assert _run(levelled, last) == {levelled.name.full: max(ids, key=_order)}
    assert keys.level_of(max(ids, key=_order)) in (2, 7)


def _order(entry_id: str) -> tuple[int, int]:
    ms, seq = entry_id.split("-")
    return int(ms), int(seq)


def test_a_recorded_subscription_made_again_gets_its_group_on_every_stream(levelled):
    """A worker makes again the groups of a subscription the database records (an empty
    consumer id through ``subscribe.lua``): on the level streams too.  (``subscribe.lua``
    does it; this guards it.)"""
    levelled.subscribe("a")
    levelled.produce(7, 4)

    async def ensure(client, scripts):
        plane = CatalogProjection(client, scripts, 60_000)
        made = epoch_ms(utcnow()) - 1
        await plane.ensure_recorded_subscriptions([Recorded(levelled.name, 0, "b", made)])

    _run(levelled, ensure)
    seven = keys.level_log(levelled.name, 7)
    assert sorted(g["name"] for g in levelled.client.xinfo_groups(seven)) == [b"a", b"b"]


def test_dropping_a_topic_deletes_its_level_streams_and_levels_hash(levelled):
    levelled.subscribe("a")
    levelled.produce(7, 4, 0)

    async def drop(client, scripts):
        await CatalogProjection(client, scripts, 60_000).drop_topic_data(levelled.name, 0)

    _run(levelled, drop)
    assert levelled.client.keys(keys.partition_prefix(levelled.name) + "*") == []


# --- end to end ----------------------------------------------------------------------------


def level_topic(http, client, redis_server) -> redis.Redis:
    """The topic (level streams are the default) and an idle Shared subscription ``s``; a
    plain Redis client."""
    assert http.put(PATH).status_code == 204
    client.subscribe(TOPIC, "s", consumer_type=SHARED).close()
    return redis.Redis.from_url(redis_server.url)


def backlog(http) -> int:
    return http.get(f"{PATH}/stats").json()["subscriptions"]["s"]["msgBacklog"]


def levels_of(http) -> dict:
    return http.get(f"{PATH}/stats").json()["subscriptions"]["s"].get("priorityLevels", {})


def test_stats_per_level_are_each_level_streams_backlog(http, namespace, client, redis_server):
    """``priorityLevels``: each level's msgBacklog is its stream's pending + lag, and they
    add up to the subscription's."""
    r = level_topic(http, client, redis_server)
    producer = client.create_producer(TOPIC)
    for priority in (9, 9, 7, 4, 4, 4, 1):
        producer.send(b"x", priority=priority)
    assert sorted(r.hkeys(keys.levels(PARTITION))) == [b"1", b"7", b"9"]
    backlogs = {"9": 2, "7": 1, "4": 3, "1": 1}
    wait_until(lambda: {k: v["msgBacklog"] for k, v in levels_of(http).items()} == backlogs)
    assert backlog(http) == 7
    # Handed out and not acknowledged: still the level's backlog (pending); acknowledged: not.
    consumer = client.subscribe(TOPIC, "s", consumer_type=SHARED, receiver_queue_size=1)
    first = consumer.receive(10_000)
    assert first.priority() == 9
    wait_until(lambda: levels_of(http)["9"]["msgOutCounter"] >= 1)
    assert levels_of(http)["9"]["msgBacklog"] == 2
    consumer.acknowledge(first)
    consumer.acknowledge(consumer.receive(10_000))
    wait_until(lambda: levels_of(http)["9"]["msgBacklog"] == 0)
    assert levels_of(http)["9"]["msgOutCounter"] == 2
    consumer.close()


def test_a_reader_knows_when_it_has_read_every_stream(http, namespace, client, redis_server):
    level_topic(http, client, redis_server)
    producer = client.create_producer(TOPIC)
    sent = {}
    for i, priority in enumerate((4, 7, 4, 1, 9, 4)):
        body = f"m{i}".encode()
        sent[body] = producer.send(body, priority=priority)
    with client.create_reader(TOPIC, MessageId.latest) as late:
        assert not late.has_message_available()
        producer.send(b"later", priority=7)  # into a level stream only
        assert late.has_message_available()
        assert late.read_next(5_000).data() == b"later"
        assert not late.has_message_available()
    with client.create_reader(TOPIC, MessageId.earliest) as reader:
        got = []
        while reader.has_message_available():
            got.append(reader.read_next(5_000).data())
        assert sorted(got) == sorted([*sent, b"later"])
        with pytest.raises(sluice.Timeout):
            reader.read_next(300)


def test_reset_cursor_by_time_is_over_every_stream(http, namespace, client, redis_server):
    """Reset to a time between two entries of different streams: the entries after it, and
    only those, are delivered again."""
    level_topic(http, client, redis_server)
    producer = client.create_producer(TOPIC)
    producer.send(b"a", priority=4)
    bound = producer.send(b"b", priority=7).ledger_id()
    while int(time.time() * 1000) <= bound + 5:
        time.sleep(0.005)
    for body, priority in ((b"c", 7), (b"d", 4), (b"e", 2), (b"f", 2)):
        producer.send(body, priority=priority)
    consumer = client.subscribe(TOPIC, "s", consumer_type=SHARED)
    for _ in range(6):
        consumer.acknowledge(consumer.receive(10_000))
    consumer.close()
    wait_until(lambda: backlog(http) == 0)
    assert http.post(f"{PATH}/subscription/s/resetcursor/{bound}").status_code == 204
    assert backlog(http) == 4
    consumer = client.subscribe(TOPIC, "s", consumer_type=SHARED)
    again = []
    while True:
        try:
            message = consumer.receive(1_500)
        except sluice.Timeout:
            break
        consumer.acknowledge(message)
        again.append(message.data())
    assert sorted(again) == [b"c", b"d", b"e", b"f"]
    consumer.close()


def test_deleting_a_level_topic_leaves_no_key(http, namespace, client, redis_server):
    r = level_topic(http, client, redis_server)
    producer = client.create_producer(TOPIC)
    for priority in (9, 4, 0):
        producer.send(b"x", priority=priority)
    producer.close()
    assert r.exists(keys.level_log(PARTITION, 9), keys.levels(PARTITION)) == 2
    assert http.delete(PATH, params={"force": "true"}).status_code == 204
    prefix = keys.partition_prefix(PARTITION)
    wait_until(lambda: not r.keys(prefix + "log*") and not r.exists(keys.levels(PARTITION)))


def test_a_message_age_quota_sees_entries_in_level_streams(http, namespace, client, redis_server):
    r = level_topic(http, client, redis_server)
    quota = {"limitTime": 1, "policy": "producer_exception"}
    answer = http.post(
        f"{PATH}/backlogQuota", params={"backlogQuotaType": "message_age"}, json=quota
    )
    assert answer.status_code == 204
    producer = client.create_producer(TOPIC, max_send_attempts=1)
    producer.send(b"old", priority=7)  # the only entry, in a level stream
    wait_until(lambda: r.get(keys.quota(PARTITION)), timeout=10)
    with pytest.raises(sluice.ProducerBlockedQuotaExceededException):
        producer.send(b"refused")


@pytest.fixture
def sleepy(http, worker_settings):
    """A worker whose partitions sleep after 1.5 quiet seconds (7 s by default)."""
    thread = WorkerThread(worker_settings.model_copy(update={"worker_dormant_after_seconds": 1.5}))
    yield thread.start()
    thread.stop()


def test_a_sleeping_partition_with_entries_only_in_level_streams_delivers(
    http, namespace, sleepy, redis_server
):
    """A partition whose entries are all in level streams is not taken for empty: a
    consumer that connects to it while it sleeps wakes it and receives them."""
    with sluice.Client(redis_server.url) as client:
        level_topic(http, client, redis_server)
        producer = client.create_producer(TOPIC)
        for priority in (7, 2):
            producer.send(b"x", priority=priority)
        wait_until(lambda: sleepy.call(lambda w: PARTITION.full in w.dormancy.partitions), 15)
        consumer = client.subscribe(TOPIC, "s", consumer_type=SHARED)
        assert [consumer.receive(5_000).priority() for _ in range(2)] == [7, 2]
        consumer.close()


def test_a_new_owner_runs_a_partition_with_entries_only_in_level_streams(
    http, namespace, worker_settings, redis_server
):
    first = WorkerThread(worker_settings).start()
    try:
        with sluice.Client(redis_server.url) as client:
            level_topic(http, client, redis_server)
            client.create_producer(TOPIC).send(b"x", priority=7)
    finally:
        first.stop()
    # Not asleep when its owner left (7 quiet seconds): the new owner runs it.
    successor = WorkerThread(worker_settings.model_copy(update={"worker_id": "next"})).start()
    try:
        # (Its lease is taken once the successor has looked at the partitions it owns now.)
        wait_until(lambda: successor.call(lambda w: PARTITION.full in w.runners))
    finally:
        successor.stop()
