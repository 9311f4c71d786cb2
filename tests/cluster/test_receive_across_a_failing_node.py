"""A cluster consumer's pops of several masters, one of which dies in the middle: what the
others gave is still received.

On a Redis Cluster a consumer empties the receiver queues of its partitions with one pipeline
over every master that holds one.  A pop is final: a notice taken off a queue exists nowhere
else.  Here the master of one partition is paused (``CLIENT PAUSE ... WRITE``: its pop waits)
and then SIGKILLed while the pipeline waits for it, after another master has already answered
its pop with a notice.  The message that notice names must arrive; it is pending to this live
consumer, so nothing else would ever deliver it.  Real processes: ``sluice api``, two
``sluice worker``\\ s, the client, on a 3-master cluster of the test's own.
"""

from __future__ import annotations

import threading
import time

import pytest

import sluice
from server.embedded_cluster import EmbeddedCluster
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.cluster.test_cluster_faults import Stack
from tests.workers.conftest import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.faults]

TOPIC = "persistent://acme/orders/failing-node"
PARTITIONS = 6


def test_a_master_dying_mid_pipeline_costs_no_other_masters_notice(tmp_path):
    cluster = EmbeddedCluster(tmp_path / "cluster", masters=3).start()
    stack = Stack(cluster, tmp_path)
    try:
        client = stack.start(TOPIC, PARTITIONS)
        base = TopicName.from_full(TOPIC)
        nodes = {i: cluster.node_of_key(keys.log(base.partition(i))) for i in range(PARTITIONS)}
        sent_to = 0
        dying = next(n for n in nodes.values() if n.port != nodes[sent_to].port)
        consumer = client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
        producer = client.create_producer(base.partition(sent_to).full)
        producer.send(b"one")
        queues = keys.sub_prefix(base.partition(sent_to), "sub") + "q:*"
        owner = nodes[sent_to].redis()
        wait_until(lambda: any(owner.llen(q) for q in owner.scan_iter(match=queues)), timeout=10)

        dying.redis().execute_command("CLIENT", "PAUSE", 10_000, "WRITE")
        received: list[bytes] = []
        errors: list[BaseException] = []

        def receive() -> None:
            try:
                received.append(consumer.receive(timeout_millis=20_000).data())
            except BaseException as exc:  # reported by the assertion below
                errors.append(exc)

        receiving = threading.Thread(target=receive, daemon=True)
        receiving.start()
        # The pipeline's pop on the live master has answered; the paused one holds its pop.
        wait_until(lambda: not any(owner.llen(q) for q in owner.scan_iter(match=queues)))
        time.sleep(0.2)
        cluster.kill(dying)
        time.sleep(3)
        cluster.restart(dying)  # empty, with its slots: the cluster is whole again
        receiving.join(30)
        assert received == [b"one"], errors
    finally:
        stack.stop()
        cluster.stop()
