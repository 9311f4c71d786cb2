"""``tenants`` and ``namespaces`` commands: happy paths and the main errors."""

from __future__ import annotations


def test_tenant_lifecycle(ok, cli):
    assert ok("tenants", "list").json == []
    assert ok("tenants", "create", "acme", "-r", "alice,bob", "-c", "standalone").out == ""
    assert ok("tenants", "list").json == ["acme"]
    info = ok("tenants", "get", "acme").json
    assert info["adminRoles"] == ["alice", "bob"]
    assert info["allowedClusters"] == ["standalone"]
    ok("tenants", "update", "acme", "--admin-roles", "carol")
    assert ok("tenants", "get", "acme").json["adminRoles"] == ["carol"]
    ok("tenants", "delete", "acme")
    assert ok("tenants", "list").json == []


def test_tenant_errors(cli, ok):
    missing = cli("tenants", "get", "nope")
    assert missing.code == 1
    assert missing.out == ""
    assert "(HTTP 404)" in missing.err
    assert missing.err.startswith("sluice-admin: ")
    ok("tenants", "create", "acme")
    again = cli("tenants", "create", "acme")
    assert again.code == 1 and "409" in again.err
    assert cli("tenants", "create", "bad name!").code == 1
    assert cli("tenants", "update", "nope").code == 1


def test_tenant_delete_needs_force_when_not_empty(cli, ok, namespace):
    busy = cli("tenants", "delete", "acme")
    assert busy.code == 1 and "409" in busy.err
    ok("tenants", "delete", "acme", "-f")
    assert ok("tenants", "list").json == []


def test_namespace_lifecycle(ok, cli):
    ok("tenants", "create", "acme")
    ok("namespaces", "create", "acme/orders", "--clusters", "standalone", "--bundles", "4")
    assert ok("namespaces", "list", "acme").json == ["acme/orders"]
    policies = ok("namespaces", "policies", "acme/orders").json
    assert isinstance(policies, dict)
    ok("topics", "create", "acme/orders/t1")
    assert ok("namespaces", "topics", "acme/orders").json == ["persistent://acme/orders/t1"]
    busy = cli("namespaces", "delete", "acme/orders")
    assert busy.code == 1 and "409" in busy.err
    ok("namespaces", "delete", "acme/orders", "--force")
    assert ok("namespaces", "list", "acme").json == []


def test_namespace_errors(cli, ok):
    assert "404" in cli("namespaces", "list", "nope").err
    assert "404" in cli("namespaces", "create", "nope/ns").err
    bad = cli("namespaces", "create", "just-one-part")
    assert bad.code == 1
    assert "expected <tenant>/<namespace>" in bad.err
    ok("tenants", "create", "acme")
    ok("namespaces", "create", "acme/orders")
    assert "409" in cli("namespaces", "create", "acme/orders").err
    assert "404" in cli("namespaces", "policies", "acme/missing").err
    assert "404" in cli("namespaces", "delete", "acme/missing").err
