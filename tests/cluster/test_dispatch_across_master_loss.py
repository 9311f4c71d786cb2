"""Dispatch across an unplanned master loss: the master holding a partition is SIGKILLed while
a throttled subscription consumes it.

Real processes (``sluice api``, two ``sluice worker``\\ s, the client) on a 3-master +
3-replica cluster whose nodes fail a silent peer after ``NODE_TIMEOUT_MS``.  Producers send
with durable acknowledgements (the namespace's ``durableAcks``, 1 replica) above the
namespace's dispatch rate, so every partition stays backlogged and the limit paces it; a
Shared consumer receives and acknowledges.  The master of partition 0 is killed; the cluster
promotes its replica by itself.  Expected:

* dispatch of partition 0 resumes by itself within lease TTL + node timeout + 1 s of the kill
  (plus the slack a loaded two-core machine needs, stated below);
* the limit holds throughout, on every partition: no window of one second carries more than
  two periods' quota (plus one entry each) — the leases, fencing tokens, limiter state and
  consumer groups the promoted replica holds are what the workers go on with;
* at least once: every acknowledged send is delivered; deliveries beyond the first are no
  more than the redeliveries the subscription's stats count.
"""

from __future__ import annotations

import time

import pytest

from server.embedded_cluster import NODE_TIMEOUT_MS, EmbeddedCluster
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.cluster.test_cluster_faults import Stack
from tests.cluster.traffic import Receiver, Sender, busiest_window
from tests.fleet import LEASE_TTL
from tests.workers.conftest import ADMIN, rate

pytestmark = [pytest.mark.cluster, pytest.mark.faults]

TOPIC = "persistent://acme/orders/lost-master"
PARTITIONS = 3
LIMIT = 40
# Beyond lease TTL + node timeout + 1 s: the replica's election after the node timeout (up to
# a second or so on a loaded machine) and the polling of this test.
SLACK = 2.0


def where_missing(cluster, partition, missing: set[bytes], receiver) -> str:
    """Where the missing sends are on partition ``partition``'s promoted master: in its log
    or not, and what its subscription's group and the consumer's queue hold (a failure
    tells a lost write from a lost delivery)."""
    node = cluster.node_of_key(keys.log(partition))
    redis = node.redis()
    rows = redis.xrange(keys.log(partition))
    in_log = {fields.get(b"d"): entry for entry, fields in rows}
    found = sorted(in_log[m].decode() for m in missing if m in in_log)
    groups = redis.xinfo_groups(keys.log(partition))
    pending = redis.xpending(keys.log(partition), "audit")
    return (
        f"on the promoted master: log of {len(rows)} entries holds {len(found)} of the "
        f"missing ({found[:3]}...{found[-1:]}); groups {groups}; pending {pending}; "
        f"consumer errors {[repr(e) for e in receiver.errors[:5]]}"
    )


def test_dispatch_resumes_within_bounds_after_a_master_is_killed(tmp_path):
    cluster = EmbeddedCluster(tmp_path / "cluster", masters=3, replicas=1).start()
    stack = Stack(cluster, tmp_path)
    try:
        client = stack.start(TOPIC, PARTITIONS)
        durable = {"replicas": 1, "timeoutMs": 1000}
        assert (
            stack.http.post(f"{ADMIN}/namespaces/acme/orders/durableAcks", json=durable).status_code
            == 204
        )
        namespace_rate = f"{ADMIN}/namespaces/acme/orders/dispatchRate"
        assert stack.http.post(namespace_rate, json=rate(LIMIT)).status_code == 204
        receiver = Receiver(client, TOPIC)
        sender = Sender(client, TOPIC, per_second=PARTITIONS * LIMIT * 3 // 2).start()
        time.sleep(3)
        first = TopicName.from_full(TOPIC).partition(0)
        master = cluster.node_of_key(keys.log(first))
        killed_at = time.monotonic() - receiver.origin
        cluster.kill(master)
        cluster.wait_promoted(master, keys.log(first))
        time.sleep(5)
        sender.stop()
        settled_at = time.monotonic() - receiver.origin
        after = [t for t in receiver.arrivals.get(0, []) if t > killed_at]
        assert after, "partition 0 not dispatched after its master was killed"
        resumed = after[0] - killed_at
        for index, times in receiver.arrivals.items():
            busiest = busiest_window([t for t in times if t <= settled_at])
            assert busiest <= 2 * (LIMIT + 1), f"partition {index}: {busiest} in one second"
        # Drain the backlog quickly, then nothing acknowledged may be missing.
        assert stack.http.delete(namespace_rate).status_code == 204
        missing = receiver.wait_for(sender.sent, timeout=60)
        time.sleep(1)  # a late duplicate would come now
        receiver.stop()
        stats = stack.http.get(f"{ADMIN}/persistent/acme/orders/lost-master/partitioned-stats")
        subscription = stats.json()["subscriptions"]["audit"]
        redelivered = subscription.get("msgRedeliverCounter", 0)
        report = (
            f"sent {len(sender.sent)} ({sender.failed} failed), received "
            f"{len(receiver.seen)} distinct, {receiver.duplicates} duplicates, "
            f"{redelivered} redelivered per stats; partition 0 resumed {resumed:.2f} s "
            f"after the kill (bound {LEASE_TTL + NODE_TIMEOUT_MS / 1000 + 1:.1f} s + {SLACK} s)"
        )
        print(report)
        if missing:
            report += "; " + where_missing(cluster, first, missing, receiver)
        assert not missing, f"{len(missing)} acknowledged sends lost; {report}"
        assert len(sender.sent) > 300, report
        assert resumed <= LEASE_TTL + NODE_TIMEOUT_MS / 1000 + 1 + SLACK, report
        assert receiver.duplicates <= redelivered, report
    finally:
        stack.stop()
        cluster.stop()
