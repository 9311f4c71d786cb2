"""What a report run asks of the workers before it lands, against a real Redis: the live
workers' answers decide up to when its data reaches."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from models.stats import SNAPSHOT_REQUEST, SNAPSHOT_TAKEN
from reports.freshness import request_snapshots
from sluice.protocol import keys
from sluice.protocol.connection import connect


@pytest.fixture
def client(redis_server):
    c = connect(redis_server.url)  # a Redis Cluster client on a cluster
    c.flushall()
    yield c
    c.flushall()
    c.close()


def _live(client, *workers: str, seconds: float = 30) -> None:
    now, micros = client.time()
    expiry = (now + seconds) * 1000 + micros // 1000
    client.zadd(keys.WORKERS, {w: expiry for w in workers})


def _answer(client, worker: str, ts_ms: int) -> None:
    """What a worker does at its next tick: snapshot, then note the request it answered."""
    request = client.get(SNAPSHOT_REQUEST).decode()
    client.hset(SNAPSHOT_TAKEN, worker, orjson.dumps({"ts": ts_ms, "request": request}))


def test_every_live_worker_answered_the_data_reaches_the_request(client):
    _live(client, "w1", "w2")
    before = datetime.now(UTC)

    def answer() -> None:
        while client.get(SNAPSHOT_REQUEST) is None:
            pass
        for worker in ("w1", "w2"):
            _answer(client, worker, int(datetime.now(UTC).timestamp() * 1000))

    answering = threading.Thread(target=answer)
    answering.start()
    data_until = request_snapshots(client, timeout=5)
    answering.join()
    assert before <= data_until <= datetime.now(UTC)
    # A worker whose heartbeat expired is not waited for.
    _live(client, "gone", seconds=-10)
    assert request_snapshots(client, timeout=0.2) >= data_until


def test_a_worker_that_does_not_answer_holds_the_data_back_to_its_last_snapshot(client):
    _live(client, "w1", "slow")
    old = datetime.now(UTC) - timedelta(seconds=42)
    old_ms = int(old.timestamp() * 1000)
    client.hset(SNAPSHOT_TAKEN, "slow", orjson.dumps({"ts": old_ms, "request": "older"}))
    client.hset(SNAPSHOT_TAKEN, "w1", orjson.dumps({"ts": 1, "request": "older"}))
    started = datetime.now(UTC)
    data_until = request_snapshots(client, timeout=0.3)
    assert (datetime.now(UTC) - started).total_seconds() >= 0.3  # it waited for them
    # Neither answered: the older of their last snapshots.
    assert data_until == datetime.fromtimestamp(0.001, UTC)
    # w1 answers this time, "slow" still does not: its last snapshot is where the data ends.
    client.delete(SNAPSHOT_REQUEST)

    def answer() -> None:
        while client.get(SNAPSHOT_REQUEST) is None:
            pass
        _answer(client, "w1", int(datetime.now(UTC).timestamp() * 1000))

    answering = threading.Thread(target=answer)
    answering.start()
    data_until = request_snapshots(client, timeout=0.5)
    answering.join()
    assert orjson.loads(client.hget(SNAPSHOT_TAKEN, "w1"))["request"] != "older"
    assert data_until == datetime.fromtimestamp(old_ms / 1000, UTC)
