"""Tenants over HTTP: create, read, update, delete, with Pulsar's status codes."""

from __future__ import annotations

import pytest

INFO = {"adminRoles": ["ops"], "allowedClusters": ["standalone"]}


def test_lifecycle(http):
    assert http.get("/admin/v2/tenants").json() == []
    assert http.put("/admin/v2/tenants/acme", json=INFO).status_code == 204
    assert http.put("/admin/v2/tenants/beta", json=INFO).status_code == 204
    assert http.get("/admin/v2/tenants").json() == ["acme", "beta"]
    assert http.get("/admin/v2/tenants/acme").json() == INFO
    updated = {"adminRoles": ["ops", "dev"], "allowedClusters": ["standalone"]}
    assert http.post("/admin/v2/tenants/acme", json=updated).status_code == 204
    assert http.get("/admin/v2/tenants/acme").json() == updated
    assert http.delete("/admin/v2/tenants/acme").status_code == 204
    assert http.get("/admin/v2/tenants").json() == ["beta"]


def test_empty_body_means_no_roles_and_the_local_cluster(http):
    assert http.put("/admin/v2/tenants/acme").status_code == 204
    assert http.get("/admin/v2/tenants/acme").json() == {
        "adminRoles": [],
        "allowedClusters": ["standalone"],
    }


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/admin/v2/tenants/nope", 404),
        ("POST", "/admin/v2/tenants/nope", 404),
        ("DELETE", "/admin/v2/tenants/nope", 404),
    ],
)
def test_missing_tenant(http, method, path, status):
    answer = http.request(method, path, json=INFO if method == "POST" else None)
    assert answer.status_code == status
    assert answer.json()["reason"]


def test_conflicts_and_invalid_input(http):
    assert http.put("/admin/v2/tenants/acme", json=INFO).status_code == 204
    exists = http.put("/admin/v2/tenants/acme", json=INFO)
    assert exists.status_code == 409
    assert "exist" in exists.json()["reason"]
    bad_name = http.put("/admin/v2/tenants/bad%20name", json=INFO)
    assert (bad_name.status_code, bad_name.json()["reason"]) == (412, "Tenant name is not valid")
    empty = http.put("/admin/v2/tenants/t2", json={"allowedClusters": []})
    assert (empty.status_code, empty.json()["reason"]) == (412, "Clusters can not be empty")
    unknown = http.put("/admin/v2/tenants/t2", json={"allowedClusters": ["mars"]})
    assert (unknown.status_code, unknown.json()["reason"]) == (412, "Clusters do not exist")
    wrong_type = http.put("/admin/v2/tenants/t2", json={"adminRoles": "ops"})
    assert wrong_type.status_code == 400
    malformed = http.put(
        "/admin/v2/tenants/t2", content=b"{nope", headers={"Content-Type": "application/json"}
    )
    assert (malformed.status_code, malformed.json()["reason"]) == (400, "Malformed JSON body")
    # Nothing was created by any refused request.
    assert http.get("/admin/v2/tenants").json() == ["acme"]


def test_delete_non_empty_tenant_needs_force(http):
    assert http.put("/admin/v2/tenants/acme", json=INFO).status_code == 204
    assert http.put("/admin/v2/namespaces/acme/orders").status_code == 204
    assert http.put("/admin/v2/persistent/acme/orders/t", json={}).status_code == 204
    refused = http.delete("/admin/v2/tenants/acme")
    assert refused.status_code == 409
    assert http.get("/admin/v2/namespaces/acme").json() == ["acme/orders"]
    assert http.delete("/admin/v2/tenants/acme", params={"force": "True"}).status_code == 204
    assert http.get("/admin/v2/tenants").json() == []
    # Force-deletion can be switched off as in Pulsar (405).
    assert http.put("/admin/v2/tenants/acme", json=INFO).status_code == 204
    assert (
        http.post("/admin/v2/brokers/configuration/forceDeleteTenantAllowed/false").status_code
        == 204
    )
    assert http.delete("/admin/v2/tenants/acme", params={"force": "true"}).status_code == 405


def test_whoami_without_authentication(http):
    assert http.put("/admin/v2/tenants/beta", json={"adminRoles": ["ops"]}).status_code == 204
    assert http.put("/admin/v2/tenants/alpha", json={}).status_code == 204
    assert http.get("/admin/v2/whoami").json() == {
        "role": None,
        "superUser": True,  # everyone may do everything with authorization off
        "authenticationEnabled": False,
        "authorizationEnabled": False,
        "tenants": ["alpha", "beta"],
    }
