"""Backlog-quota commands: pulsar-admin's ``set-backlog-quota``, ``get-backlog-quotas`` and
``remove-backlog-quota``, with Sluice's ``lowest_priority_eviction`` policy and
``-lm/--limitMessages``, against the real admin server."""

from __future__ import annotations

import pytest

from tests.cli.parsing import parsing_test, usage_error_test

T = "persistent://t/ns/topic"

PARITY = [
    (
        "namespaces set-backlog-quota t/ns -l 2G -lt 1h -p producer_request_hold",
        {"limit": 2 * 1024**3, "limit_time": 3600, "policy": "producer_request_hold"},
    ),
    (
        "namespaces set-backlog-quota t/ns --limit 10M --policy producer_exception "
        "--type destination_storage",
        {"limit": 10 * 1024**2, "policy": "producer_exception", "type": "destination_storage"},
    ),
    (
        f"topics set-backlog-quota {T} -lm 100 -p lowest_priority_eviction",
        {"limit_messages": 100, "policy": "lowest_priority_eviction"},
    ),
    (
        f"topics set-backlog-quota {T} -lt 30 -p producer_exception -t message_age",
        {"type": "message_age"},
    ),
    ("namespaces get-backlog-quotas t/ns", {"namespace": "t/ns"}),
    (f"topics get-backlog-quotas {T} -ap", {"applied": True}),
    (f"topics remove-backlog-quota {T} -t message_age", {"type": "message_age"}),
    (
        f"topicPolicies set-backlog-quota {T} -l 1024 -p producer_exception -g",
        {"global_policy": True},
    ),
]

test_pulsar_admin_command_lines_parse = parsing_test(PARITY)

test_usage_errors = usage_error_test(
    [
        "namespaces set-backlog-quota t/ns -l 10M",  # -p is required
        f"topics set-backlog-quota {T} -l ten -p producer_exception",
        f"topics set-backlog-quota {T} -lt soon -p producer_exception",
    ]
)


@pytest.mark.parametrize("group", ["topics", "topicPolicies"])
def test_topic_quota_with_lowest_priority_eviction(ok, cli, topic, group):
    ok(group, "set-backlog-quota", topic, "-lm", "10", "-p", "lowest_priority_eviction")
    quota = ok(group, "get-backlog-quotas", topic).json["destination_storage"]
    assert quota["limitMessages"] == 10
    assert quota["policy"] == "lowest_priority_eviction"
    ok(group, "remove-backlog-quota", topic)
    assert "destination_storage" not in ok(group, "get-backlog-quotas", topic).json
    refused = cli(group, "set-backlog-quota", topic, "-lm", "10", "-p", "lowest_first")
    assert refused.code == 1
    assert "lowest_priority_eviction" in refused.err


def test_namespace_quota(ok, cli, namespace):
    ok("namespaces", "set-backlog-quota", namespace, "-l", "10M", "-p", "lowest_priority_eviction")
    quota = ok("namespaces", "get-backlog-quotas", namespace).json["destination_storage"]
    assert quota["limitSize"] == 10 * 1024**2
    assert quota["policy"] == "lowest_priority_eviction"
    ok(
        "namespaces",
        "set-backlog-quota",
        namespace,
        "-lt",
        "5m",
        "-p",
        "producer_exception",
        "-t",
        "message_age",
    )
    assert ok("namespaces", "get-backlog-quotas", namespace).json["message_age"]["limitTime"] == 300
    ok("namespaces", "remove-backlog-quota", namespace, "-t", "message_age")
    assert "message_age" not in ok("namespaces", "get-backlog-quotas", namespace).json
