"""Pulsar's subscription permissions over HTTP: the roles that may use a subscription name."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tests.api.orders import not_found_reasons, ops_tenant
from tests.api.test_permissions import ADMIN, NS, audit

SUBS = f"{NS}/permissions/subscription"


@pytest.fixture
def world(http):
    """Tenant acme (admin role ops), namespace acme/orders."""
    return ops_tenant(http, NS)


def rows_in_db(db) -> int:
    with db.connect() as connection:
        query = text("SELECT count(*) FROM subscription_permissions")
        return int(connection.execute(query).scalar_one())


def test_grant_read_replace_revoke(world, db):
    http = world
    assert http.get(SUBS).json() == {}
    answer = http.post(f"{SUBS}/billing-sub", json=["billing", "audit", "billing"])
    assert answer.status_code == 204, answer.text
    assert http.post(f"{SUBS}/other", json=["ops-reader"]).status_code == 204
    assert http.get(SUBS).json() == {"billing-sub": ["audit", "billing"], "other": ["ops-reader"]}
    # A grant replaces the list, as Pulsar's does.
    assert http.post(f"{SUBS}/billing-sub", json=["audit"]).status_code == 204
    assert http.get(SUBS).json()["billing-sub"] == ["audit"]
    # Revoking a role takes it out; the list may become empty (which restricts nothing).
    assert http.delete(f"{NS}/permissions/billing-sub/audit").status_code == 204
    assert http.get(SUBS).json()["billing-sub"] == []
    # A role not in the list: nothing to take out, not an error.
    assert http.delete(f"{NS}/permissions/other/nobody").status_code == 204
    assert http.get(SUBS).json()["other"] == ["ops-reader"]
    # The namespace's policies show them as Pulsar's auth_policies do.
    auth = http.get(NS).json()["auth_policies"]
    assert auth["subscription_auth_roles"] == {"billing-sub": [], "other": ["ops-reader"]}
    assert rows_in_db(db) == 2
    # The namespace's produce/consume grants are not touched.
    assert http.get(f"{NS}/permissions").json() == {}


def test_revoke_on_a_subscription_without_a_list_is_404(world):
    http = world
    entries = len(audit(http))
    answer = http.delete(f"{NS}/permissions/unlisted/app")
    assert answer.status_code == 404
    assert answer.json() == {"reason": "Subscription unlisted has no permissions set"}
    assert len(audit(http)) == entries


def test_missing_namespace_and_bad_input_change_nothing(world, db):
    http = world
    missing = f"{ADMIN}/namespaces/acme/missing/permissions"
    requests = (
        ("GET", f"{missing}/subscription", None),
        ("POST", f"{missing}/subscription/s", ["app"]),
        ("DELETE", f"{missing}/s/app", None),
        ("GET", f"{ADMIN}/namespaces/nope/orders/permissions/subscription", None),
    )
    assert all(not_found_reasons(http, requests))
    assert http.post(f"{SUBS}/s", json=["app"]).status_code == 204
    entries = len(audit(http))
    cases = [
        (None, 400, "Request body is required"),
        ({"roles": ["app"]}, 400, "must be a JSON list of roles"),
        ("app", 400, "must be a JSON list of roles"),
        ([1], 400, "A role is a string"),
        ([["app"]], 400, "A role is a string"),
        (["ok", " padded "], 412, "Role name is not valid"),
        ([""], 412, "Role name is not valid"),
        (["a\x01b"], 412, "Role name is not valid"),
    ]
    for body, status, reason in cases:
        answer = http.post(f"{SUBS}/s", json=body)
        assert answer.status_code == status, (body, answer.text)
        assert reason in answer.json()["reason"], (body, answer.text)
    assert http.post(f"{SUBS}/a%01b", json=["app"]).status_code == 412
    assert http.delete(f"{NS}/permissions/s/%20x").status_code == 412
    dry = http.post(f"{SUBS}/s", params={"dryRun": "maybe"}, json=["x"])
    assert dry.status_code == 400 and "dryRun" in dry.json()["reason"]
    assert http.get(SUBS).json() == {"s": ["app"]}
    assert len(audit(http)) == entries
    assert rows_in_db(db) == 1


def test_writes_are_audited_with_a_permissions_event(world, db):
    http = world
    assert http.post(f"{SUBS}/s", json=["a", "b"]).status_code == 204
    assert http.delete(f"{NS}/permissions/s/a").status_code == 204
    entries = audit(http, entityType="namespace.subscriptionPermissions")
    assert [(e["entity"], e["before"], e["after"]) for e in entries] == [
        (
            "acme/orders#s",
            {"subscription": "s", "roles": ["a", "b"]},
            {"subscription": "s", "roles": ["b"]},
        ),
        ("acme/orders#s", None, {"subscription": "s", "roles": ["a", "b"]}),
    ]
    with db.connect() as connection:
        kinds = connection.execute(
            text("SELECT kind, payload FROM outbox_events ORDER BY id DESC LIMIT 1")
        ).one()
    assert kinds[0] == "permissions"
    assert kinds[1]["subscription"] == "s" and kinds[1]["namespace"] == "acme/orders"


def test_dry_run_reports_and_changes_nothing(world):
    http = world
    assert http.post(f"{SUBS}/s", json=["a"]).status_code == 204
    entries = len(audit(http))
    answer = http.post(f"{SUBS}/s", params={"dryRun": "true"}, json=["b"])
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"dryRun": True, "changed": "acme/orders", "permissions": {"s": ["b"]}}
    answer = http.delete(f"{NS}/permissions/s/a", params={"dryRun": "true"})
    assert answer.status_code == 200 and answer.json()["permissions"] == {"s": []}
    assert http.get(SUBS).json() == {"s": ["a"]}
    assert len(audit(http)) == entries


def test_deleting_the_namespace_removes_its_lists(world, db):
    http = world
    assert http.post(f"{SUBS}/s", json=["a"]).status_code == 204
    assert http.delete(NS).status_code == 204, http.get(
        f"{ADMIN}/namespaces/acme/orders/topics"
    ).text
    assert rows_in_db(db) == 0
