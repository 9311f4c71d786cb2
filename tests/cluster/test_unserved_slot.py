"""A slot no node serves for a moment (between a master's loss and its replica's promotion, a
slot table has a hole): dispatch of the partitions in it resumes by itself once it is served
again, a send meanwhile waits (within its send timeout) instead of failing, and nothing
acknowledged is lost.

Made on purpose here: every node forgets the slot of partition 0 (``CLUSTER DELSLOTS``, with
``cluster-require-full-coverage no`` so the other slots go on) for a few seconds, less than the
workers' lease TTL (raised for this test, so the worker keeps partition 0 throughout and no
fencing restarts its dispatch), then its master claims it again (``CLUSTER ADDSLOTS``; the keys
never left it).  redis-py's cluster
client meets the hole as ``SlotNotCoveredError``, which is not a ``RedisError``: a worker loop
that retried only ``RedisError`` ended there, and the partition stayed silent for good while
its worker kept the lease (seen in a chaos soak: entries in the log, not pending, not
dispatched 120 s after the limit was lifted).
"""

from __future__ import annotations

import time

import pytest
from redis.cluster import key_slot

from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.cluster.test_cluster_faults import Stack
from tests.cluster.traffic import Receiver, Sender
from tests.workers.conftest import ADMIN, rate, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.faults]

TOPIC = "persistent://acme/orders/unserved"
PARTITIONS = 3
LIMIT = 40
HOLE_SECONDS = 3.0
LEASE_TTL = 10.0  # beyond the hole: the worker keeps partition 0 throughout


def test_dispatch_resumes_after_a_slot_was_served_by_no_node(redis_cluster, tmp_path):
    stack = Stack(redis_cluster, tmp_path)
    stack.fleet.env["SLUICE_WORKER_LEASE_TTL_SECONDS"] = str(LEASE_TTL)
    nodes = redis_cluster.running()
    try:
        client = stack.start(TOPIC, PARTITIONS)
        namespace_rate = f"{ADMIN}/namespaces/acme/orders/dispatchRate"
        assert stack.http.post(namespace_rate, json=rate(LIMIT)).status_code == 204
        receiver = Receiver(client, TOPIC)
        sender = Sender(client, TOPIC, per_second=PARTITIONS * LIMIT * 3 // 2).start()
        wait_until(lambda: len(receiver.arrivals.get(0, [])) > LIMIT, timeout=15, every=0.1)

        log_key = keys.log(TopicName.from_full(TOPIC).partition(0))
        slot = key_slot(log_key.encode())
        owner = redis_cluster.node_of_key(log_key)
        for node in nodes:
            node.redis().config_set("cluster-require-full-coverage", "no")
        for node in nodes:
            node.redis().execute_command("CLUSTER DELSLOTS", slot)
        time.sleep(HOLE_SECONDS)
        owner.redis().execute_command("CLUSTER ADDSLOTS", slot)
        wait_until(
            lambda: all(_serves(node, slot, owner.port) for node in nodes), timeout=10, every=0.05
        )
        restored_at = time.monotonic() - receiver.origin
        time.sleep(3)
        sender.stop()

        after = [at for at in receiver.arrivals.get(0, []) if at > restored_at]
        assert len(after) >= LIMIT, (
            f"partition 0 dispatched {len(after)} in the 3 s after its slot was served again"
        )
        assert stack.http.delete(namespace_rate).status_code == 204
        missing = receiver.wait_for(sender.sent, timeout=60)
        receiver.stop()
        assert not missing, f"{len(missing)} of {len(sender.sent)} acknowledged sends lost"
        assert sender.failed == 0, f"{sender.failed} sends failed instead of waiting"
    finally:
        for node in nodes:
            node.redis().config_set("cluster-require-full-coverage", "yes")
        stack.stop()


def _serves(node, slot: int, port: int) -> bool:
    """Whether ``node``'s slot table gives ``slot`` to the master on ``port``."""
    for start, end, master, *_ in node.redis().execute_command("CLUSTER SLOTS"):
        if start <= slot <= end:
            return int(master[1]) == port
    return False
