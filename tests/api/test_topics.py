"""Topics over HTTP: partitioned and non-partitioned, listing, subscriptions."""

from __future__ import annotations

import pytest
import redis

from sluice.protocol import keys
from sluice.protocol.names import TopicName

BASE = "/admin/v2/persistent/acme/orders"


@pytest.fixture
def ns(http):
    assert (
        http.put("/admin/v2/tenants/acme", json={"allowedClusters": ["standalone"]}).status_code
        == 204
    )
    assert http.put("/admin/v2/namespaces/acme/orders").status_code == 204
    return http


def test_partitioned_lifecycle(ns):
    http = ns
    assert http.put(f"{BASE}/created/partitions", json=4).status_code == 204
    assert http.get(f"{BASE}/created/partitions").json() == {"partitions": 4}
    assert http.get(f"{BASE}/partitioned").json() == ["persistent://acme/orders/created"]
    assert len(http.get(BASE).json()) == 4
    assert http.post(f"{BASE}/created/partitions", json=6).status_code == 204
    assert http.get(f"{BASE}/created/partitions").json() == {"partitions": 6}
    assert http.get(BASE).json()[-1] == "persistent://acme/orders/created-partition-5"
    assert http.delete(f"{BASE}/created/partitions").status_code == 204
    assert http.get(BASE).json() == []


def test_non_partitioned_lifecycle(ns):
    http = ns
    assert http.put(f"{BASE}/plain").status_code == 204
    assert http.get(BASE).json() == ["persistent://acme/orders/plain"]
    assert http.get(f"{BASE}/plain/partitions").json() == {"partitions": 0}
    assert http.get(f"{BASE}/partitioned").json() == []
    assert http.delete(f"{BASE}/plain").status_code == 204
    assert http.get(BASE).json() == []


@pytest.mark.parametrize("count", [0, -1])
def test_bad_partition_counts_are_406(ns, count):
    answer = ns.put(f"{BASE}/t/partitions", json=count)
    assert answer.status_code == 406
    assert ns.get(BASE).json() == []


def test_partition_body_must_be_an_integer(ns):
    assert ns.put(f"{BASE}/t/partitions", json="4").status_code == 400
    assert ns.put(f"{BASE}/t/partitions", content=b"4").status_code in (400, 415)
    assert ns.put(f"{BASE}/t/partitions").status_code == 400


def test_conflicts(ns):
    http = ns
    assert http.put(f"{BASE}/p/partitions", json=2).status_code == 204
    assert http.put(f"{BASE}/p/partitions", json=2).status_code == 409
    assert http.put(f"{BASE}/p").status_code == 409
    assert http.put(f"{BASE}/n").status_code == 204
    assert http.put(f"{BASE}/n/partitions", json=2).status_code == 409
    assert http.put(f"{BASE}/p-partition-1").status_code == 409
    assert http.put(f"{BASE}/x-partition-1/partitions", json=2).status_code == 412
    # Shrinking or growing a non-partitioned topic is refused.
    assert http.post(f"{BASE}/p/partitions", json=1).status_code == 409
    assert http.post(f"{BASE}/n/partitions", json=4).status_code == 404


def test_not_found(ns):
    http = ns
    assert http.delete(f"{BASE}/nope").status_code == 404
    assert http.delete(f"{BASE}/nope/partitions").status_code == 404
    assert http.get(f"{BASE}/nope/subscriptions").status_code == 404
    assert http.put("/admin/v2/persistent/acme/nope/t").status_code == 404
    assert http.get("/admin/v2/persistent/acme/nope").status_code == 404
    assert http.put(f"{BASE}/bad%20name").status_code == 412


def test_max_partitions_setting(ns):
    http = ns
    assert (
        http.post(
            "/admin/v2/brokers/configuration/maxNumPartitionsPerPartitionedTopic/3"
        ).status_code
        == 204
    )
    assert http.put(f"{BASE}/t/partitions", json=4).status_code == 406
    assert http.put(f"{BASE}/t/partitions", json=3).status_code == 204


def test_subscriptions(ns):
    http = ns
    assert http.put(f"{BASE}/created/partitions", json=2).status_code == 204
    assert http.put(f"{BASE}/created/subscription/audit").status_code == 204
    assert http.put(f"{BASE}/created/subscription/billing").status_code == 204
    assert http.put(f"{BASE}/created/subscription/audit").status_code == 409
    assert http.get(f"{BASE}/created/subscriptions").json() == ["audit", "billing"]
    # A partition answers for its topic.
    assert http.get(f"{BASE}/created-partition-1/subscriptions").json() == ["audit", "billing"]
    assert http.delete(f"{BASE}/created/subscription/audit").status_code == 204
    assert http.delete(f"{BASE}/created/subscription/audit").status_code == 404
    assert http.get(f"{BASE}/created/subscriptions").json() == ["billing"]


def test_partition_count_is_bounded_by_default(ns):
    http = ns
    config = "/admin/v2/brokers/configuration"
    assert http.get(f"{config}/runtime").json()["maxNumPartitionsPerPartitionedTopic"] == "1000"
    huge = http.put(f"{BASE}/huge/partitions", json=1_000_000_000)
    assert huge.status_code == 406
    assert "maxNumPartitionsPerPartitionedTopic (1000)" in huge.json()["reason"]
    assert http.put(f"{BASE}/huge/partitions", json=1001).status_code == 406
    assert http.get(BASE).json() == []
    # Pulsar's 0 (unlimited) and anything past the hard bound are refused, with the range.
    for value in (0, 10_001, 2**40):
        answer = http.post(f"{config}/maxNumPartitionsPerPartitionedTopic/{value}")
        assert answer.status_code == 412
        assert "from 1 to 10000" in answer.json()["reason"]
    assert http.get(f"{config}/values").json() == {}


@pytest.fixture
def redis_client(redis_server):
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


def test_many_partitions_are_handled_in_batches(ns, redis_client):
    # More partitions than one pipelined batch carries: every partition is reached.
    http = ns
    assert http.put(f"{BASE}/wide/partitions", json=600).status_code == 204
    assert http.put(f"{BASE}/wide/subscription/audit").status_code == 204
    last = TopicName.from_full("persistent://acme/orders/wide").partition(599)
    assert redis_client.sismember(keys.subs(last), "audit")
    stats = http.get(f"{BASE}/wide/partitioned-stats?perPartition=true").json()
    assert stats["metadata"] == {"partitions": 600}
    assert all("audit" in doc["subscriptions"] for doc in stats["partitions"].values())
    # ``stats`` of a partitioned topic answers the totals, as Pulsar does.
    totals = http.get(f"{BASE}/wide/stats").json()
    assert totals["metadata"] == {"partitions": 600}
    assert set(totals["subscriptions"]) == {"audit"}
    assert totals["partitions"] == {}
    assert len(http.get(f"{BASE}/wide/lookup").json()) == 600
    assert http.delete(f"{BASE}/wide/subscription/audit").status_code == 204
    assert not redis_client.sismember(f"{last}:subs", "audit")
    assert http.put(f"{BASE}/wide/subscription/billing").status_code == 204
    assert http.delete(f"{BASE}/wide/partitions").status_code == 204
    # Clients stop at once; the workers drop the partitions' data (tests/workers).
    assert not redis_client.hexists(keys.TOPICS, "persistent://acme/orders/wide")
