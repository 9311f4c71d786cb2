"""Delayed-delivery policy commands: pulsar-admin's verbs and flags (``-e``/``-d``, ``-t``,
``-md``), against the real admin server."""

from __future__ import annotations

import pytest

from tests.cli.parsing import parsing_test, usage_error_test

T = "persistent://t/ns/topic"

# pulsar-admin command lines (CmdNamespaces, CmdTopics, CmdTopicPolicies) and what they parse to.
PARITY = [
    (
        "namespaces set-delayed-delivery t/ns --enable --time 2s --maxDelay 1m",
        {"namespace": "t/ns", "enable": True, "disable": False, "time": 2, "max_delay": 60},
    ),
    ("namespaces set-delayed-delivery t/ns -e", {"enable": True, "time": 1, "max_delay": 0}),
    ("namespaces set-delayed-delivery t/ns -d -t 10", {"disable": True, "time": 10}),
    ("namespaces get-delayed-delivery t/ns", {"namespace": "t/ns"}),
    ("namespaces remove-delayed-delivery t/ns", {"namespace": "t/ns", "dry_run": False}),
    (f"topics set-delayed-delivery {T} -e -t 1m -md 1h", {"time": 60, "max_delay": 3600}),
    (f"topics get-delayed-delivery {T} -ap", {"topic": T, "applied": True}),
    (f"topics remove-delayed-delivery {T}", {"topic": T}),
    (f"topicPolicies set-delayed-delivery {T} -d -g", {"disable": True, "global_policy": True}),
    (f"topicPolicies get-delayed-delivery {T} --applied", {"applied": True}),
    (f"topicPolicies remove-delayed-delivery {T} -g", {"global_policy": True}),
]

test_pulsar_admin_command_lines_parse = parsing_test(PARITY)

test_usage_errors = usage_error_test(
    [
        "namespaces set-delayed-delivery t/ns",  # neither --enable nor --disable
        "namespaces set-delayed-delivery t/ns -e -d",  # both
        "namespaces set-delayed-delivery t/ns -e -t soon",
        "namespaces get-delayed-delivery t/ns -ap",  # no --applied at the namespace level
        f"topics set-delayed-delivery {T} -e -md -5",
    ]
)


def test_namespace_delayed_delivery(ok, cli, namespace):
    assert ok("namespaces", "get-delayed-delivery", namespace).out.strip() == "null"
    ok("namespaces", "set-delayed-delivery", namespace, "-e", "-t", "2s", "-md", "1m")
    assert ok("namespaces", "get-delayed-delivery", namespace).json == {
        "tickTime": 2000,
        "active": True,
        "maxDeliveryDelayInMillis": 60_000,
    }
    ok("namespaces", "set-delayed-delivery", namespace, "--disable")
    assert ok("namespaces", "get-delayed-delivery", namespace).json == {
        "tickTime": 1000,
        "active": False,
        "maxDeliveryDelayInMillis": 0,
    }
    ok("namespaces", "remove-delayed-delivery", namespace)
    assert ok("namespaces", "get-delayed-delivery", namespace).out.strip() == "null"


@pytest.mark.parametrize("group", ["topics", "topicPolicies"])
def test_topic_delayed_delivery_applied(ok, cli, topic, group):
    assert ok(group, "get-delayed-delivery", topic).out.strip() == "null"
    assert ok(group, "get-delayed-delivery", topic, "-ap").json == {
        "tickTime": 1000,
        "active": True,
        "maxDeliveryDelayInMillis": 0,
    }
    ok("namespaces", "set-delayed-delivery", "acme/orders", "-d")
    assert ok(group, "get-delayed-delivery", topic, "-ap").json["active"] is False
    ok(group, "set-delayed-delivery", topic, "-e", "-md", "30s")
    assert ok(group, "get-delayed-delivery", topic, "-ap").json == {
        "tickTime": 1000,
        "active": True,
        "maxDeliveryDelayInMillis": 30_000,
    }
    ok(group, "remove-delayed-delivery", topic)
    assert ok(group, "get-delayed-delivery", topic, "-ap").json["active"] is False
    missing = cli(group, "set-delayed-delivery", "persistent://acme/orders/missing", "-e")
    assert missing.code == 1 and "404" in missing.err
