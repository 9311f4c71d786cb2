"""``resourcegroups`` and the ``set-|get-|remove-resource-group`` verbs of ``namespaces``,
``topics`` and ``tenants``, against the real admin server."""

from __future__ import annotations

from tests.bodies import UNLIMITED_GROUP as UNLIMITED


def test_resource_group_crud(ok, cli, namespace):
    assert ok("resourcegroups", "list").json == []
    assert ok("resourcegroups", "create", "rg1", "-md", "100").out == ""
    assert ok("resourcegroups", "get", "rg1").json == {**UNLIMITED, "dispatchRateInMsgs": 100}
    # update changes only the flags given
    ok("resourcegroups", "update", "rg1", "--msg-publish-rate", "5", "-bd", "1000")
    assert ok("resourcegroups", "get", "rg1").json == {
        **UNLIMITED,
        "dispatchRateInMsgs": 100,
        "publishRateInMsgs": 5,
        "dispatchRateInBytes": 1000,
    }
    dry = ok("resourcegroups", "update", "rg1", "-md", "7", "--dry-run").json
    assert dry["resourceGroup"]["dispatchRateInMsgs"] == 7
    assert ok("resourcegroups", "get", "rg1").json["dispatchRateInMsgs"] == 100
    assert ok("resourcegroups", "list").json == ["rg1"]
    missing = cli("resourcegroups", "get", "nope")
    assert missing.code == 1 and "ResourceGroup does not exist" in missing.err
    assert "(HTTP 404)" in missing.err
    ok("resourcegroups", "delete", "rg1")
    assert ok("resourcegroups", "list").json == []


def test_attach_verbs(ok, cli, topic, namespace):
    ok("resourcegroups", "create", "rg1", "-md", "10")
    ok("resourcegroups", "create", "rg2")
    unknown = cli("namespaces", "set-resource-group", namespace, "-rgn", "nope")
    assert unknown.code == 1 and "(HTTP 412)" in unknown.err
    ok("namespaces", "set-resource-group", namespace, "--resource-group-name", "rg1")
    assert ok("namespaces", "get-resource-group", namespace).out.strip() == "rg1"
    ok("topics", "set-resource-group", topic, "-rgn", "rg2", "--weight", "2")
    assert ok("topics", "get-resource-group", topic).out.strip() == "rg2"
    ok("tenants", "set-resource-group", "acme", "-rgn", "rg2")
    assert ok("tenants", "get-resource-group", "acme").out.strip() == "rg2"
    assert ok("resourcegroups", "attachments", "rg2").json == [
        {"level": "tenant", "name": "acme", "weight": 1},
        {"level": "topic", "name": topic, "weight": 2},
    ]
    in_use = cli("resourcegroups", "delete", "rg1")
    assert in_use.code == 1 and "(HTTP 409)" in in_use.err and namespace in in_use.err
    ok("topics", "remove-resource-group", topic)
    assert ok("topics", "get-resource-group", topic, "--applied").out.strip() == "rg1"
    ok("namespaces", "remove-resource-group", namespace)
    assert ok("namespaces", "get-resource-group", namespace).out.strip() in ("", "null")
    assert ok("topics", "get-resource-group", topic, "-ap").out.strip() == "rg2"
    ok("tenants", "remove-resource-group", "acme")
    ok("resourcegroups", "delete", "rg1")
