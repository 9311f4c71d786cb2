"""Resource groups over HTTP: Pulsar's CRUD (codes, partial update), attaching tenants,
namespaces and topics, the precedence of the group in force, delete-in-use, dry run, audit."""

from __future__ import annotations

import pytest

from tests.api.orders import ops_tenant
from tests.bodies import UNLIMITED_GROUP as UNLIMITED

ADMIN = "/admin/v2"
GROUPS = f"{ADMIN}/resourcegroups"
NS = f"{ADMIN}/namespaces/acme/orders"
OTHER_NS = f"{ADMIN}/namespaces/acme/billing"
TOPIC = f"{ADMIN}/persistent/acme/orders/created"


@pytest.fixture
def world(http):
    """Tenant acme with namespaces orders and billing, a partitioned topic created (2)."""
    ops_tenant(http, NS, OTHER_NS)
    assert http.put(f"{TOPIC}/partitions", json=2).status_code == 204
    return http


def test_create_get_list_and_partial_update(world) -> None:
    http = world
    assert http.get(GROUPS).json() == []
    assert http.put(f"{GROUPS}/rg1", json={"dispatchRateInMsgs": 100}).status_code == 204
    assert http.get(f"{GROUPS}/rg1").json() == {**UNLIMITED, "dispatchRateInMsgs": 100}
    # Only the fields sent change (the old CLI bug, PR #13543, does not exist here).
    assert http.put(f"{GROUPS}/rg1", json={"publishRateInMsgs": 7}).status_code == 204
    assert http.get(f"{GROUPS}/rg1").json() == {
        **UNLIMITED,
        "dispatchRateInMsgs": 100,
        "publishRateInMsgs": 7,
    }
    # null = not sent; -1 resets to unlimited.
    body = {"publishRateInMsgs": None, "dispatchRateInMsgs": -1}
    assert http.put(f"{GROUPS}/rg1", json=body).status_code == 204
    assert http.get(f"{GROUPS}/rg1").json() == {**UNLIMITED, "publishRateInMsgs": 7}
    assert http.put(f"{GROUPS}/rg0", json={}).status_code == 204
    assert http.get(GROUPS).json() == ["rg0", "rg1"]


def test_refusals_change_nothing(world) -> None:
    http = world
    assert http.put(f"{GROUPS}/rg1", json={"dispatchRateInMsgs": 5}).status_code == 204
    for body in (
        [1],
        "x",
        {"dispatchRateInMsgs": "many"},
        {"nope": 1},
        {"dispatchRateInMsgs": 1.5},
    ):
        answer = http.put(f"{GROUPS}/rg1", json=body)
        assert answer.status_code == 400, (body, answer.text)
        assert answer.json()["reason"]
    assert http.put(f"{GROUPS}/rg1").status_code in (400, 412)
    assert http.get(f"{GROUPS}/rg1").json()["dispatchRateInMsgs"] == 5
    assert http.put(f"{GROUPS}/bad%20name", json={}).status_code == 412
    missing = http.get(f"{GROUPS}/nope")
    assert missing.status_code == 404
    assert missing.json() == {"reason": "ResourceGroup does not exist"}
    gone = http.delete(f"{GROUPS}/nope")
    assert gone.status_code == 404
    assert gone.json() == {"reason": "ResourceGroup does not exist"}


def test_namespace_attach_detach_and_codes(world) -> None:
    http = world
    assert http.get(f"{NS}/resourcegroup").json() is None
    unknown = http.post(f"{NS}/resourcegroup/nope")
    assert unknown.status_code == 412
    assert unknown.json() == {"reason": "ResourceGroup does not exist"}
    assert http.post(f"{ADMIN}/namespaces/acme/none/resourcegroup/rg1").status_code == 404
    assert http.put(f"{GROUPS}/rg1", json={"dispatchRateInMsgs": 100}).status_code == 204
    assert http.post(f"{NS}/resourcegroup/rg1").status_code == 204
    assert http.get(f"{NS}/resourcegroup").json() == "rg1"
    assert http.post(f"{NS}/resourcegroup/rg1", params={"weight": 0}).status_code == 412
    assert http.post(f"{NS}/resourcegroup/rg1", params={"weight": 3}).status_code == 204
    members = http.get(f"{GROUPS}/rg1/attachments").json()
    assert members == [{"level": "namespace", "name": "acme/orders", "weight": 3}]
    assert http.delete(f"{NS}/resourcegroup").status_code == 204
    assert http.get(f"{NS}/resourcegroup").json() is None
    assert http.delete(f"{NS}/resourcegroup").status_code == 204  # nothing attached: 204


