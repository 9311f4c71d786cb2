"""The limit advisor end to end: real traffic through a worker (one topic far under its
limit, one throttled with a growing backlog), stats landed, the advice job run (the Celery
task's body), the advice read over REST."""

from __future__ import annotations

import threading
import time

import pytest

import sluice
from reports.tasks import run_reports_once
from tests.receiving import receive_until
from tests.workers.conftest import ADMIN, rate

NS = f"{ADMIN}/namespaces/acme/orders"
PUBLISH = 60  # msg/s on each topic
SLOW_LIMIT = 30  # msg/s: the slow topic's own limit


@pytest.fixture
def report_settings(worker_settings, tmp_path):
    return worker_settings.model_copy(update={"lake_path": str(tmp_path / "lake")})


def _traffic(client, seconds: float) -> None:
    """PUBLISH msg/s to topics fast and slow, each drained by subscription sub."""
    names = [f"persistent://acme/orders/{t}" for t in ("fast", "slow")]
    consumers = [
        client.subscribe(n, "sub", consumer_type=sluice.ConsumerType.Shared) for n in names
    ]
    producers = [client.create_producer(n, batching_enabled=False) for n in names]
    stop = threading.Event()

    readers = [
        threading.Thread(target=receive_until, args=(stop, c, c.acknowledge), daemon=True)
        for c in consumers
    ]
    for reader in readers:
        reader.start()
    origin = time.monotonic()
    for tick in range(int(seconds * 10)):
        late = time.monotonic() - (origin + tick / 10)
        if late > 0.1:
            # A stalled sender skips the ticks it missed: catching up would send a burst, a
            # higher publish rate that the stats rightly report (p95 110 msg/s once, loaded).
            continue
        time.sleep(max(0.0, -late))
        for producer in producers:
            for _ in range(PUBLISH // 10):
                producer.send_async(b"x" * 50, None)
            producer.flush()
    time.sleep(1.5)  # the last stats interval
    stop.set()
    for reader in readers:
        reader.join()


def test_advice_on_recorded_traffic(http, namespace, worker, client, spark, report_settings):
    for topic in ("fast", "slow"):
        assert http.put(f"{ADMIN}/persistent/acme/orders/{topic}").status_code == 204
    assert http.post(f"{NS}/dispatchRate", json=rate(1000)).status_code == 204
    slow_rate = f"{ADMIN}/persistent/acme/orders/slow/dispatchRate"
    assert http.post(slow_rate, json=rate(SLOW_LIMIT)).status_code == 204
    assert http.post(f"{NS}/backlogDrainTargetSeconds", json=60).status_code == 204
    _traffic(client, 12)

    results = run_reports_once(report_settings, jobs=["advice"], lookback_seconds=120)
    # One row per subscription the window's snapshots name: this test's two, and whatever a
    # worker of an earlier test of this process snapshotted into the window while stopping.
    assert [r["job"] for r in results] == ["advice"] and results[0]["rows"] >= 2
    advice = http.get(f"{ADMIN}/reports/advice/acme/orders").json()
    subs = {
        s["topic"].rsplit("/", 1)[1]: s
        for s in advice["subscriptions"]
        if s["subscription"] == "sub" and s["topic"].rsplit("/", 1)[1] in ("fast", "slow")
    }
    assert set(subs) == {"fast", "slow"}

    fast = subs["fast"]
    assert fast["throttledShare"] == 0 and fast["limitPerPartition"] == 1000
    [never] = fast["findings"]
    assert never["code"] == "limitNeverReached"
    assert never["text"].startswith("limit never reached in ")
    # Peak use: PUBLISH of 1000 msg/s, give or take a late stats tick.
    assert 0.04 <= fast["peakUtilisation"] <= 0.15, fast

    slow = subs["slow"]
    assert slow["throttledShare"] > 0.5 and slow["growthPerS"] > 0
    assert [f["code"] for f in slow["findings"]] == ["throttledBacklogGrowing"]
    arithmetic = slow["recommendation"]
    assert arithmetic["targetSeconds"] == 60 and arithmetic["targetSource"] == "namespace"
    # The recorded rates: PUBLISH msg/s published; the backlog grew by what the limit held.
    assert PUBLISH * 0.9 <= arithmetic["publishRateP95"] <= PUBLISH * 1.35, slow
    assert arithmetic["backlogMsgs"] >= (PUBLISH - SLOW_LIMIT) * 12 * 0.8, slow
    needed = arithmetic["publishRateP95"] + arithmetic["backlogMsgs"] / 60
    assert arithmetic["needed"] == pytest.approx(needed, rel=1e-9)
    capped = arithmetic["capacity"] is not None and arithmetic["capacity"] < needed
    assert arithmetic["recommended"] == pytest.approx(
        arithmetic["capacity"] if capped else needed, rel=1e-9
    )
    assert arithmetic["perPartition"] >= arithmetic["recommended"]
    assert slow["apply"]["path"] == slow_rate and slow["apply"]["level"] == "topic"
