"""Redis unavailable: every admin endpoint answers in bounded time, and never with a 500.

A second admin server uses a private ``redis-server`` (and the session database).  The test
creates a namespace, topics and subscriptions, then takes Redis away twice:

* killed (connections refused): every read and write of the API is probed.  What needs Redis
  answers 503 with Pulsar's ``{"reason"}`` body (stats, lookup, the live workers, deleting a
  subscription or topic, whose consumers cannot be checked), ``brokers/ready`` answers 503
  naming Redis, the rest answers as usual from the database (writes are committed and say
  that enforcement is pending), and no answer is a 500;
* stopped with SIGSTOP (the port accepts connections, nothing answers): every request ends
  within one Redis read timeout (``redis_timeout_seconds``) plus a margin: reads that need
  Redis with a 503, writes with their usual answer and ``X-Sluice-Enforcement: pending``.

Once Redis is back on the same port, the same endpoints answer 200 without a restart of the
admin service.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import httpx
import pytest

from api.app import create_app
from server.embedded_redis import EmbeddedRedis
from tests.conftest import ServerThread
from tests.workers.conftest import ADMIN, rate

pytestmark = pytest.mark.faults

NS = f"{ADMIN}/namespaces/acme/orders"
PLAIN = f"{ADMIN}/persistent/acme/orders/plain"
PARTS = f"{ADMIN}/persistent/acme/orders/parts"
# The second admin server's Redis read timeout (``SLUICE_REDIS_TIMEOUT_SECONDS``, 3 s by
# default).  A request that needs Redis fails at its first Redis call: at once when Redis
# refuses connections, after the read timeout when it accepts them and says nothing.  The
# margin covers the database work of a request on a busy machine; a second timeout in the
# same request would exceed it.
REDIS_TIMEOUT_SECONDS = 2.0
REFUSED_BOUND_SECONDS = 1.5
SILENT_BOUND_SECONDS = REDIS_TIMEOUT_SECONDS + 1.5

# Endpoints that cannot answer without Redis.
NEEDS_REDIS = [
    ("GET", f"{PLAIN}/stats"),
    ("GET", f"{PARTS}/partitioned-stats"),
    ("GET", f"{PARTS}/partitioned-stats?perPartition=true"),
    ("GET", f"{PARTS}-partition-0/stats"),
    ("GET", f"{PLAIN}/lookup"),
    ("GET", f"{PARTS}/lookup"),
    ("GET", f"{ADMIN}/brokers/standalone"),
    ("GET", f"{ADMIN}/brokers/standalone/workers"),
    ("DELETE", f"{PLAIN}/subscription/sub"),
    ("DELETE", f"{PARTS}/partitions"),
]

# Endpoints answered from the database alone (writes commit; enforcement is pending).
DATABASE_ONLY = [
    ("GET", f"{ADMIN}/clusters"),
    ("GET", f"{ADMIN}/tenants"),
    ("GET", f"{ADMIN}/tenants/acme"),
    ("GET", f"{ADMIN}/namespaces/acme"),
    ("GET", NS),
    ("GET", f"{NS}/topics"),
    ("GET", f"{NS}/dispatchRate"),
    ("GET", f"{ADMIN}/persistent/acme/orders"),
    ("GET", f"{ADMIN}/persistent/acme/orders/partitioned"),
    ("GET", f"{PARTS}/partitions"),
    ("GET", f"{PLAIN}/subscriptions"),
    ("GET", f"{PARTS}/subscriptions"),
    ("GET", f"{PLAIN}/dispatchRate?applied=true"),
    ("GET", f"{PLAIN}/sub/dispatchRate?applied=true"),
    ("GET", f"{PLAIN}/effectiveDispatchRates"),
    ("GET", f"{PLAIN}/effectiveFlowControls"),
    ("GET", f"{ADMIN}/brokers/configuration/runtime"),
    ("GET", f"{ADMIN}/brokers/health"),
    ("GET", f"{ADMIN}/audit"),
    ("GET", f"{ADMIN}/reports/runs"),
    ("POST", f"{PLAIN}/dispatchRate"),
    ("PUT", f"{ADMIN}/persistent/acme/orders/later"),
    ("PUT", f"{PLAIN}/subscription/other"),
]


@pytest.fixture
def redis_alone(tmp_path) -> Iterator[EmbeddedRedis]:
    """A redis-server only the second admin server uses."""
    server = EmbeddedRedis(tmp_path / "redis", appendonly=True).start()
    yield server
    if server.process is not None:
        os.kill(server.process.pid, signal.SIGCONT)
    server.stop()


@pytest.fixture
def admin(http, settings, redis_alone) -> Iterator[httpx.Client]:
    """The second admin server, on the session database and the private Redis."""
    server = ServerThread(
        create_app(
            settings.model_copy(
                update={
                    "redis_url": redis_alone.url,
                    "redis_timeout_seconds": REDIS_TIMEOUT_SECONDS,
                }
            )
        )
    ).start()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            yield client
    finally:
        server.stop()


def call(admin: httpx.Client, method: str, path: str) -> tuple[httpx.Response, float]:
    """The answer and how long it took."""
    body = rate(msg=100) if path.endswith("dispatchRate") and method == "POST" else None
    started = time.monotonic()
    answer = admin.request(method, path, json=body)
    return answer, time.monotonic() - started


def create_catalog(admin: httpx.Client) -> None:
    assert (
        admin.put(f"{ADMIN}/tenants/acme", json={"allowedClusters": ["standalone"]}).status_code
        == 204
    )
    assert admin.put(NS).status_code == 204
    assert admin.put(PLAIN).status_code == 204
    assert admin.put(f"{PARTS}/partitions", json=2).status_code == 204
    assert admin.put(f"{PLAIN}/subscription/sub").status_code == 204
    assert admin.put(f"{PARTS}/subscription/sub").status_code == 204


def test_redis_down_is_503_never_500(admin, redis_alone):
    create_catalog(admin)
    assert admin.get(f"{ADMIN}/brokers/ready").status_code == 200

    redis_alone.kill()
    ready = admin.get(f"{ADMIN}/brokers/ready")
    assert ready.status_code == 503, ready.text
    assert ready.json()["database"] == "ok"
    assert ready.json()["redis"].startswith("unavailable")
    assert "Redis" in ready.json()["reason"]

    answers = {}
    for method, path in NEEDS_REDIS + DATABASE_ONLY:
        answer, took = call(admin, method, path)
        answers[(method, path)] = (answer.status_code, answer.text[:200], round(took, 2))
    report = "\n".join(f"{m} {p}: {a}" for (m, p), a in answers.items())
    for method, path in NEEDS_REDIS:
        status, text, took = answers[(method, path)]
        assert status == 503, report
        assert "Redis" in httpx.Response(503, text=text).json()["reason"], report
    for method, path in DATABASE_ONLY:
        assert answers[(method, path)][0] < 300, report
    assert all(took < REFUSED_BOUND_SECONDS for _, _, took in answers.values()), report

    redis_alone.start()
    deadline = time.monotonic() + 10
    while admin.get(f"{ADMIN}/brokers/ready").status_code != 200:
        assert time.monotonic() < deadline, "ready did not come back with Redis"
        time.sleep(0.1)
    for method, path in [("GET", f"{PLAIN}/stats"), ("GET", f"{PARTS}/partitioned-stats")]:
        answer, _ = call(admin, method, path)
        assert answer.status_code == 200, answer.text
    # The second subscription was written to the database while Redis was down; the catalog
    # projection catches up, and the subscription can be deleted now that consumers can be
    # checked.
    assert admin.delete(f"{PLAIN}/subscription/other").status_code == 204


def test_silent_redis_answers_in_bounded_time(admin, redis_alone):
    create_catalog(admin)
    assert redis_alone.process is not None
    os.kill(redis_alone.process.pid, signal.SIGSTOP)
    try:
        answers = {}
        for method, path in [
            ("GET", f"{PLAIN}/stats"),
            ("GET", f"{ADMIN}/brokers/ready"),
            ("GET", f"{PLAIN}/subscriptions"),
            ("PUT", f"{PLAIN}/subscription/other"),
            ("POST", f"{PLAIN}/dispatchRate"),
            ("DELETE", f"{PLAIN}/subscription/sub"),
        ]:
            answer, took = call(admin, method, path)
            answers[(method, path)] = (answer, took)
    finally:
        os.kill(redis_alone.process.pid, signal.SIGCONT)
    report = "\n".join(
        f"{m} {p}: {a.status_code} {a.text[:100]} in {t:.2f} s"
        for (m, p), (a, t) in answers.items()
    )
    statuses = [answer.status_code for answer, _ in answers.values()]
    assert statuses == [503, 503, 200, 204, 204, 503], report
    # At most one Redis call waits out its timeout per request: the writes skip the rest of
    # their Redis steps once one has timed out, and leave the events to the relay.
    assert all(took < SILENT_BOUND_SECONDS for _, took in answers.values()), report
    for method in ("PUT", "POST"):
        ((answer, _),) = [a for (m, _), a in answers.items() if m == method]
        assert answer.headers["X-Sluice-Enforcement"] == "pending", report
    deadline = time.monotonic() + 15
    while admin.get(f"{PLAIN}/stats").status_code != 200:
        assert time.monotonic() < deadline, "stats did not come back with Redis"
        time.sleep(0.1)
