"""Abuse-limit commands: pulsar-admin's verbs and flags, against the real admin server."""

from __future__ import annotations

import pytest

from tests.cli.conftest import applied_from_namespace
from tests.cli.parsing import parsing_test, usage_error_test

T = "persistent://t/ns/topic"

# pulsar-admin command lines (CmdNamespaces, CmdTopics, CmdTopicPolicies) and what they parse to.
PARITY = [
    ("namespaces set-max-topics-per-namespace t/ns -t 5", {"max_topics_per_namespace": 5}),
    (
        "namespaces set-max-topics-per-namespace t/ns --max-topics-per-namespace 5",
        {"max_topics_per_namespace": 5},
    ),
    ("namespaces get-max-topics-per-namespace t/ns", {"namespace": "t/ns"}),
    ("namespaces remove-max-topics-per-namespace t/ns", {"namespace": "t/ns"}),
    ("namespaces set-max-subscriptions-per-topic t/ns -m 3", {"max_subscriptions_per_topic": 3}),
    ("namespaces set-max-producers-per-topic t/ns -p 3", {"max_producers_per_topic": 3}),
    ("namespaces set-max-consumers-per-topic t/ns -c 3", {"max_consumers_per_topic": 3}),
    (
        "namespaces set-max-consumers-per-subscription t/ns --max-consumers-per-subscription 3",
        {"max_consumers_per_subscription": 3},
    ),
    (f"topics set-max-producers {T} -p 2", {"max_producers": 2}),
    (f"topics get-max-producers {T} -ap", {"applied": True}),
    (f"topics set-max-consumers {T} --max-consumers 2", {"max_consumers": 2}),
    (f"topics get-max-consumers {T} --applied", {"applied": True}),
    (f"topics set-max-subscriptions-per-topic {T} -s 4", {"max_subscriptions_per_topic": 4}),
    (f"topics set-max-consumers-per-subscription {T} -c 1", {"max_consumers_per_subscription": 1}),
    (f"topics set-max-message-size {T} -m 1024", {"max_message_size": 1024}),
    (f"topics remove-max-message-size {T}", {"topic": T}),
    (f"topicPolicies set-max-producers {T} -p 2 -g", {"max_producers": 2, "global_policy": True}),
    (f"topicPolicies get-max-consumers {T} -ap -g", {"applied": True, "global_policy": True}),
    (f"topicPolicies set-max-message-size {T} --max-message-size 9", {"max_message_size": 9}),
    (f"topicPolicies remove-max-subscriptions-per-topic {T} -g", {"global_policy": True}),
]


test_pulsar_admin_command_lines_parse = parsing_test(PARITY)


test_usage_errors = usage_error_test(
    [
        "namespaces set-max-topics-per-namespace t/ns",  # -t is required
        f"topics set-max-producers {T}",  # -p is required
        f"topics set-max-message-size {T} -m big",
        f"topics get-max-message-size {T} -ap",  # Pulsar's has no --applied
    ]
)


@pytest.mark.parametrize(
    ("suffix", "flag"),
    [
        ("max-topics-per-namespace", "-t"),
        ("max-subscriptions-per-topic", "-m"),
        ("max-producers-per-topic", "-p"),
        ("max-consumers-per-topic", "-c"),
        ("max-consumers-per-subscription", "-c"),
    ],
)
def test_namespace_limits(ok, cli, namespace, suffix, flag):
    assert ok("namespaces", f"get-{suffix}", namespace).out.strip() == "null"
    ok("namespaces", f"set-{suffix}", namespace, flag, "7")
    assert ok("namespaces", f"get-{suffix}", namespace).json == 7
    ok("namespaces", f"remove-{suffix}", namespace)
    assert ok("namespaces", f"get-{suffix}", namespace).out.strip() == "null"
    refused = cli("namespaces", f"set-{suffix}", namespace, flag, "-1")
    assert refused.code == 1
    assert "must be 0 or more (HTTP 412)" in refused.err


@pytest.mark.parametrize("group", ["topics", "topicPolicies"])
def test_topic_limits_and_applied(ok, cli, topic, group):
    namespace_set = ("set-max-producers-per-topic", "-p", "5")
    assert applied_from_namespace(ok, group, topic, namespace_set, "get-max-producers") == 5
    ok(group, "set-max-producers", topic, "-p", "2")
    assert ok(group, "get-max-producers", topic).json == 2
    ok(group, "set-max-consumers", topic, "-c", "3")
    assert ok(group, "get-max-consumers", topic, "--applied").json == 3
    ok(group, "set-max-subscriptions-per-topic", topic, "-s", "4")
    assert ok(group, "get-max-subscriptions-per-topic", topic).json == 4
    ok(group, "set-max-consumers-per-subscription", topic, "-c", "1")
    assert ok(group, "get-max-consumers-per-subscription", topic).json == 1
    ok(group, "set-max-message-size", topic, "-m", "1024")
    assert ok(group, "get-max-message-size", topic).json == 1024
    too_big = cli(group, "set-max-message-size", topic, "-m", "5242881")
    assert too_big.code == 1 and "smaller than that in the broker-level" in too_big.err
    ok(group, "remove-max-message-size", topic)
    assert ok(group, "get-max-message-size", topic).out.strip() == "null"
    dry = ok(group, "set-max-producers", topic, "-p", "9", "--dry-run").json
    assert dry["topics"][0]["flowControl"]["maxProducersPerTopic"] == {
        "value": 9,
        "source": "topic",
    }
    assert ok(group, "get-max-producers", topic).json == 2
    missing = cli(group, "set-max-producers", "persistent://acme/orders/missing", "-p", "1")
    assert missing.code == 1 and "404" in missing.err
