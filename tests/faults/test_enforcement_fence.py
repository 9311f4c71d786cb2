"""A worker that cannot apply a change in time is fenced off, and the write is answered.

The worker reaches the database through a proxy the test cuts, so it reads a change event
but cannot load the new policy and never confirms it.  The admin service (with a short apply
timeout) then deletes the worker's partition leases, so its next dispatch call is refused,
and answers the write with ``X-Sluice-Enforcement: fenced <worker>``.  Nothing is dispatched
under the superseded limit afterwards.  Once the database is back the worker re-reads
everything, takes its partitions again and confirms later writes at once.
"""

from __future__ import annotations

import time

import httpx
import pytest
import redis

import sluice
from api.app import create_app
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.conftest import ServerThread
from tests.faults.proxy import worker_through
from tests.tcp_proxy import TcpProxy
from tests.workers.conftest import ADMIN, rate, wait_until

pytestmark = pytest.mark.faults

TOPIC = "persistent://acme/orders/fenced"
PATH = f"{ADMIN}/persistent/acme/orders/fenced"
APPLY_TIMEOUT = 1.5


def test_a_worker_that_cannot_confirm_is_fenced_off(http, namespace, settings):
    from sqlalchemy.engine import make_url

    url = make_url(settings.database_url)
    proxy = TcpProxy((url.host or "127.0.0.1", url.port or 5432)).start()
    api = ServerThread(
        create_app(settings.model_copy(update={"apply_timeout_seconds": APPLY_TIMEOUT}))
    ).start()
    worker = worker_through(proxy, settings, "stuck-worker", 60.0)
    plain = redis.Redis.from_url(settings.redis_url)
    lease = keys.lease(TopicName.from_full(TOPIC))
    try:
        with httpx.Client(base_url=api.url, timeout=30) as admin:
            assert admin.put(PATH).status_code == 204
            confirmed = admin.post(f"{PATH}/dispatchRate", json=rate(50))
            assert confirmed.status_code == 204
            assert "x-sluice-enforcement" not in confirmed.headers
            wait_until(lambda: plain.get(lease))

            proxy.cut()
            started = time.monotonic()
            fenced = admin.post(f"{PATH}/dispatchRate", json=rate(5))
            took = time.monotonic() - started
            assert fenced.status_code == 204, fenced.text
            assert fenced.headers["x-sluice-enforcement"] == "fenced stuck-worker"
            assert APPLY_TIMEOUT <= took < APPLY_TIMEOUT + 2.0
            # Its lease is gone: no dispatch call of the stale worker is accepted any more.
            held = plain.get(lease)
            assert held is None or not held.decode().startswith("stuck-worker:")
            with sluice.Client(settings.redis_url) as client:
                consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
                producer = client.create_producer(TOPIC, block_if_queue_full=True)
                for _ in range(100):
                    producer.send_async(b"x", None)
                producer.flush()
                with pytest.raises(sluice.Timeout):
                    consumer.receive(timeout_millis=1500)

                proxy.restore()
                # Back: it re-reads everything, takes the partition and enforces 5 msg/s.
                got = []
                deadline = time.monotonic() + 15
                while len(got) < 10 and time.monotonic() < deadline:
                    try:
                        got.append((time.monotonic(), consumer.receive(timeout_millis=500)))
                    except sluice.Timeout:
                        continue
                assert len(got) == 10
                assert got[-1][0] - got[0][0] >= 1.0 - 0.2  # two periods of 5, not one of 50
                consumer.close()
            wait_until(lambda: plain.hget(keys.worker_info("stuck-worker"), "fenced") is None)
            again = admin.post(f"{PATH}/dispatchRate", json=rate(7))
            assert again.status_code == 204
            assert "x-sluice-enforcement" not in again.headers
    finally:
        plain.close()
        worker.stop()
        api.stop()
        proxy.cut()
