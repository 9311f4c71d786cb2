"""Namespaces over HTTP: create, list, policies, topics, guarded delete."""

from __future__ import annotations


def make_tenant(http, name="acme"):
    assert (
        http.put(f"/admin/v2/tenants/{name}", json={"allowedClusters": ["standalone"]}).status_code
        == 204
    )


def test_lifecycle(http):
    make_tenant(http)
    assert http.get("/admin/v2/namespaces/acme").json() == []
    assert http.put("/admin/v2/namespaces/acme/orders").status_code == 204
    assert (
        http.put(
            "/admin/v2/namespaces/acme/billing", json={"replication_clusters": ["standalone"]}
        ).status_code
        == 204
    )
    assert http.get("/admin/v2/namespaces/acme").json() == ["acme/billing", "acme/orders"]
    policies = http.get("/admin/v2/namespaces/acme/orders").json()
    assert policies["replication_clusters"] == ["standalone"]
    assert policies["topicDispatchRate"] == {}
    assert http.get("/admin/v2/namespaces/acme/orders/topics").json() == []
    assert http.delete("/admin/v2/namespaces/acme/orders").status_code == 204
    assert http.get("/admin/v2/namespaces/acme").json() == ["acme/billing"]


def test_policies_show_dispatch_rates_per_cluster(http):
    make_tenant(http)
    http.put("/admin/v2/namespaces/acme/orders")
    rate = {
        "dispatchThrottlingRateInMsg": 10,
        "dispatchThrottlingRateInByte": -1,
        "relativeToPublishRate": False,
        "ratePeriodInSecond": 1,
    }
    assert http.post("/admin/v2/namespaces/acme/orders/dispatchRate", json=rate).status_code == 204
    policies = http.get("/admin/v2/namespaces/acme/orders").json()
    assert policies["topicDispatchRate"] == {"standalone": rate}
    assert policies["clusterDispatchRate"] == {"standalone": rate}
    assert policies["subscriptionDispatchRate"] == {}


def test_errors(http):
    missing_tenant = http.put("/admin/v2/namespaces/nope/orders")
    assert missing_tenant.status_code == 404
    make_tenant(http)
    assert http.put("/admin/v2/namespaces/acme/orders").status_code == 204
    exists = http.put("/admin/v2/namespaces/acme/orders")
    assert (exists.status_code, exists.json()["reason"]) == (409, "Namespace already exists")
    bad = http.put("/admin/v2/namespaces/acme/bad%20name")
    assert (bad.status_code, bad.json()["reason"]) == (412, "Namespace name is not valid")
    assert http.get("/admin/v2/namespaces/acme/nope").status_code == 404
    assert http.delete("/admin/v2/namespaces/acme/nope").status_code == 404
    assert http.get("/admin/v2/namespaces/nope").status_code == 404
    assert http.get("/admin/v2/namespaces/acme/nope/topics").status_code == 404
    other = http.put("/admin/v2/namespaces/acme/x", json={"replication_clusters": ["mars"]})
    assert other.status_code == 412


def test_delete_non_empty_namespace(http):
    make_tenant(http)
    http.put("/admin/v2/namespaces/acme/orders")
    assert (
        http.put("/admin/v2/persistent/acme/orders/created/partitions", json=2).status_code == 204
    )
    refused = http.delete("/admin/v2/namespaces/acme/orders")
    assert (refused.status_code, refused.json()["reason"]) == (
        409,
        "Cannot delete non empty namespace",
    )
    assert http.get("/admin/v2/namespaces/acme/orders/topics").json() == [
        "persistent://acme/orders/created-partition-0",
        "persistent://acme/orders/created-partition-1",
    ]
    assert (
        http.delete("/admin/v2/namespaces/acme/orders", params={"force": "true"}).status_code == 204
    )
    assert http.get("/admin/v2/namespaces/acme").json() == []


def test_forced_deletion_can_be_switched_off(http):
    make_tenant(http)
    assert http.put("/admin/v2/namespaces/acme/orders").status_code == 204
    setting = "/admin/v2/brokers/configuration/forceDeleteNamespaceAllowed"
    assert http.post(f"{setting}/false").status_code == 204
    refused = http.delete("/admin/v2/namespaces/acme/orders", params={"force": "true"})
    assert (refused.status_code, refused.json()["reason"]) == (
        405,
        "Broker doesn't allow forced deletion of namespaces",
    )
    assert http.get("/admin/v2/namespaces/acme").json() == ["acme/orders"]
    assert http.delete("/admin/v2/namespaces/acme/orders").status_code == 204
