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
