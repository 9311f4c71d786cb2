"""A fleet of real ``sluice worker`` processes sharing partitions through leases.

Each worker is a separate process (``tests.fleet``) on the session's PostgreSQL and Redis,
with 1.5 s leases.  The test checks what users rely on: every partition has exactly one owner,
a join moves only the partitions that must move, and nothing is lost or delivered twice on the
way.  Killed and paused workers are in ``tests/faults``.
"""

from __future__ import annotations

import time

import sluice
from tests.fleet import Collector
from tests.workers.conftest import ADMIN, rate, wait_until

TOPIC = "persistent://acme/orders/fleet"


def test_partitions_are_shared_and_rebalanced_when_a_worker_joins(fleet, http, settings):
    partitions = 8
    assert (
        http.put(f"{ADMIN}/persistent/acme/orders/fleet/partitions", json=partitions).status_code
        == 204
    )
    two = fleet.start_settled(TOPIC, partitions, "w1", "w2")

    # The admin service shows the fleet and the owners.
    assert sorted(http.get(f"{ADMIN}/brokers/standalone").json()) == ["w1", "w2"]

    # Each worker reports its own count with its heartbeat: right after a handover one may
    # still count a partition the other has taken.  The counts converge on the partitions.
    def owned() -> int:
        workers = http.get(f"{ADMIN}/brokers/standalone/workers").json()
        return sum(w["ownedPartitions"] for w in workers)

    wait_until(lambda: owned() == partitions, timeout=10)
    lookup = http.get(f"{ADMIN}/persistent/acme/orders/fleet/lookup").json()
    assert {name: entry["owner"] for name, entry in lookup.items()} == two
    one = http.get(f"{ADMIN}/persistent/acme/orders/fleet-partition-0/lookup").json()
    assert one["owner"] == two[f"{TOPIC}-partition-0"] and one["brokerUrl"].startswith("sluice://")

    fleet.start("w3")
    three = wait_until(
        lambda: (
            (o := fleet.settled(TOPIC, partitions, {"w1", "w2", "w3"})) and "w3" in o.values() and o
        ),
        timeout=15,
    )
    # Rendezvous hashing: only partitions that go to the newcomer move.
    moved = {p for p in three if three[p] != two[p]}
    assert all(three[p] == "w3" for p in moved)

    # Dispatch goes on across the three owners under the namespace's limit (20 msg/s per
    # partition, 160 msg/s for the topic): every message arrives once, no faster than that.
    limit = http.post(f"{ADMIN}/namespaces/acme/orders/dispatchRate", json=rate(20))
    assert limit.status_code == 204
    time.sleep(0.5)  # the change event reaches the three workers
    with sluice.Client(settings.redis_url) as client:
        collector = Collector(client, TOPIC)
        producer = client.create_producer(TOPIC)
        for i in range(400):
            producer.send_async(f"m{i}".encode(), None)
        producer.flush()
        wait_until(lambda: len(collector.seen) == 400, timeout=20)
        collector.stop()
    assert set(collector.seen.values()) == {1}
    # 400 messages at 160 msg/s: the first period's 160, then 1.5 more periods at least.
    span = collector.receipts[-1] - collector.receipts[0]
    assert span >= 1.5 - 0.3, span
