"""Publish- and subscribe-rate commands: pulsar-admin's verbs and flags, against the real
admin server."""

from __future__ import annotations

import pytest

from tests.cli.conftest import applied_from_namespace
from tests.cli.parsing import parsing_test, usage_error_test

T = "persistent://t/ns/topic"
NO_PUBLISH = {"publishThrottlingRateInMsg": -1, "publishThrottlingRateInByte": -1}

# pulsar-admin command lines (CmdNamespaces, CmdTopics, CmdTopicPolicies) and what they parse to.
PARITY = [
    (
        "namespaces set-publish-rate t/ns -m 100 -b 1048576",
        {"namespace": "t/ns", "msg_publish_rate": 100, "byte_publish_rate": 1048576},
    ),
    (
        "namespaces set-publish-rate t/ns --msg-publish-rate 5 --byte-publish-rate 7",
        {"msg_publish_rate": 5, "byte_publish_rate": 7},
    ),
    ("namespaces set-publish-rate t/ns", {"msg_publish_rate": -1, "byte_publish_rate": -1}),
    ("namespaces get-publish-rate t/ns", {"namespace": "t/ns"}),
    ("namespaces remove-publish-rate t/ns", {"namespace": "t/ns", "dry_run": False}),
    (
        "namespaces set-subscribe-rate t/ns -sr 10 -st 60",
        {"subscribe_rate": 10, "subscribe_rate_period": 60},
    ),
    (
        "namespaces set-subscribe-rate t/ns --subscribe-rate 3 --subscribe-rate-period 5",
        {"subscribe_rate": 3, "subscribe_rate_period": 5},
    ),
    ("namespaces set-subscribe-rate t/ns", {"subscribe_rate": -1, "subscribe_rate_period": 30}),
    ("namespaces get-subscribe-rate t/ns", {"namespace": "t/ns"}),
    ("namespaces remove-subscribe-rate t/ns", {"namespace": "t/ns"}),
    (f"topics set-publish-rate {T} -m 10", {"topic": T, "msg_publish_rate": 10}),
    (f"topics get-publish-rate {T}", {"topic": T}),
    (f"topics remove-publish-rate {T}", {"topic": T}),
    (f"topics set-subscribe-rate {T} -sr 2 -st 1", {"subscribe_rate": 2}),
    (f"topics get-subscribe-rate {T} -ap", {"applied": True}),
    (f"topics remove-subscribe-rate {T}", {"topic": T}),
    (
        f"topicPolicies set-publish-rate {T} -m 1 -b 2 -g",
        {"msg_publish_rate": 1, "byte_publish_rate": 2, "global_policy": True},
    ),
    (f"topicPolicies get-publish-rate {T} --global", {"global_policy": True}),
    (f"topicPolicies remove-publish-rate {T} -g", {"global_policy": True}),
    (
        f"topicPolicies set-subscribe-rate {T} --subscribe-rate 4 -st 9 -g",
        {"subscribe_rate": 4, "subscribe_rate_period": 9, "global_policy": True},
    ),
    (f"topicPolicies get-subscribe-rate {T} --applied -g", {"applied": True}),
    (f"topicPolicies remove-subscribe-rate {T}", {"global_policy": False}),
]


test_pulsar_admin_command_lines_parse = parsing_test(PARITY)


test_usage_errors = usage_error_test(
    [
        "namespaces set-publish-rate t/ns -m many",
        "namespaces get-subscribe-rate t/ns -ap",  # no --applied at the namespace level
        f"topics set-subscribe-rate {T} -sr",
        f"topics get-subscribe-rate {T} -g",  # -g is topicPolicies'
    ]
)


def test_namespace_rates(ok, cli, namespace):
    assert ok("namespaces", "get-publish-rate", namespace).out.strip() == "null"
    ok("namespaces", "set-publish-rate", namespace, "-m", "100", "-b", "2048")
    assert ok("namespaces", "get-publish-rate", namespace).json == {
        "publishThrottlingRateInMsg": 100,
        "publishThrottlingRateInByte": 2048,
    }
    ok("namespaces", "set-publish-rate", namespace)  # pulsar-admin's defaults: no limit
    assert ok("namespaces", "get-publish-rate", namespace).json == NO_PUBLISH
    ok("namespaces", "remove-publish-rate", namespace)
    assert ok("namespaces", "get-publish-rate", namespace).out.strip() == "null"

    ok("namespaces", "set-subscribe-rate", namespace, "-sr", "3")
    assert ok("namespaces", "get-subscribe-rate", namespace).json == {
        "subscribeThrottlingRatePerConsumer": 3,
        "ratePeriodInSecond": 30,
    }
    refused = cli("namespaces", "set-subscribe-rate", namespace, "-sr", "3", "-st", "0")
    assert refused.code == 1
    assert "ratePeriodInSecond" in refused.err and "(HTTP 400)" in refused.err
    ok("namespaces", "remove-subscribe-rate", namespace)
    assert ok("namespaces", "get-subscribe-rate", namespace).out.strip() == "null"


@pytest.mark.parametrize("group", ["topics", "topicPolicies"])
def test_topic_rates_applied_and_dry_run(ok, cli, topic, group):
    namespace_set = ("set-publish-rate", "-m", "50")
    assert applied_from_namespace(ok, group, topic, namespace_set, "get-publish-rate") == {
        "publishThrottlingRateInMsg": 50,
        "publishThrottlingRateInByte": -1,
    }
    ok(group, "set-publish-rate", topic, "-b", "4096")
    assert ok(group, "get-publish-rate", topic, "-ap").json == {
        "publishThrottlingRateInMsg": -1,
        "publishThrottlingRateInByte": 4096,
    }
    ok(group, "set-subscribe-rate", topic, "-sr", "2", "-st", "10")
    assert ok(group, "get-subscribe-rate", topic).json == {
        "subscribeThrottlingRatePerConsumer": 2,
        "ratePeriodInSecond": 10,
    }
    dry = ok(group, "set-subscribe-rate", topic, "-sr", "9", "--dry-run").json
    assert dry["topics"][0]["flowControl"]["subscribeRate"] == {
        "value": {"subscribeThrottlingRatePerConsumer": 9, "ratePeriodInSecond": 30},
        "source": "topic",
    }
    assert (
        ok(group, "get-subscribe-rate", topic, "-ap").json["subscribeThrottlingRatePerConsumer"]
        == 2
    )
    ok(group, "remove-subscribe-rate", topic)
    assert ok(group, "get-subscribe-rate", topic, "-ap").json == {
        "subscribeThrottlingRatePerConsumer": 0,
        "ratePeriodInSecond": 30,
    }
    ok(group, "remove-publish-rate", topic)
    assert ok(group, "get-publish-rate", topic).out.strip() == "null"
    missing = cli(group, "set-publish-rate", "persistent://acme/orders/missing", "-m", "1")
    assert missing.code == 1 and "404" in missing.err
