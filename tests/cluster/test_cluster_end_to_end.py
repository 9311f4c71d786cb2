"""Sluice on a 3-master Redis Cluster, end to end, through the public surface only.

Real processes: ``sluice migrate`` and ``sluice api`` on a SQLite file, two ``sluice worker``
processes and the ``sluice`` client, each given ``REDIS_URL`` naming one node of the cluster
(no other setting: cluster mode is detected).  One test walks what an operator expects:

* a 6-partition topic's keys land on all three masters;
* ``GET .../{topic}/lookup`` names the owner of every partition, both workers among them;
* a namespace dispatch rate holds exactly per partition: by T seconds after the
  subscription exists at most LIMIT x (floor(T) + 1) messages of a partition have arrived
  (T taken from just before ``subscribe``, arrivals when ``receive`` returns: both loosen the
  measurement only, so the bound has no tolerance), and a backlogged partition gets at least
  LIMIT x (floor(T) - 1) by then (a generous floor: a worker pass or two of lag);
* a worker killed with SIGKILL loses nothing: every message sent is received and
  acknowledged, the survivor takes its partitions over.
"""

from __future__ import annotations

import math
import signal
import time
from collections import Counter

import httpx
import pytest

import sluice
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.cluster.processes import AdminProcess
from tests.fleet import Fleet, with_signal
from tests.workers.conftest import ADMIN, rate, wait_until

LIMIT = 20
PARTITIONS = 6
TOPIC = "persistent://acme/orders/created"

pytestmark = pytest.mark.cluster


def test_a_partitioned_topic_on_a_cluster_end_to_end(redis_cluster, tmp_path):
    admin = AdminProcess(tmp_path, redis_cluster.url).start()
    fleet = Fleet(
        None, tmp_path, redis_url=redis_cluster.url, database_url=admin.env["DATABASE_URL"]
    )
    client = None
    try:
        fleet.start("w1")
        fleet.start("w2")
        http = httpx.Client(base_url=admin.url, timeout=30)
        tenant = {"allowedClusters": ["standalone"]}
        assert http.put(f"{ADMIN}/tenants/acme", json=tenant).status_code == 204
        assert http.put(f"{ADMIN}/namespaces/acme/orders").status_code == 204
        path = f"{ADMIN}/persistent/acme/orders/created"
        assert http.put(f"{path}/partitions", json=PARTITIONS).status_code == 204
        assert (
            http.post(f"{ADMIN}/namespaces/acme/orders/dispatchRate", json=rate(LIMIT)).status_code
            == 204
        )

        # Ownership: every partition owned, by both workers between them.
        owners = wait_until(lambda: fleet.settled(TOPIC, PARTITIONS, {"w1", "w2"}), timeout=30)
        assert set(owners.values()) == {"w1", "w2"}
        lookup = wait_until(lambda: _lookup(http, path), timeout=15)
        assert {a["brokerUrl"].removeprefix("sluice://") for a in lookup.values()} == {"w1", "w2"}

        client = sluice.Client(redis_cluster.url)
        origin = time.monotonic()
        consumer = client.subscribe(TOPIC, "audit", consumer_type=sluice.ConsumerType.Shared)
        producer = client.create_producer(TOPIC, batching_enabled=False)
        per_partition = LIMIT * 6
        sent = [f"m{i}".encode() for i in range(per_partition * PARTITIONS)]
        for payload in sent:  # round robin: the same number on every partition
            producer.send(payload)

        # The partitions' keys are on all three masters.
        masters = {n.port for n in redis_cluster.master_nodes()}
        homes = set()
        for index in range(PARTITIONS):
            partition = TopicName.from_full(TOPIC).partition(index)
            node = redis_cluster.node_of_key(keys.log(partition))
            assert node.redis().exists(keys.log(partition)) == 1
            homes.add(node.port)
        assert homes == masters

        # Exact throttling per partition under the namespace rate.
        arrivals: dict[int, list[float]] = {i: [] for i in range(PARTITIONS)}
        received: Counter[bytes] = Counter()
        while time.monotonic() - origin < 4.5:
            try:
                message = consumer.receive(timeout_millis=100)
            except sluice.Timeout:
                continue
            arrivals[message.message_id().partition()].append(time.monotonic() - origin)
            received[message.data()] += 1
            consumer.acknowledge(message)
        elapsed = time.monotonic() - origin
        for index, times in arrivals.items():
            worst = max(
                (n - LIMIT * (math.floor(at) + 1) for n, at in enumerate(sorted(times), 1)),
                default=0,
            )
            assert worst <= 0, f"partition {index} over its limit by {worst}: {sorted(times)}"
            floor = LIMIT * (math.floor(elapsed) - 1)
            assert len(times) >= floor, f"partition {index}: {len(times)} < {floor}"

        # Kill a worker: nothing is lost, the survivor takes everything over.
        with_signal(fleet.processes["w1"], signal.SIGKILL)
        fleet.processes["w1"].wait(10)
        wait_until(lambda: fleet.settled(TOPIC, PARTITIONS, {"w2"}), timeout=30, every=0.1)
        deadline = time.monotonic() + 60
        while len(received) < len(sent) and time.monotonic() < deadline:
            try:
                message = consumer.receive(timeout_millis=200)
            except sluice.Timeout:
                continue
            received[message.data()] += 1
            consumer.acknowledge(message)
        missing = set(sent) - set(received)
        assert not missing, f"{len(missing)} messages lost, e.g. {sorted(missing)[:5]}"
        lookup = wait_until(lambda: _lookup(http, path), timeout=15)
        assert {a["brokerUrl"] for a in lookup.values()} == {"sluice://w2"}
    finally:
        if client is not None:
            client.close()
        fleet.stop_all()
        admin.stop()


def _lookup(http: httpx.Client, path: str) -> dict | None:
    """The partitioned lookup once every partition has a live owner."""
    response = http.get(f"{path}/lookup")
    if response.status_code != 200:
        return None
    answers = response.json()
    if len(answers) != PARTITIONS or any(not a.get("brokerUrl") for a in answers.values()):
        return None
    return answers
