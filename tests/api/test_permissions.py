"""Pulsar's permission API over HTTP: grants of produce and consume on namespaces and topics."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest
from sqlalchemy import text

from api.app import create_app
from models.db import make_async_engine, make_session_factory
from models.permissions import Action, Grant, all_grants, allowed, grants_for_role
from tests.api.orders import not_found_reasons, ops_tenant
from tests.conftest import ServerThread

ADMIN = "/admin/v2"
NS = f"{ADMIN}/namespaces/acme/orders"
TOPIC = f"{ADMIN}/persistent/acme/orders/created"
PLAIN = f"{ADMIN}/persistent/acme/orders/plain"
FULL = "persistent://acme/orders/created"


@pytest.fixture
def world(http):
    """Tenant acme, namespace acme/orders, partitioned topic created (2), topic plain."""
    ops_tenant(http, NS)
    assert http.put(f"{TOPIC}/partitions", json=2).status_code == 204
    assert http.put(PLAIN).status_code == 204
    return http


def audit(http, **params) -> list[dict]:
    answer = http.get(f"{ADMIN}/audit", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def grants_in_db(db) -> int:
    with db.connect() as connection:
        return int(connection.execute(text("SELECT count(*) FROM permission_grants")).scalar_one())


def test_namespace_grant_read_replace_revoke(world):
    http = world
    assert http.get(f"{NS}/permissions").json() == {}
    answer = http.post(f"{NS}/permissions/app", json=["produce", "consume"])
    assert answer.status_code == 204, answer.text
    assert http.post(f"{NS}/permissions/reader", json=["consume"]).status_code == 204
    assert http.get(f"{NS}/permissions").json() == {
        "app": ["consume", "produce"],
        "reader": ["consume"],
    }
    # A grant replaces the role's actions, as in Pulsar.
    assert http.post(f"{NS}/permissions/app", json=["consume"]).status_code == 204
    assert http.get(f"{NS}/permissions").json()["app"] == ["consume"]
    # Duplicates collapse; an empty list is kept as Pulsar keeps it: the role, no action.
    assert http.post(f"{NS}/permissions/app", json=["produce", "produce"]).status_code == 204
    assert http.get(f"{NS}/permissions").json()["app"] == ["produce"]
    assert http.post(f"{NS}/permissions/idle", json=[]).status_code == 204
    assert http.get(f"{NS}/permissions").json()["idle"] == []
    assert http.delete(f"{NS}/permissions/app").status_code == 204
    assert http.delete(f"{NS}/permissions/idle").status_code == 204
    assert http.get(f"{NS}/permissions").json() == {"reader": ["consume"]}
    # Revoking a role without a namespace grant is not an error (Pulsar: 204).
    assert http.delete(f"{NS}/permissions/nobody").status_code == 204


def test_namespace_not_found_and_bad_names(world):
    http = world
    missing = f"{ADMIN}/namespaces/acme/missing/permissions"
    reasons = not_found_reasons(
        http,
        (
            ("GET", missing, None),
            ("POST", f"{missing}/app", ["produce"]),
            ("DELETE", f"{missing}/app", None),
            ("GET", f"{ADMIN}/namespaces/nope/orders/permissions", None),
        ),
    )
    assert set(reasons) == {"Namespace does not exist"}
    bad = http.get(f"{ADMIN}/namespaces/acme/bad name/permissions")
    assert bad.status_code == 412
    for role in ("...", "x" * 256, " padded", "%20"):
        answer = http.post(f"{NS}/permissions/{role}", json=["produce"])
        assert answer.status_code == 412, (role, answer.text)
        assert "Role name is not valid" in answer.json()["reason"]
    # A role is free text otherwise: a token's subject, an e-mail address, a wildcard.
    for role in ("ops@example.com", "my.role.*", "Ünïcode"):
        assert http.post(f"{NS}/permissions/{role}", json=["consume"]).status_code == 204
        assert http.get(f"{NS}/permissions").json()[role] == ["consume"]
    assert http.post(f"{NS}/permissions/{'r' * 255}", json=["consume"]).status_code == 204


def test_bad_bodies_are_refused_with_a_reason_and_change_nothing(world, db):
    http = world
    assert http.post(f"{NS}/permissions/app", json=["consume"]).status_code == 204
    assert http.post(f"{TOPIC}/permissions/app", json=["produce"]).status_code == 204
    before = (http.get(f"{NS}/permissions").json(), http.get(f"{TOPIC}/permissions").json())
    entries = len(audit(http))
    cases = [
        (["produce", "publish"], 400, "Unknown action 'publish'"),
        (["functions"], 400, "Action functions is not supported"),
        (["consume", "sinks"], 400, "Sluice grants produce and consume only"),
        (["sources"], 400, "not supported"),
        (["packages"], 400, "not supported"),
        (["Produce"], 400, "Unknown action 'Produce'"),
        ({"actions": ["produce"]}, 400, "must be a JSON list"),
        ("produce", 400, "must be a JSON list"),
        ([1], 400, "An action is a string"),
        ([None], 400, "An action is a string"),
        ([["produce"]], 400, "An action is a string"),
        (None, 400, "Request body is required"),
    ]
    for path in (f"{NS}/permissions/app", f"{TOPIC}/permissions/app"):
        for body, status, reason in cases:
            answer = http.post(path, json=body)
            assert answer.status_code == status, (body, answer.text)
            assert reason in answer.json()["reason"], (body, answer.text)
        raw = http.post(path, content=b"[produce]", headers={"Content-Type": "application/json"})
        assert raw.status_code == 400 and raw.json()["reason"]
        wrong_type = http.post(path, content=b'["produce"]', headers={"Content-Type": "text/plain"})
        assert wrong_type.status_code == 415
        dry = http.post(path, params={"dryRun": "maybe"}, json=["produce"])
        assert dry.status_code == 400 and "dryRun" in dry.json()["reason"]
    after = (http.get(f"{NS}/permissions").json(), http.get(f"{TOPIC}/permissions").json())
    assert after == before
    assert len(audit(http)) == entries
    assert grants_in_db(db) == 2


def test_topic_permissions_merge_with_the_namespace(world):
    http = world
    assert http.get(f"{TOPIC}/permissions").json() == {}
    http.post(f"{NS}/permissions/app", json=["consume"])
    http.post(f"{NS}/permissions/ns-only", json=["produce"])
    assert http.post(f"{TOPIC}/permissions/app", json=["produce"]).status_code == 204
    assert http.post(f"{TOPIC}/permissions/topic-only", json=["consume"]).status_code == 204
    expected = {
        "app": ["consume", "produce"],
        "ns-only": ["produce"],
        "topic-only": ["consume"],
    }
    assert http.get(f"{TOPIC}/permissions").json() == expected
    # A partition answers its partitioned topic's permissions.
    assert http.get(f"{TOPIC}-partition-1/permissions").json() == expected
    # The namespace shows its own grants only; the other topic inherits those.
    assert http.get(f"{NS}/permissions").json() == {"app": ["consume"], "ns-only": ["produce"]}
    assert http.get(f"{PLAIN}/permissions").json() == {"app": ["consume"], "ns-only": ["produce"]}
    # Replace at topic level.
    assert http.post(f"{TOPIC}/permissions/topic-only", json=["produce"]).status_code == 204
    assert http.get(f"{TOPIC}/permissions").json()["topic-only"] == ["produce"]


def test_a_grant_on_a_partition_is_the_partitioned_topics(world):
    http = world
    assert http.post(f"{TOPIC}-partition-0/permissions/app", json=["consume"]).status_code == 204
    assert http.get(f"{TOPIC}/permissions").json() == {"app": ["consume"]}
    assert http.get(f"{TOPIC}-partition-1/permissions").json() == {"app": ["consume"]}
    entry = audit(http, entityType="topic.permissions")[0]
    assert entry["entity"] == FULL
    assert http.delete(f"{TOPIC}-partition-1/permissions/app").status_code == 204
    assert http.get(f"{TOPIC}/permissions").json() == {}


def test_topic_must_exist(world):
    http = world
    missing = f"{ADMIN}/persistent/acme/orders/missing/permissions"
    requests = (
        ("GET", missing, None),
        ("POST", f"{missing}/app", ["produce"]),
        ("DELETE", f"{missing}/app", None),
        # Beyond the partition count.
        ("POST", f"{TOPIC}-partition-2/permissions/app", ["produce"]),
    )
    for reason in not_found_reasons(http, requests):
        assert re.fullmatch(r"Topic persistent://acme/orders/\S+ not found", reason), reason
    missing_ns = http.get(f"{ADMIN}/persistent/acme/gone/t/permissions")
    assert missing_ns.status_code == 404
    assert missing_ns.json()["reason"] == "Namespace does not exist"
    assert http.get(f"{ADMIN}/persistent/acme/orders/bad name/permissions").status_code == 412


def test_topic_revoke_needs_a_topic_level_grant(world):
    http = world
    http.post(f"{NS}/permissions/app", json=["produce", "consume"])
    entries = len(audit(http))
    for role in ("app", "nobody"):
        answer = http.delete(f"{TOPIC}/permissions/{role}")
        assert answer.status_code == 412, answer.text
        assert answer.json() == {"reason": "Permissions are not set at the topic level"}
    assert len(audit(http)) == entries
    assert http.get(f"{TOPIC}/permissions").json() == {"app": ["consume", "produce"]}
    http.post(f"{TOPIC}/permissions/app", json=["consume"])
    assert http.delete(f"{TOPIC}/permissions/app").status_code == 204
    # The namespace grant stays.
    assert http.get(f"{TOPIC}/permissions").json() == {"app": ["consume", "produce"]}
    assert http.delete(f"{TOPIC}/permissions/app").status_code == 412


def test_every_write_is_audited(world):
    http = world
    http.post(f"{NS}/permissions/app", json=["produce"], headers={"X-Request-Id": "grant-1"})
    http.post(f"{NS}/permissions/app", json=["consume", "produce"])
    http.delete(f"{NS}/permissions/app")
    http.delete(f"{NS}/permissions/app")  # nothing to revoke: nothing recorded
    entries = audit(http, entity="acme/orders", entityType="namespace.permissions")
    assert [e["action"] for e in entries] == ["delete", "update", "create"]
    delete, update, create = entries
    assert create["requestId"] == "grant-1"
    assert (create["before"], create["after"]) == (None, {"role": "app", "actions": ["produce"]})
    assert update["before"] == {"role": "app", "actions": ["produce"]}
    assert update["after"] == {"role": "app", "actions": ["consume", "produce"]}
    assert (delete["before"], delete["after"]) == (update["after"], None)
    http.post(f"{TOPIC}/permissions/app", json=["consume"])
    http.delete(f"{TOPIC}/permissions/app")
    topic_entries = audit(http, entity=FULL, entityType="topic.permissions")
    assert [e["action"] for e in topic_entries] == ["delete", "create"]


def test_change_events_have_their_own_kind(world, db):
    http = world
    http.post(f"{TOPIC}/permissions/app", json=["consume"])
    with db.connect() as connection:
        kind, entity, payload = connection.execute(
            text(
                "SELECT kind, entity, payload FROM outbox_events "
                "WHERE kind = 'permissions' ORDER BY id DESC LIMIT 1"
            )
        ).one()
    assert (kind, entity) == ("permissions", FULL)
    assert payload["grantee"] == "app"
    assert payload["level"] == "topic"
    assert payload["namespace"] == "acme/orders"
    assert payload["topic"] == FULL
    assert payload["action"] == "create"


def test_dry_run_reports_and_changes_nothing(world, db):
    http = world
    http.post(f"{NS}/permissions/app", json=["consume"])
    entries = len(audit(http))
    answer = http.post(f"{NS}/permissions/app", params={"dryRun": "true"}, json=["produce"])
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "dryRun": True,
        "changed": "acme/orders",
        "permissions": {"app": ["produce"]},
    }
    answer = http.post(f"{TOPIC}/permissions/t", params={"dryRun": "true"}, json=["produce"])
    assert answer.json() == {
        "dryRun": True,
        "changed": FULL,
        "permissions": {"app": ["consume"], "t": ["produce"]},
    }
    answer = http.delete(f"{NS}/permissions/app", params={"dryRun": "true"})
    assert answer.status_code == 200
    assert answer.json()["permissions"] == {}
    # A dry run refuses what the write would refuse.
    refused = http.delete(f"{TOPIC}/permissions/app", params={"dryRun": "true"})
    assert refused.status_code == 412
    assert http.get(f"{NS}/permissions").json() == {"app": ["consume"]}
    assert http.get(f"{TOPIC}/permissions").json() == {"app": ["consume"]}
    assert len(audit(http)) == entries
    assert grants_in_db(db) == 1


def test_namespace_policies_show_the_grants(world):
    http = world
    http.post(f"{NS}/permissions/app", json=["produce", "consume"])
    http.post(f"{TOPIC}/permissions/reader", json=["consume"])
    auth = http.get(NS).json()["auth_policies"]
    assert auth == {
        "namespace_auth": {"app": ["consume", "produce"]},
        "destination_auth": {FULL: {"reader": ["consume"]}},
        "subscription_auth_roles": {},
    }


def test_deleting_a_topic_namespace_or_tenant_removes_its_grants(world, db):
    http = world
    http.post(f"{NS}/permissions/app", json=["produce"])
    http.post(f"{TOPIC}/permissions/app", json=["consume"])
    http.post(f"{PLAIN}/permissions/other", json=["consume"])
    assert grants_in_db(db) == 3
    assert http.delete(f"{TOPIC}/partitions").status_code == 204
    assert grants_in_db(db) == 2
    # Created again, the topic starts without grants of its own.
    assert http.put(f"{TOPIC}/partitions", json=2).status_code == 204
    assert http.get(f"{TOPIC}/permissions").json() == {"app": ["produce"]}
    assert http.delete(PLAIN).status_code == 204
    assert grants_in_db(db) == 1
    assert http.post(f"{NS}/permissions/x", json=["consume"]).status_code == 204
    assert http.post(f"{TOPIC}/permissions/y", json=["consume"]).status_code == 204
    assert http.delete(f"{TOPIC}/partitions").status_code == 204
    assert http.delete(NS).status_code == 204
    assert grants_in_db(db) == 0
    # And with a tenant: its namespaces and their grants go with it.
    assert http.put(NS).status_code == 204
    assert http.post(f"{NS}/permissions/app", json=["produce"]).status_code == 204
    assert http.post(f"{ADMIN}/brokers/configuration/forceDeleteTenantAllowed/true").is_success
    assert http.post(f"{ADMIN}/brokers/configuration/forceDeleteNamespaceAllowed/true").is_success
    assert http.delete(f"{ADMIN}/tenants/acme", params={"force": "true"}).status_code == 204
    assert grants_in_db(db) == 0


def test_the_query_helpers_read_what_the_api_wrote(world, settings):
    http = world
    other_ns = f"{ADMIN}/namespaces/acme/billing"
    assert http.put(other_ns).status_code == 204
    http.post(f"{NS}/permissions/app", json=["consume"])
    http.post(f"{TOPIC}/permissions/app", json=["produce", "consume"])
    http.post(f"{other_ns}/permissions/app", json=[])
    http.post(f"{PLAIN}/permissions/reader", json=["consume"])

    async def read():
        engine = make_async_engine(settings.database_url)
        try:
            async with make_session_factory(engine)() as session:
                return await grants_for_role(session, "app"), await all_grants(session)
        finally:
            await engine.dispose()

    mine, everyone = asyncio.run(read())
    produce, consume = Action.PRODUCE, Action.CONSUME
    assert mine == [
        Grant("acme", "billing", None, frozenset()),
        Grant("acme", "orders", None, frozenset({consume})),
        Grant("acme", "orders", FULL, frozenset({produce, consume})),
    ]
    assert everyone == {
        "app": mine,
        "reader": [Grant("acme", "orders", "persistent://acme/orders/plain", frozenset({consume}))],
    }
    assert allowed(mine, f"{FULL}-partition-1", "produce")
    assert allowed(mine, "persistent://acme/orders/plain", "consume")
    assert not allowed(mine, "persistent://acme/orders/plain", "produce")
    assert not allowed(mine, "persistent://acme/billing/t", "consume")


class RecordingAcl:
    """Stands in for the data plane's credential manager: records each refresh, with the
    role's grants as a separate connection sees them then (committed or not at all)."""

    def __init__(self, db) -> None:
        self.db = db
        self.seen: list[tuple[str, int]] = []

    async def refresh_role(self, role: str) -> None:
        with self.db.connect() as connection:
            count = connection.execute(
                text("SELECT count(*) FROM permission_grants WHERE role = :role"), {"role": role}
            ).scalar_one()
        self.seen.append((role, int(count)))


