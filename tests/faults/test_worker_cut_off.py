"""A worker cut off from Redis (still running, not killed) loses its partitions and comes back.

One of two workers reaches Redis through a proxy that the test cuts while a producer keeps
sending to a partitioned topic.  The cut-off worker cannot renew its heartbeat: the other takes
its partitions over within the lease TTL plus a second and dispatches them.  Whatever the
cut-off worker still had queued when its connections broke meets the fencing token on the way
in, so nothing is dispatched twice: every message arrives exactly once and the subscriptions'
dispatch counters equal the deliveries.  Healed, the worker finds its heartbeat lapsed, drops
the leases taken meanwhile, registers again and gets its share back as rendezvous hashing says.
"""

from __future__ import annotations

import time

import pytest

import sluice
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.faults.test_worker_pause import SteadyProducer
from tests.fleet import LEASE_TTL, Collector
from tests.tcp_proxy import TcpProxy
from tests.workers.conftest import ADMIN, wait_until

pytestmark = pytest.mark.faults

TOPIC = "persistent://acme/orders/pause"  # SteadyProducer's topic
PARTITIONS = 6  # rendezvous hashing gives w1 two of them


def redis_port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def test_a_worker_cut_off_from_redis_hands_over_and_rejoins(fleet, http, settings):
    assert (
        http.put(f"{ADMIN}/persistent/acme/orders/pause/partitions", json=PARTITIONS).status_code
        == 204
    )
    proxy = TcpProxy(redis_port(settings.redis_url)).start()
    try:
        fleet.start("w1", redis_url=f"redis://127.0.0.1:{proxy.port}/0")
        fleet.start("w2")
        owners = wait_until(lambda: fleet.settled(TOPIC, PARTITIONS, {"w1", "w2"}), timeout=15)
        assert "w1" in owners.values(), owners  # rendezvous hashing gives w1 a share
        with sluice.Client(settings.redis_url) as client:
            collector = Collector(client, TOPIC)
            producer = SteadyProducer(client)
            wait_until(lambda: len(collector.seen) >= 200, timeout=10)
            proxy.cut()
            cut_at = time.monotonic()
            wait_until(
                lambda: set(fleet.owners(TOPIC, PARTITIONS).values()) == {"w2"},
                timeout=LEASE_TTL * 6,
                every=0.02,
            )
            takeover = time.monotonic() - cut_at
            delivered = len(collector.seen)
            wait_until(lambda: len(collector.seen) >= delivered + 200, timeout=10)
            time.sleep(LEASE_TTL)  # cut off for a while longer
            proxy.restore()
            wait_until(lambda: "had lapsed" in fleet.log("w1"), timeout=LEASE_TTL * 10)
            settled = wait_until(
                lambda: fleet.settled(TOPIC, PARTITIONS, {"w1", "w2"}), timeout=LEASE_TTL * 10
            )
            time.sleep(0.5)  # the producer goes on across the return
            total = producer.stop()
            wait_until(lambda: len(collector.seen) == total, timeout=30)
            time.sleep(0.5)  # late duplicates, if any, would show up now
            collector.stop()
            base = TopicName.from_full(TOPIC)
            dispatched = sum(
                int(
                    fleet.redis.hget(keys.sub_key(base.partition(i), "sub", "stats"), "msg_out")
                    or 0
                )
                for i in range(PARTITIONS)
            )
    finally:
        proxy.cut()
    report = (
        f"sent {total}, received {len(collector.seen)} distinct, {collector.duplicates} "
        f"duplicates, dispatched {dispatched}; takeover {takeover:.2f} s after the cut; "
        f"owners before {owners}, after {settled}"
    )
    print(report)
    assert takeover <= LEASE_TTL + 1.0, report
    assert set(collector.seen) == {f"m{i}".encode() for i in range(total)}, report
    assert collector.duplicates == 0, report
    assert dispatched == total, report
    assert "w1" in settled.values(), report
    assert fleet.processes["w1"].poll() is None, report  # it lived through the cut
