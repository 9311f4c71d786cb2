"""The ``Catalog`` on its own: a context, a session factory, a callback; no worker runs.

The admin API (over HTTP, as a user would) writes the database; Redis is then emptied, and
the catalog is driven to put back what the database says and to record what clients made.
"""

from __future__ import annotations

import asyncio
import time

import redis
from redis.asyncio import Redis

from dataplane.catalog import CatalogProjection
from dataplane.events import ChangeEvent
from models.db import make_async_engine, make_session_factory
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import SUBSCRIBE
from tests.workers.conftest import ADMIN
from tests.workers.parts import make_context
from workers.catalog import Catalog

TOPIC = TopicName.from_full("persistent://acme/orders/parts")
PATH = f"{ADMIN}/persistent/acme/orders/parts"


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