@pytest.fixture
def acl_http(world, settings, db):
    """An admin server with a credential manager of its own (``AppState.dataplane_acl``)."""
    acl = RecordingAcl(db)
    app = create_app(settings, dataplane_acl=acl)
    server = ServerThread(app).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            yield client, acl
    finally:
        server.stop()


def test_the_credential_manager_hears_of_every_durable_change(acl_http):
    http, acl = acl_http
    assert http.post(f"{NS}/permissions/app", json=["produce"]).status_code == 204
    assert acl.seen == [("app", 1)]
    assert http.post(f"{TOPIC}/permissions/app", json=["consume"]).status_code == 204
    assert http.delete(f"{NS}/permissions/app").status_code == 204
    assert acl.seen == [("app", 1), ("app", 2), ("app", 1)]
    acl.seen.clear()
    # Dry runs and refusals change nothing and refresh nothing.
    assert http.post(f"{NS}/permissions/x", params={"dryRun": "true"}, json=[]).status_code == 200
    assert http.post(f"{NS}/permissions/x", json=["write"]).status_code == 400
    assert http.delete(f"{PLAIN}/permissions/app").status_code == 412
    assert http.delete(f"{NS}/permissions/nobody").status_code == 204  # nothing to revoke
    assert http.get(f"{TOPIC}/permissions").status_code == 200
    assert acl.seen == []
    # A deletion that takes grants with it refreshes their roles.
    assert http.post(f"{PLAIN}/permissions/reader", json=["consume"]).status_code == 204
    acl.seen.clear()
    assert http.delete(f"{TOPIC}/partitions").status_code == 204
    assert acl.seen == [("app", 0)]
    assert http.delete(PLAIN).status_code == 204
    assert acl.seen == [("app", 0), ("reader", 0)]