def test_topic_attach_overrides_namespace_and_tenant(world) -> None:
    http = world
    for name in ("ns-rg", "topic-rg", "tenant-rg"):
        assert http.put(f"{GROUPS}/{name}", json={"dispatchRateInMsgs": 10}).status_code == 204
    unknown = http.post(f"{TOPIC}/resourceGroup", json="nope")
    assert unknown.status_code == 404  # Pulsar's answer on a topic (412 on a namespace)
    assert unknown.json() == {"reason": "ResourceGroup does not exist"}
    applied = f"{TOPIC}/resourceGroup"
    assert http.get(applied, params={"applied": "true"}).json() is None
    assert http.post(f"{ADMIN}/tenants/acme/resourcegroup/tenant-rg").status_code == 204
    assert http.get(f"{ADMIN}/tenants/acme/resourcegroup").json() == "tenant-rg"
    assert http.get(applied, params={"applied": "true"}).json() == "tenant-rg"
    assert http.post(f"{NS}/resourcegroup/ns-rg").status_code == 204
    assert http.get(applied, params={"applied": "true"}).json() == "ns-rg"
    assert http.post(applied, json="topic-rg").status_code == 204
    assert http.get(applied).json() == "topic-rg"
    assert http.get(applied, params={"applied": "true"}).json() == "topic-rg"
    # A partition's group is its partitioned topic's.
    partition = f"{ADMIN}/persistent/acme/orders/created-partition-1/resourceGroup"
    assert http.get(partition).json() == "topic-rg"
    # null removes the topic's own group (as Pulsar's removeResourceGroup); DELETE too.
    assert (
        http.post(
            applied, content=b"null", headers={"Content-Type": "application/json"}
        ).status_code
        == 204
    )
    assert http.get(applied).json() is None
    assert http.get(applied, params={"applied": "true"}).json() == "ns-rg"
    assert http.post(applied, json="topic-rg").status_code == 204
    assert http.delete(applied).status_code == 204
    assert http.delete(f"{NS}/resourcegroup").status_code == 204
    assert http.get(applied, params={"applied": "true"}).json() == "tenant-rg"
    assert http.delete(f"{ADMIN}/tenants/acme/resourcegroup").status_code == 204
    assert http.get(applied, params={"applied": "true"}).json() is None


def test_delete_in_use_names_every_user(world) -> None:
    http = world
    assert http.put(f"{GROUPS}/rg1", json={}).status_code == 204
    assert http.post(f"{ADMIN}/tenants/acme/resourcegroup/rg1").status_code == 204
    assert http.post(f"{NS}/resourcegroup/rg1").status_code == 204
    assert http.post(f"{TOPIC}/resourceGroup", json="rg1").status_code == 204
    answer = http.delete(f"{GROUPS}/rg1")
    assert answer.status_code == 409
    reason = answer.json()["reason"]
    assert reason.startswith("ResourceGroup is in use by ")
    for user in ("tenant acme", "namespace acme/orders", "topic persistent://acme/orders/created"):
        assert user in reason
    for detach in (
        f"{ADMIN}/tenants/acme/resourcegroup",
        f"{NS}/resourcegroup",
        f"{TOPIC}/resourceGroup",
    ):
        assert http.get(f"{GROUPS}/rg1").status_code == 200
        assert http.delete(f"{GROUPS}/rg1").status_code == 409
        assert http.delete(detach).status_code == 204
    assert http.delete(f"{GROUPS}/rg1").status_code == 204
    assert http.get(f"{GROUPS}/rg1").status_code == 404


def test_deleting_a_namespace_frees_its_group(world) -> None:
    http = world
    assert http.put(f"{GROUPS}/rg1", json={}).status_code == 204
    assert http.post(f"{OTHER_NS}/resourcegroup/rg1").status_code == 204
    assert http.delete(OTHER_NS).status_code == 204
    assert http.delete(f"{GROUPS}/rg1").status_code == 204


def test_dry_run_and_audit(world) -> None:
    http = world
    answer = http.put(f"{GROUPS}/rg1", params={"dryRun": "true"}, json={"dispatchRateInMsgs": 9})
    assert answer.status_code == 200
    assert answer.json()["resourceGroup"]["dispatchRateInMsgs"] == 9
    assert http.get(f"{GROUPS}/rg1").status_code == 404
    assert http.put(f"{GROUPS}/rg1", json={"dispatchRateInMsgs": 9}).status_code == 204
    dry = http.post(f"{NS}/resourcegroup/rg1", params={"dryRun": "true", "weight": 2})
    assert dry.status_code == 200
    assert dry.json() == {
        "dryRun": True,
        "changed": "acme/orders",
        "resourceGroup": "rg1",
        "weight": 2,
    }
    assert http.get(f"{NS}/resourcegroup").json() is None
    assert http.post(f"{NS}/resourcegroup/rg1").status_code == 204
    entries = http.get(f"{ADMIN}/audit").json()
    kinds = [(e["entityType"], e["entity"], e["action"]) for e in entries]
    assert ("resourcegroup", "rg1", "create") in kinds
    assert ("namespace.resourcegroup", "acme/orders", "create") in kinds


def test_provenance_names_the_group_when_it_binds(world) -> None:
    http = world
    assert http.put(f"{GROUPS}/rg1", json={"dispatchRateInMsgs": 10}).status_code == 204
    assert http.post(f"{NS}/resourcegroup/rg1", params={"weight": 2}).status_code == 204
    document = http.get(f"{TOPIC}/effectiveDispatchRates").json()
    assert document["resourceGroup"] == {
        "name": "rg1",
        "level": "namespace",
        "member": "acme/orders",
        "weight": 2,
        "dispatchRateInMsgs": 10,
        "dispatchRateInBytes": -1,
        "appliesPer": "group",
    }
    assert document["effective"]["msgLimiter"] == "resourceGroup"
    assert document["effective"]["msgPerSecond"] == 10
    rate = {"dispatchThrottlingRateInMsg": 5, "dispatchThrottlingRateInByte": -1}
    assert http.post(f"{NS}/dispatchRate", json=rate).status_code == 204
    document = http.get(f"{TOPIC}/effectiveDispatchRates").json()
    assert document["effective"]["msgLimiter"] == "topic"  # the lowest wins
    assert document["effective"]["msgPerSecond"] == 5
    assert http.delete(f"{NS}/resourcegroup").status_code == 204
    assert http.get(f"{TOPIC}/effectiveDispatchRates").json()["resourceGroup"] is None
