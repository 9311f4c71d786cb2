"""The namespace and topic the admin API's policy tests share: ``acme/orders`` and its
partitioned topic ``created``, made over HTTP."""

from __future__ import annotations

import httpx

NS = "/admin/v2/namespaces/acme/orders"
PERSISTENT = "/admin/v2/persistent/acme/orders"
TOPIC = f"{PERSISTENT}/created"
CONFIG = "/admin/v2/brokers/configuration"


def create_topic(http: httpx.Client, partitions: int = 2) -> httpx.Client:
    """Tenant ``acme``, namespace ``acme/orders`` and topic ``created`` with ``partitions``;
    returns ``http``."""
    tenant = http.put("/admin/v2/tenants/acme", json={"allowedClusters": ["standalone"]})
    assert tenant.status_code == 204
    assert http.put(NS).status_code == 204
    assert http.put(f"{TOPIC}/partitions", json=partitions).status_code == 204
    return http


def ops_tenant(http: httpx.Client, *namespaces: str) -> httpx.Client:
    """Tenant ``acme`` (admin role ``ops``) and the namespaces at the admin paths
    ``namespaces``; returns ``http``."""
    tenant = {"adminRoles": ["ops"], "allowedClusters": ["standalone"]}
    assert http.put("/admin/v2/tenants/acme", json=tenant).status_code == 204
    for path in namespaces:
        assert http.put(path).status_code == 204
    return http


def not_found_reasons(http: httpx.Client, requests) -> list[str]:
    """Every (method, path, JSON body) of ``requests`` answers 404; the reasons given."""
    reasons = []
    for method, path, body in requests:
        answer = http.request(method, path, json=body)
        assert answer.status_code == 404, (method, path, answer.text)
        reasons.append(answer.json()["reason"])
    return reasons


def assert_namespace_dry_run(http: httpx.Client, policy: str, value: object) -> None:
    """A dry run of setting the namespace's ``policy`` to ``value`` answers the topic's
    would-be flow control (``policy`` from the namespace) and stores nothing."""
    answer = http.post(f"{NS}/{policy}", params={"dryRun": "true"}, json=value)
    assert answer.status_code == 200
    body = answer.json()
    assert body["dryRun"] is True and body["changed"] == "acme/orders"
    [doc] = body["topics"]
    assert doc["topic"] == "persistent://acme/orders/created"
    assert doc["flowControl"][policy] == {"value": value, "source": "namespace"}
    assert http.get(f"{NS}/{policy}").json() is None
