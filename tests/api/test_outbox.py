"""Change events: written with the change, published after commit, never for a rollback."""

from __future__ import annotations

import time

import httpx
import orjson
import redis
from sqlalchemy import text

from api.app import create_app
from migrations import upgrade
from models.db import make_sync_engine
from server.embedded_redis import EmbeddedRedis
from tests.conftest import ServerThread, create_database, drop_database

RATE = {"dispatchThrottlingRateInMsg": 100, "ratePeriodInSecond": 1}


def read_events(url: str, stream: str = "sluice:events") -> list[dict]:
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        return [fields for _id, fields in client.xrange(stream)]
    finally:
        client.close()


def wait_for(predicate, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


def setup_namespace(http: httpx.Client) -> None:
    assert (
        http.put("/admin/v2/tenants/acme", json={"allowedClusters": ["standalone"]}).status_code
        == 204
    )
    assert http.put("/admin/v2/namespaces/acme/orders").status_code == 204


def test_committed_write_is_published(http, redis_server):
    client = redis.Redis.from_url(redis_server.url)
    client.delete("sluice:events")
    setup_namespace(http)
    assert http.post("/admin/v2/namespaces/acme/orders/dispatchRate", json=RATE).status_code == 204
    events = wait_for(lambda: [e for e in read_events(redis_server.url) if e["kind"] == "policy"])
    assert len(events) == 1
    payload = orjson.loads(events[0]["payload"])
    assert events[0]["entity"] == "acme/orders"
    assert payload["level"] == "namespace"
    assert payload["policy"] == "dispatchRate"
    assert payload["action"] == "create"


def unpublished(db) -> int:
    with db.connect() as connection:
        return connection.execute(
            text("SELECT count(*) FROM outbox_events WHERE published_at IS NULL")
        ).scalar()


def test_rolled_back_write_publishes_nothing(http, redis_server, db):
    setup_namespace(http)
    assert wait_for(lambda: unpublished(db) == 0)
    client = redis.Redis.from_url(redis_server.url)
    client.delete("sluice:events")
    answer = http.post(
        "/admin/v2/namespaces/acme/orders/dispatchRate", params={"dryRun": "true"}, json=RATE
    )
    assert answer.status_code == 200
    # A write refused after validation (conflict) is rolled back too.
    assert http.put("/admin/v2/namespaces/acme/orders").status_code == 409
    # Give the relay several sweeps to publish anything it might have.
    time.sleep(0.8)
    assert read_events(redis_server.url) == []
    with db.connect() as connection:
        kinds = connection.execute(text("SELECT kind FROM outbox_events")).scalars().all()
        assert sorted(kinds) == ["namespace", "tenant"]
        assert connection.execute(text("SELECT count(*) FROM dispatch_rate_policies")).scalar() == 0


def test_events_survive_redis_being_down(settings, tmp_path):
    # A database of its own: the session's admin server would otherwise relay these events.
    url = create_database()
    upgrade(url)
    db = make_sync_engine(url)
    server = EmbeddedRedis(tmp_path / "redis")
    server.start()
    port = server.port
    app = ServerThread(
        create_app(settings.model_copy(update={"redis_url": server.url, "database_url": url}))
    ).start()
    try:
        with httpx.Client(base_url=app.url, timeout=30) as http:
            server.stop()
            # Writes succeed while Redis is down...
            setup_namespace(http)
            assert (
                http.post("/admin/v2/namespaces/acme/orders/dispatchRate", json=RATE).status_code
                == 204
            )
            with db.connect() as connection:
                pending = (
                    connection.execute(
                        text(
                            "SELECT kind FROM outbox_events WHERE published_at IS NULL ORDER BY id"
                        )
                    )
                    .scalars()
                    .all()
                )
            assert pending == ["tenant", "namespace", "policy"]
            # ...and their events go out, in order, once it is back.
            server = EmbeddedRedis(tmp_path / "redis", port)
            server.start()
            events = wait_for(
                lambda: read_events(server.url) if len(read_events(server.url)) >= 3 else [], 10
            )
            assert [e["kind"] for e in events] == ["tenant", "namespace", "policy"]
            ids = [int(e["id"]) for e in events]
            assert ids == sorted(ids)

            # The relay marks rows published after it has sent them: wait for that commit
            # rather than racing it (it loses under CPU load).
            def unpublished() -> int:
                with db.connect() as connection:
                    return connection.execute(
                        text("SELECT count(*) FROM outbox_events WHERE published_at IS NULL")
                    ).scalar()

            assert wait_for(lambda: unpublished() == 0, 10)
    finally:
        app.stop()
        server.stop()
        db.dispose()
        drop_database(url)
