"""Topics over HTTP: partitioned and non-partitioned, listing, subscriptions."""

from __future__ import annotations

import pytest

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
