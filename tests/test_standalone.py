"""``sluice standalone`` as a user runs it: SQLite, embedded Redis, admin API and a worker."""

from __future__ import annotations

import base64
import signal
import time

import httpx
import orjson
import pytest
from websockets.sync.client import connect as ws_connect

import sluice
from tests.standalone_process import Standalone


@pytest.fixture
def standalone(tmp_path):
    server = Standalone(tmp_path).start()
    yield server.url, server.redis_url, server.data, server.process
    server.interrupt()


def test_readme_curl_session(standalone):
    base, redis_url, data, process = standalone
    http = httpx.Client(base_url=base)
    json = {"Content-Type": "application/json"}
    assert (
        http.put(
            "/admin/v2/tenants/acme",
            headers=json,
            content=b'{"adminRoles":[],"allowedClusters":["standalone"]}',
        ).status_code
        == 204
    )
    assert http.put("/admin/v2/namespaces/acme/orders").status_code == 204
    assert (
        http.put(
            "/admin/v2/persistent/acme/orders/created/partitions", headers=json, content=b"4"
        ).status_code
        == 204
    )
    body = (
        b'{"dispatchThrottlingRateInMsg":1000,"dispatchThrottlingRateInByte":-1,'
        b'"ratePeriodInSecond":1,"relativeToPublishRate":false}'
    )
    assert (
        http.post(
            "/admin/v2/namespaces/acme/orders/dispatchRate", headers=json, content=body
        ).status_code
        == 204
    )
    applied = http.get(
        "/admin/v2/persistent/acme/orders/created/dispatchRate", params={"applied": "true"}
    )
    assert applied.status_code == 200
    assert applied.json() == {
        "dispatchThrottlingRateInMsg": 1000,
        "dispatchThrottlingRateInByte": -1,
        "relativeToPublishRate": False,
        "ratePeriodInSecond": 1,
    }
    # The embedded worker dispatches: one message end to end.
    with sluice.Client(redis_url) as client:
        topic = "persistent://acme/orders/created"
        consumer = client.subscribe(topic, "audit", consumer_type=sluice.ConsumerType.Shared)
        client.create_producer(topic).send(b"hello")
        message = consumer.receive(timeout_millis=10_000)
        assert message.data() == b"hello"
        consumer.acknowledge(message)
    # Pulsar's WebSocket API is on in standalone, on the admin port.
    ws = base.replace("http://", "ws://") + "/ws/v2"
    path = "persistent/acme/orders/created"
    with (
        ws_connect(f"{ws}/consumer/{path}/ws-audit?subscriptionType=Shared") as ws_consumer,
        ws_connect(f"{ws}/producer/{path}") as ws_producer,
    ):
        ws_producer.send('{"payload": "aGk=", "context": "c"}')
        sent = orjson.loads(ws_producer.recv(timeout=10))
        assert (sent["result"], sent["context"]) == ("ok", "c")
        got = orjson.loads(ws_consumer.recv(timeout=10))
        assert base64.b64decode(got["payload"]) == b"hi"
        assert got["messageId"] == sent["messageId"]
        ws_consumer.send(orjson.dumps({"messageId": got["messageId"]}).decode())
    assert (data / "sluice.db").exists()
    assert (data / "redis").is_dir()
    # The embedded report scheduler (Celery worker + beat) runs a queued report run.
    queued = http.post("/admin/v2/reports/runs", json={"lookbackSeconds": 600})
    assert queued.status_code == 202
    assert len(queued.json()["runIds"]) == 3  # rates, backlog, advice

    def finished_runs():
        runs = http.get("/admin/v2/reports/runs").json()
        return [r for r in runs if r["status"] in ("succeeded", "failed")]

    deadline = time.monotonic() + 420  # three Spark jobs, one after the other, on 2 cores
    while len(finished_runs()) < 3 and time.monotonic() < deadline:
        time.sleep(1)
    assert sorted((r["job"], r["status"]) for r in finished_runs()) == [
        ("advice", "succeeded"),
        ("backlog", "succeeded"),
        ("rates", "succeeded"),
    ]
    process.send_signal(signal.SIGINT)
    assert process.wait(30) == 0
