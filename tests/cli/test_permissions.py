"""``grant-permission``, ``permissions`` and ``revoke-permission`` under ``namespaces`` and
``topics``, against the real admin server."""

from __future__ import annotations


def test_namespace_permissions(ok, cli, namespace):
    assert ok("namespaces", "permissions", namespace).json == {}
    out = ok(
        "namespaces", "grant-permission", namespace, "--role", "app", "--actions", "produce,consume"
    ).out
    assert out == ""
    ok("namespaces", "grant-permission", namespace, "--role", "reader", "--actions", "consume")
    assert ok("namespaces", "permissions", namespace).json == {
        "app": ["consume", "produce"],
        "reader": ["consume"],
    }
    # A grant replaces the role's actions.
    ok("namespaces", "grant-permission", namespace, "--role", "app", "--actions", "consume")
    assert ok("namespaces", "permissions", namespace).json["app"] == ["consume"]
    dry = ok("namespaces", "revoke-permission", namespace, "--role", "app", "--dry-run").json
    assert dry == {"dryRun": True, "changed": namespace, "permissions": {"reader": ["consume"]}}
    assert "app" in ok("namespaces", "permissions", namespace).json
    assert ok("namespaces", "revoke-permission", namespace, "--role", "app").out == ""
    assert ok("namespaces", "permissions", namespace).json == {"reader": ["consume"]}


def test_topic_permissions(ok, cli, topic, namespace):
    ok("namespaces", "grant-permission", namespace, "--role", "app", "--actions", "consume")
    ok("topics", "grant-permission", topic, "--role", "app", "--actions", "produce")
    ok("topics", "grant-permission", topic, "-r", "writer", "-a", "produce")
    expected = {"app": ["consume", "produce"], "writer": ["produce"]}
    assert ok("topics", "permissions", topic).json == expected
    assert ok("topics", "permissions", f"{topic}-partition-1").json == expected
    dry = ok("topics", "grant-permission", topic, "-r", "x", "-a", "consume", "--dry-run").json
    assert dry["dryRun"] is True and dry["permissions"]["x"] == ["consume"]
    assert "x" not in ok("topics", "permissions", topic).json
    ok("topics", "revoke-permission", topic, "--role", "app")
    assert ok("topics", "permissions", topic).json["app"] == ["consume"]
    # The role's grant is on the namespace only now: Pulsar's 412.
    refused = cli("topics", "revoke-permission", topic, "-r", "app")
    assert refused.code == 1
    assert "Permissions are not set at the topic level" in refused.err
    assert "(HTTP 412)" in refused.err


def test_permission_errors(cli, ok, namespace):
    unknown = cli("namespaces", "grant-permission", namespace, "--role", "a", "--actions", "write")
    assert unknown.code == 1 and "Unknown action 'write'" in unknown.err
    functions = cli(
        "namespaces", "grant-permission", namespace, "--role", "a", "--actions", "consume,functions"
    )
    assert functions.code == 1
    assert "Sluice grants produce and consume only" in functions.err
    assert ok("namespaces", "permissions", namespace).json == {}
    missing = cli("topics", "permissions", "persistent://acme/orders/none")
    assert missing.code == 1 and "(HTTP 404)" in missing.err
    assert "404" in cli("namespaces", "permissions", "acme/none").err
    bad_role = cli("namespaces", "revoke-permission", namespace, "--role", "..")
    assert bad_role.code == 1 and "(HTTP 412)" in bad_role.err


def test_dot_names_are_sent_as_names_not_dot_segments(cli, ok, topic, namespace):
    for name in (".", ".."):
        refused = cli("namespaces", "revoke-permission", namespace, "--role", name)
        assert refused.code == 1 and "(HTTP 412)" in refused.err, refused
        refused = cli("topics", "unsubscribe", topic, "-s", name)  # not the topic's DELETE
        assert refused.code == 1 and f"Subscription {name} not found" in refused.err, refused
    assert ok("namespaces", "list", "acme").json == [namespace]
    assert ok("topics", "subscriptions", topic).json == ["s1"]


def test_subscription_permissions(ok, cli, namespace):
    assert ok("namespaces", "subscription-permission", namespace).json == {}
    out = ok(
        "namespaces",
        "grant-subscription-permission",
        namespace,
        "--subscription",
        "payroll",
        "--roles",
        "billing,audit",
    ).out
    assert out == ""
    ok("namespaces", "grant-subscription-permission", namespace, "-s", "other", "-rs", "ops")
    assert ok("namespaces", "subscription-permission", namespace).json == {
        "other": ["ops"],
        "payroll": ["audit", "billing"],
    }
    dry = ok(
        "namespaces",
        "revoke-subscription-permission",
        namespace,
        "-s",
        "payroll",
        "-r",
        "audit",
        "--dry-run",
    ).json
    assert dry["dryRun"] is True and dry["permissions"]["payroll"] == ["billing"]
    revoke = ("namespaces", "revoke-subscription-permission", namespace)
    assert ok(*revoke, "--subscription", "payroll", "--role", "audit").out == ""
    assert ok("namespaces", "subscription-permission", namespace).json["payroll"] == ["billing"]
    # The namespace's produce/consume grants are another list.
    assert ok("namespaces", "permissions", namespace).json == {}
    missing = cli(*revoke, "-s", "unlisted", "-r", "audit")
    assert missing.code == 1 and "(HTTP 404)" in missing.err
    assert "Subscription unlisted has no permissions set" in missing.err
    bad_role = cli("namespaces", "grant-subscription-permission", namespace, "-s", "x", "-rs", "..")
    assert bad_role.code == 1 and "(HTTP 412)" in bad_role.err
    assert "x" not in ok("namespaces", "subscription-permission", namespace).json
