"""Faults of a Redis Cluster under traffic: a master failing over to its replica, and slots
moving between masters (``redis-cli --cluster reshard``).

Real processes as in production: ``sluice api`` on SQLite, two ``sluice worker`` processes
and the client, all given ``REDIS_URL`` naming one node.  A producer thread sends steadily
and keeps the sends that returned; a consumer thread receives and acknowledges.  Expected:

* failover (3 masters, 3 replicas; ``CLUSTER FAILOVER`` on the replica of the master that
  holds a partition): dispatch of that partition resumes, every acknowledged send is
  delivered, and the namespace rate holds throughout: no window of one second carries more
  than two periods' quota (plus one entry each) of a partition;
* resharding (3 masters; the slot of one partition moves while traffic flows): every
  acknowledged send is delivered exactly once, and the partition's keys end on the new
  master.
"""

from __future__ import annotations

import time

import httpx
import pytest
from redis.crc import key_slot

import sluice
from server.embedded_cluster import EmbeddedCluster
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.cluster.processes import AdminProcess
from tests.cluster.traffic import Receiver, Sender, busiest_window
from tests.fleet import Fleet
from tests.workers.conftest import ADMIN, rate, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.faults]


class Stack:
    """Cluster, admin process, two workers, one client: started and stopped together."""

    def __init__(self, cluster: EmbeddedCluster, tmp_path) -> None:
        self.cluster = cluster
        self.admin = AdminProcess(tmp_path, cluster.url).start()
        self.fleet = Fleet(
            None, tmp_path, redis_url=cluster.url, database_url=self.admin.env["DATABASE_URL"]
        )
        self.http = httpx.Client(base_url=self.admin.url, timeout=30)
        self.client: sluice.Client | None = None

    def start(self, topic: str, partitions: int) -> sluice.Client:
        self.fleet.start("w1")
        self.fleet.start("w2")
        tenant = {"allowedClusters": ["standalone"]}
        assert self.http.put(f"{ADMIN}/tenants/acme", json=tenant).status_code == 204
        assert self.http.put(f"{ADMIN}/namespaces/acme/orders").status_code == 204
        path = f"{ADMIN}/persistent/{topic.removeprefix('persistent://')}/partitions"
        assert self.http.put(path, json=partitions).status_code == 204
        wait_until(
            lambda: self.fleet.settled(topic, partitions, {"w1", "w2"}), timeout=30, every=0.1
        )
        self.client = sluice.Client(self.cluster.url)
        return self.client

    def stop(self) -> None:
        try:
            if self.client is not None:
                self.client.close()
        finally:  # the processes stop whatever the client's close met
            self.fleet.stop_all()
            self.admin.stop()
            self.http.close()


@pytest.fixture
def replicated_cluster(tmp_path_factory) -> EmbeddedCluster:
    cluster = EmbeddedCluster(tmp_path_factory.mktemp("replicated"), masters=3, replicas=1)
    cluster.start()
    yield cluster
    cluster.stop()


def test_a_master_failing_over_to_its_replica_loses_nothing(replicated_cluster, tmp_path):
    limit, partitions = 40, 3
    topic = "persistent://acme/orders/failover"
    stack = Stack(replicated_cluster, tmp_path)
    try:
        client = stack.start(topic, partitions)
        body = rate(limit)
        namespace_rate = f"{ADMIN}/namespaces/acme/orders/dispatchRate"
        assert stack.http.post(namespace_rate, json=body).status_code == 204
        receiver = Receiver(client, topic)
        # Above the limit: the partitions stay backlogged, so the limit is what paces them.
        sender = Sender(client, topic, per_second=partitions * limit * 3 // 2).start()
        time.sleep(3)
        first = TopicName.from_full(topic).partition(0)
        failed_at = time.monotonic() - receiver.origin
        master = replicated_cluster.node_of_key(keys.log(first))
        promoted = replicated_cluster.failover(master)
        assert replicated_cluster.node_of_key(keys.log(first)).port == promoted.port
        time.sleep(4)
        sender.stop()
        settled_at = time.monotonic() - receiver.origin
        assert any(at > failed_at + 1 for at in receiver.arrivals.get(0, [])), (
            "partition 0 not dispatched after the failover"
        )
        for index, times in receiver.arrivals.items():
            busiest = busiest_window([t for t in times if t <= settled_at])
            assert busiest <= 2 * (limit + 1), f"partition {index}: {busiest} in one second"
        # Drain the backlog quickly, then nothing acknowledged may be missing.
        assert stack.http.delete(namespace_rate).status_code == 204
        missing = receiver.wait_for(sender.sent, timeout=60)
        receiver.stop()
        assert not missing, f"{len(missing)} of {len(sender.sent)} acknowledged sends lost"
        assert len(sender.sent) > 0
    finally:
        stack.stop()


def test_a_slot_moving_between_masters_under_traffic_loses_and_duplicates_nothing(
    redis_cluster, tmp_path
):
    partitions = 6
    topic, moved, offset = _topic_with_a_partition_early_in_its_range(redis_cluster, partitions)
    stack = Stack(redis_cluster, tmp_path)
    try:
        client = stack.start(topic, partitions)
        receiver = Receiver(client, topic)
        sender = Sender(client, topic, per_second=300).start()
        time.sleep(2)
        log_key = keys.log(moved)
        source = redis_cluster.node_of_key(log_key)
        target = next(n for n in redis_cluster.master_nodes() if n.port != source.port)
        redis_cluster.reshard(source, target, offset + 1)
        assert redis_cluster.node_of_key(log_key).port == target.port
        assert target.redis().exists(log_key) == 1
        time.sleep(2)
        sender.stop()
        missing = receiver.wait_for(sender.sent, timeout=60)
        time.sleep(1)  # a duplicate would come now
        receiver.stop()
        assert not missing, f"{len(missing)} of {len(sender.sent)} acknowledged sends lost"
        assert receiver.duplicates == 0
        assert len(sender.sent) > 600
    finally:
        stack.stop()


def _topic_with_a_partition_early_in_its_range(
    cluster: EmbeddedCluster, partitions: int
) -> tuple[str, TopicName, int]:
    """A topic one of whose partitions hashes to a slot among the first of its master's
    range (``redis-cli --cluster reshard`` moves a master's lowest slots first): the topic,
    that partition, and how many slots precede it in the range."""
    ranges = [
        (start, end) for start, end, *_ in cluster.nodes[0].redis().execute_command("CLUSTER SLOTS")
    ]
    best = None
    for number in range(5000):
        topic = f"persistent://acme/orders/moving{number}"
        for index in range(partitions):
            partition = TopicName.from_full(topic).partition(index)
            slot = key_slot(keys.log(partition).encode())
            start = next(s for s, e in ranges if s <= slot <= e)
            if best is None or slot - start < best[2]:
                best = (topic, partition, slot - start)
        if best is not None and best[2] < 20:
            break
    assert best is not None
    return best
