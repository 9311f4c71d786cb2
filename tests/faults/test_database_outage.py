"""PostgreSQL unavailable: admin writes fail cleanly, workers keep enforcing, events resume.

A second admin server and an in-process worker reach the session database through TCP
proxies the test controls (``tests.faults.proxy``); the session's own admin server keeps a
direct connection, so the test can look at the database while the others cannot.

* Proxy cut (connections refused): admin writes answer 503 with a JSON reason; the worker goes
  on dispatching under the last policies it loaded (its periodic resync fails and is retried,
  nothing else changes).
* Commit lost (the proxy drops the connection when the client sends COMMIT, so the server
  rolls the transaction back): the write answers 503 too.
* After either, the database shows no trace of the failed writes: no policy change, no
  namespace, no audit entry, no outbox event.
* Once the proxy is back, the first write succeeds, its outbox event is published, and the
  worker applies it.
"""

from __future__ import annotations

import time

import httpx
import pytest
import redis
from sqlalchemy import text

import sluice
from api.app import create_app
from sluice.protocol.names import TopicName
from tests.conftest import ServerThread
from tests.faults.proxy import worker_through
from tests.fleet import Collector
from tests.tcp_proxy import TcpProxy
from tests.workers.conftest import ADMIN, WorkerThread, rate, wait_until

pytestmark = pytest.mark.faults

TOPIC = "persistent://acme/orders/outage"
RATE_PATH = f"{ADMIN}/persistent/acme/orders/outage/dispatchRate"
LIMIT = 100  # messages per 1 s period while the database is down
OUTAGE_SECONDS = 3.0
RESYNC_SECONDS = 1.0


def database_state(db) -> dict:
    """What a failed write must not change."""
    with db.connect() as connection:
        return {
            "policies": connection.execute(
                text("SELECT scope_key, kind, msg FROM dispatch_rate_policies ORDER BY scope_key")
            ).all(),
            "namespaces": connection.execute(
                text("SELECT name FROM namespaces ORDER BY name")
            ).all(),
            "audit": connection.execute(text("SELECT count(*), max(id) FROM audit_log")).one(),
            "outbox": connection.execute(text("SELECT count(*), max(id) FROM outbox_events")).one(),
        }


def topic_permits(worker: WorkerThread) -> int:
    partition = TopicName.from_full(TOPIC)
    return worker.call(lambda w: w.policy.limits(partition).topic.permits_msg)


@pytest.fixture
def proxies(settings):
    """One proxy for the second admin server, one for the worker, both to PostgreSQL."""
    from sqlalchemy.engine import make_url

    url = make_url(settings.database_url)
    target = (url.host or "127.0.0.1", url.port or 5432)
    admin, worker = TcpProxy(target).start(), TcpProxy(target).start()
    yield admin, worker
    admin.cut()
    worker.cut()


def test_database_outage(http, namespace, settings, db, proxies):
    admin_proxy, worker_proxy = proxies
    proxied = ServerThread(
        create_app(
            settings.model_copy(update={"database_url": admin_proxy.url_for(settings.database_url)})
        )
    ).start()
    worker = worker_through(worker_proxy, settings, "outage-worker", RESYNC_SECONDS)
    events = redis.Redis.from_url(settings.redis_url)
    try:
        with httpx.Client(base_url=proxied.url, timeout=30) as api:
            assert api.put(f"{ADMIN}/persistent/acme/orders/outage").status_code == 204
            assert api.post(RATE_PATH, json=rate(msg=LIMIT)).status_code == 204
            wait_until(lambda: topic_permits(worker) == LIMIT, timeout=10)
            with sluice.Client(settings.redis_url) as client:
                collector = Collector(client, TOPIC)
                producer = client.create_producer(TOPIC, block_if_queue_full=True)
                for i in range(1000):
                    producer.send_async(f"m{i}".encode(), None)
                producer.flush()
                wait_until(lambda: len(collector.seen) >= LIMIT, timeout=10)
                # The worker records the consumer's subscription in the database: let it.
                subscriptions = f"{ADMIN}/persistent/acme/orders/outage/subscriptions"
                wait_until(lambda: http.get(subscriptions).json())
                time.sleep(0.3)
                before = database_state(db)

                # --- the database goes away --------------------------------------------------
                admin_proxy.cut()
                worker_proxy.cut()
                cut_at = time.monotonic()
                # Counted once a resync that was past its database reads has finished.
                time.sleep(0.3)
                resyncs = worker.call(lambda w: w.metrics.resyncs)
                failed = [
                    api.post(RATE_PATH, json=rate(msg=10 * LIMIT)),
                    api.put(f"{ADMIN}/namespaces/acme/never"),
                    api.delete(RATE_PATH),
                ]
                time.sleep(max(0.0, cut_at + OUTAGE_SECONDS - time.monotonic()))
                down = [t for t in collector.receipts if t >= cut_at + 0.1]
                restored_at = time.monotonic()
                resyncs_while_down = worker.call(lambda w: w.metrics.resyncs) - resyncs
                permits_while_down = topic_permits(worker)
                admin_proxy.restore()
                worker_proxy.restore()
                after_outage = database_state(db)

                # --- a commit that never reaches the server ---------------------------------
                admin_proxy.drop_on = b"COMMIT"
                failed.append(api.post(RATE_PATH, json=rate(msg=20 * LIMIT)))
                admin_proxy.drop_on = None
                after_lost_commit = database_state(db)

                # --- back: the next write goes through and reaches the worker --------------
                last_event = events.xrevrange(settings.events_stream, count=1)
                last_id = last_event[0][0] if last_event else b"0-0"
                recovered = api.post(RATE_PATH, json=rate(msg=5 * LIMIT))
                wait_until(lambda: topic_permits(worker) == 5 * LIMIT, timeout=10)
                new_events = events.xrange(settings.events_stream, min=b"(" + last_id)

                def unpublished() -> int:
                    with db.connect() as connection:
                        return connection.execute(
                            text("SELECT count(*) FROM outbox_events WHERE published_at IS NULL")
                        ).scalar()

                # Published rows are marked so in the background, moments later.
                wait_until(lambda: unpublished() == 0, timeout=10)
                collector.stop()
    finally:
        events.close()
        worker.stop()
        proxied.stop()

    for response in failed:
        assert response.status_code == 503, (response.request.method, response.text)
        assert response.headers["content-type"].startswith("application/json")
        assert isinstance(response.json().get("reason"), str) and response.json()["reason"]
    assert admin_proxy.dropped >= 1, "the COMMIT was never seen by the proxy"
    assert after_outage == before, "a write failed during the outage left something behind"
    assert after_lost_commit == before, "a write whose COMMIT was lost left something behind"

    span = restored_at - (cut_at + 0.1)
    report = (
        f"{len(down)} delivered in {span:.2f} s without the database (limit {LIMIT}/s), "
        f"{resyncs_while_down} resyncs succeeded meanwhile"
    )
    assert permits_while_down == LIMIT, report
    assert resyncs_while_down == 0, report  # every resync failed, and was survived
    assert 0.5 * LIMIT * span <= len(down) <= LIMIT * span + LIMIT, report

    assert recovered.status_code == 204, recovered.text
    assert any(fields[b"kind"] == b"policy" for _id, fields in new_events), new_events
