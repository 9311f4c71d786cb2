"""The ``Catalog`` on its own: a context, a session factory, a callback; no worker runs.

The admin API (over HTTP, as a user would) writes the database; Redis is then emptied, and
the catalog is driven to put back what the database says and to record what clients made.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import redis
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from dataplane.catalog import (
    DROP_MARK_SECONDS,
    CatalogProjection,
    Recorded,
    forget_old_drop_marks,
    marked_dropped,
)
from dataplane.events import ChangeEvent
from models.base import epoch_ms, utcnow
from models.db import make_async_engine, make_session_factory
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import SUBSCRIBE
from tests.workers.conftest import ADMIN
from tests.workers.parts import make_context
from workers import catalog as catalog_module
from workers.catalog import Catalog

TOPIC = TopicName.from_full("persistent://acme/orders/parts")
PATH = f"{ADMIN}/persistent/acme/orders/parts"


@contextlib.asynccontextmanager
async def catalog_alone(settings, redis_url: str) -> AsyncIterator[Catalog]:
    """A ``Catalog`` on its own connections (no change callback), closed afterwards."""
    client = Redis.from_url(redis_url)
    engine = make_async_engine(settings.effective_database_url, pool_size=2)
    sessions = make_session_factory(engine)

    async def on_changed():
        pass

    try:
        yield Catalog(make_context(settings, client, sessions=sessions), sessions, on_changed)
    finally:
        await client.aclose()
        await engine.dispose()


def topic_with_two_subscriptions(http, suffix: str) -> tuple[str, TopicName]:
    """A topic ``parts-<suffix>`` with the subscriptions ``kept`` and ``deleted``, made over
    the admin API; its admin path and name."""
    path = f"{PATH}-{suffix}"
    assert http.put(path).status_code == 204
    assert http.put(f"{path}/subscription/kept").status_code == 204
    assert http.put(f"{path}/subscription/deleted").status_code == 204
    return path, TopicName.from_full(f"{TOPIC.full}-{suffix}")


def test_the_catalog_restores_redis_records_client_subscriptions_and_applies_events(
    http, namespace, settings, redis_server
):
    assert http.put(PATH).status_code == 204
    assert http.put(f"{PATH}/subscription/admin-sub").status_code == 204
    sync = redis.Redis.from_url(redis_server.url)
    sync.flushall()  # Redis lost everything; the database did not

    async def scenario():
        client = Redis.from_url(redis_server.url)
        engine = make_async_engine(settings.effective_database_url, pool_size=2)
        sessions = make_session_factory(engine)
        changed = []

        async def on_changed():
            changed.append(time.monotonic())

        catalog = Catalog(make_context(settings, client, sessions=sessions), sessions, on_changed)
        try:
            await catalog.sync()
            assert sync.hexists(keys.TOPICS, TOPIC.full)
            assert sync.sismember(keys.NAMESPACES, "acme/orders")
            assert sync.sismember(keys.subs(TOPIC), "admin-sub")
            assert sync.hget(keys.CLIENT_CONFIG, "consumerTimeoutMs") is not None
            assert catalog.partitions() == [TOPIC]

            # A consumer creates a subscription: the next pass records it in the database.
            script_keys, args = SUBSCRIBE.call(
                TOPIC, "client-sub", "c1", "Shared", "latest", int(time.time() * 1000), "{}", 60000
            )
            await catalog.context.scripts["subscribe"](keys=script_keys, args=args)
            await catalog.sync()
            deadline = time.monotonic() + 5
            while "client-sub" not in http.get(f"{PATH}/subscriptions").json():
                assert time.monotonic() < deadline, "client subscription not recorded"
                await asyncio.sleep(0.05)

            # An event naming a subscription: the database says it exists, so its group is
            # made again; the partitions are claimed again.
            plane = CatalogProjection(client, catalog.context.scripts, 60000)
            await plane.drop_subscription(TOPIC, 0, "admin-sub")
            assert not sync.sismember(keys.subs(TOPIC), "admin-sub")
            event = ChangeEvent(
                "1-0",
                "subscription",
                f"{TOPIC.full}#admin-sub",
                {"topic": TOPIC.full, "subscription": "admin-sub"},
            )
            await catalog.apply_events([event])
            assert sync.sismember(keys.subs(TOPIC), "admin-sub")
            assert changed
        finally:
            await client.aclose()
            await engine.dispose()

    asyncio.run(scenario())
    sync.close()


def test_a_batch_of_subscription_events_costs_a_few_round_trips(
    http, namespace, settings, redis_server, monkeypatch
):
    """Thousands of consumers subscribing at once reach a worker as batches of catalog events;
    the subscriptions of one batch are made again in a few pipelined round trips, not one (and
    one turn of the worker's event loop) each: applied one by one, 10,000 of them kept a
    worker busy for half a minute."""
    assert http.put(f"{PATH}s/partitions", json=3).status_code == 204
    names = [f"s{i}" for i in range(40)]
    for name in names:
        assert http.put(f"{PATH}s/subscription/{name}").status_code == 204
    topic = TopicName.from_full(f"{TOPIC.full}s")
    sync = redis.Redis.from_url(redis_server.url)
    sync.flushall()
    round_trips = []
    execute = Pipeline.execute

    async def counted(self, *args, **kwargs):
        round_trips.append(len(self.command_stack))
        return await execute(self, *args, **kwargs)

    async def scenario():
        async with catalog_alone(settings, redis_server.url) as catalog:
            await catalog.sync()
            events = [
                ChangeEvent(
                    f"{i + 1}-0",
                    "subscription",
                    f"{topic.full}#{name}",
                    {"topic": topic.full, "subscription": name},
                )
                for i, name in enumerate(names)
            ]
            monkeypatch.setattr(Pipeline, "execute", counted)
            await catalog.apply_events(events)
            monkeypatch.undo()

    asyncio.run(scenario())
    for index in range(3):
        partition = topic.partition(index)
        assert sync.smembers(keys.subs(partition)) == {n.encode() for n in names}
    # 120 (partition, subscription) pairs: one script call and one wake-up each, in one
    # round trip (at most 256 pairs a batch).
    assert len(round_trips) <= 2, round_trips
    sync.close()


def test_a_subscription_deleted_during_a_full_pass_is_not_made_again(
    http, namespace, settings, redis_server, monkeypatch
):
    """The admin API deletes a subscription (its row, then its consumer groups) after a full
    pass read the database and before it read Redis: the pass sees a recorded subscription
    without groups, and must not make them again (nor, at the next pass, record the groups
    it made as a consumer's subscription): the delete stays done."""
    path, topic = topic_with_two_subscriptions(http, "deleted")
    sync = redis.Redis.from_url(redis_server.url)
    read_redis = catalog_module.subscriptions_by_topic

    async def delete_in_between(*args, **kwargs):
        deleted = await asyncio.to_thread(http.delete, f"{path}/subscription/deleted")
        assert deleted.status_code == 204
        return await read_redis(*args, **kwargs)

    async def scenario():
        async with catalog_alone(settings, redis_server.url) as catalog:
            monkeypatch.setattr(catalog_module, "subscriptions_by_topic", delete_in_between)
            await catalog.sync()
            monkeypatch.undo()
            assert sync.smembers(keys.subs(topic)) == {b"kept"}
            await catalog.sync()  # a second pass: nothing to record again
            if catalog.recorder is not None:
                await catalog.recorder

    asyncio.run(scenario())
    assert sync.smembers(keys.subs(topic)) == {b"kept"}
    assert http.get(f"{path}/subscriptions").json() == ["kept"]
    sync.close()


def test_groups_seen_between_an_admin_delete_and_their_drop_are_not_recorded(
    http, namespace, settings, redis_server
):
    """The mirror case: a pass reads the database after the admin API's delete committed (no
    row) and Redis before it dropped the groups (still there).  The groups look like a
    consumer's subscription; recording them would bring the deleted subscription back (the
    next pass makes its groups again).  The delete's mark keeps the recorder from it, while a
    subscription a consumer makes is still recorded."""
    path, topic = topic_with_two_subscriptions(http, "mirror")
    sync = redis.Redis.from_url(redis_server.url)

    async def scenario():
        async with catalog_alone(settings, redis_server.url) as catalog:
            assert http.delete(f"{path}/subscription/deleted").status_code == 204
            # Redis as the pass reads it between the commit and the drop, and a consumer's
            # own subscription beside it.
            await catalog.plane.ensure_subscriptions(
                [(topic, 0, "deleted"), (topic, 0, "a-consumers")]
            )
            await catalog.sync()
            if catalog.recorder is not None:
                await catalog.recorder
            await catalog.plane.drop_subscription(topic, 0, "deleted")  # the drop lands
            await catalog.sync()
            if catalog.recorder is not None:
                await catalog.recorder

    asyncio.run(scenario())
    assert sync.smembers(keys.subs(topic)) == {b"kept", b"a-consumers"}
    assert sorted(http.get(f"{path}/subscriptions").json()) == ["a-consumers", "kept"]
    sync.close()


def test_an_admin_delete_mark_holds_for_a_minute_and_is_then_forgotten(redis_server):
    now = time.time()
    fresh, old = "persistent://acme/orders/t#fresh", "persistent://acme/orders/t#old"

    async def scenario() -> tuple[set[str], set[bytes]]:
        client = Redis.from_url(redis_server.url)
        try:
            await client.delete(keys.ADMIN_DROPS)
            await client.hset(
                keys.ADMIN_DROPS,
                mapping={
                    fresh: int((now - DROP_MARK_SECONDS + 1) * 1000),
                    old: int((now - DROP_MARK_SECONDS - 1) * 1000),
                },
            )
            marked = await marked_dropped(client, [fresh, old, "persistent://acme/orders/t#x"])
            await forget_old_drop_marks(client, now)
            return marked, set(await client.hkeys(keys.ADMIN_DROPS))
        finally:
            await client.aclose()

    marked, left = asyncio.run(scenario())
    assert marked == {fresh}
    assert left == {fresh.encode()}


def test_a_worker_does_not_make_again_a_subscription_the_admin_api_is_deleting(
    http, namespace, settings, redis_server, monkeypatch
):
    """A worker makes the groups of subscriptions it read in the database (catalog events,
    full passes), and the admin API may delete one meanwhile: its mark, its row, then its
    groups.  A subscription marked before the worker makes its groups is skipped; one whose
    delete marks and drops it while the worker is making them (the worker read the row
    first) has them dropped again.  The other subscription's groups are made."""
    _path, topic = topic_with_two_subscriptions(http, "racing")
    sync = redis.Redis.from_url(redis_server.url)

    async def scenario():
        async with catalog_alone(settings, redis_server.url) as catalog:
            plane = catalog.plane
            made = epoch_ms(utcnow()) - 1  # both rows exist already
            wanted = [Recorded(topic, 0, "kept", made), Recorded(topic, 0, "deleted", made)]
            # Marked before: not made.
            await plane.drop_subscriptions([(topic, "kept"), (topic, "deleted")])
            await plane.mark_dropped(topic, "deleted")
            await plane.ensure_recorded_subscriptions(wanted)
            assert sync.smembers(keys.subs(topic)) == {b"kept"}
            # Marked and dropped while the groups are being made (after the first check).
            await asyncio.to_thread(sync.delete, keys.ADMIN_DROPS)
            await plane.drop_subscriptions([(topic, "kept"), (topic, "deleted")])
            make = plane.ensure_subscriptions

            async def delete_lands_first(pairs):
                await plane.mark_dropped(topic, "deleted")
                await plane.drop_subscription(topic, 0, "deleted")
                await make(pairs)  # the worker's calls, sent before, land after the drop

            monkeypatch.setattr(plane, "ensure_subscriptions", delete_lands_first)
            await plane.ensure_recorded_subscriptions(wanted)

    asyncio.run(scenario())
    assert sync.smembers(keys.subs(topic)) == {b"kept"}
    sync.delete(keys.ADMIN_DROPS)
    sync.close()


def test_a_subscription_deleted_and_made_again_gets_its_groups_from_a_worker(
    http, namespace, settings, redis_server
):
    """The admin API deletes a subscription and makes it again within the minute its delete
    mark holds, and the groups are not there (the re-create's own Redis write did not land):
    the mark is older than the new row, so a worker's pass makes them, while a subscription
    whose mark is its own (set after its row was made) is still left alone."""
    path, topic = topic_with_two_subscriptions(http, "again")
    assert http.delete(f"{path}/subscription/kept").status_code == 204
    time.sleep(0.01)  # the new row is made a few ms after the mark
    assert http.put(f"{path}/subscription/kept").status_code == 204
    sync = redis.Redis.from_url(redis_server.url)

    async def scenario():
        async with catalog_alone(settings, redis_server.url) as catalog:
            # Neither groups in Redis; "deleted" marked as the admin API marks before a delete
            # (its row still there: the delete has not committed yet).
            await catalog.plane.drop_subscriptions([(topic, "kept"), (topic, "deleted")])
            await catalog.plane.mark_dropped(topic, "deleted")
            assert await marked_dropped(
                catalog.context.redis, [f"{topic.full}#kept", f"{topic.full}#deleted"]
            ) == {f"{topic.full}#kept", f"{topic.full}#deleted"}
            await catalog.sync()

    asyncio.run(scenario())
    assert sync.smembers(keys.subs(topic)) == {b"kept"}
    assert sorted(http.get(f"{path}/subscriptions").json()) == ["deleted", "kept"]
    sync.delete(keys.ADMIN_DROPS)
    sync.close()
