"""Dispatch-rate commands at namespace, topic and subscription level, dry runs, provenance."""

from __future__ import annotations

import pytest

from tests.bodies import dispatch_rate as rate
from tests.cli.conftest import applied_from_namespace


@pytest.mark.parametrize("kind", ["dispatch-rate", "subscription-dispatch-rate"])
def test_namespace_rates(ok, cli, namespace, kind):
    assert ok("namespaces", f"get-{kind}", namespace).out.strip() == "null"
    ok("namespaces", f"set-{kind}", namespace, "-md", "1000", "-bd", "1048576", "-dt", "2", "-rp")
    assert ok("namespaces", f"get-{kind}", namespace).json == rate(1000, 1048576, 2, True)
    ok(
        "namespaces",
        f"set-{kind}",
        namespace,
        "--msg-dispatch-rate",
        "5",
        "--dispatch-rate-period",
        "1",
    )
    assert ok("namespaces", f"get-{kind}", namespace).json == rate(5)
    ok("namespaces", f"remove-{kind}", namespace)
    assert ok("namespaces", f"get-{kind}", namespace).out.strip() == "null"
    missing = cli("namespaces", f"set-{kind}", "acme/missing", "-md", "1")
    assert missing.code == 1 and "404" in missing.err


def test_bad_rate_value_is_refused_by_the_server(cli, namespace):
    result = cli("namespaces", "set-dispatch-rate", namespace, "-md", "10", "-dt", "0")
    assert result.code == 1
    assert "HTTP 4" in result.err


def test_non_integer_rate_is_a_usage_error(cli, namespace):
    result = cli("namespaces", "set-dispatch-rate", namespace, "-md", "ten")
    assert result.code == 2
    assert "invalid int value" in result.err


@pytest.mark.parametrize("group", ["topics", "topicPolicies"])
def test_topic_dispatch_rate_and_applied(ok, cli, topic, group):
    namespace_set = ("set-dispatch-rate", "-md", "100")
    assert applied_from_namespace(ok, group, topic, namespace_set, "get-dispatch-rate") == rate(100)
    ok(group, "set-dispatch-rate", topic, "-md", "10", "-bd", "2048")
    assert ok(group, "get-dispatch-rate", topic).json == rate(10, 2048)
    assert ok(group, "get-dispatch-rate", topic, "--applied").json == rate(10, 2048)
    ok(group, "remove-dispatch-rate", topic)
    assert ok(group, "get-dispatch-rate", topic).out.strip() == "null"
    missing = cli(group, "set-dispatch-rate", "acme/orders/missing", "-md", "1")
    assert missing.code == 1 and "404" in missing.err


@pytest.mark.parametrize("group", ["topics", "topicPolicies"])
def test_topic_subscription_rates(ok, cli, topic, group):
    ok(group, "set-subscription-dispatch-rate", topic, "-md", "50")
    assert ok(group, "get-subscription-dispatch-rate", topic).json == rate(50)
    # one subscription's own rate; its applied value falls back to the topic-wide default
    assert ok(group, "get-subscription-dispatch-rate", topic, "-s", "s1", "-ap").json == rate(50)
    ok(group, "set-subscription-dispatch-rate", topic, "-s", "s1", "-md", "5", "-dt", "1")
    assert ok(group, "get-subscription-dispatch-rate", topic, "--subscription", "s1").json == (
        rate(5)
    )
    assert ok(group, "get-subscription-dispatch-rate", topic).json == rate(50)
    ok(group, "remove-subscription-dispatch-rate", topic, "-s", "s1")
    assert ok(group, "get-subscription-dispatch-rate", topic, "-s", "s1").out.strip() == "null"
    ok(group, "remove-subscription-dispatch-rate", topic)
    assert ok(group, "get-subscription-dispatch-rate", topic).out.strip() == "null"


def test_topic_policies_global_flag_is_accepted(ok, topic):
    ok("topicPolicies", "set-dispatch-rate", topic, "-md", "7", "-g")
    assert ok("topicPolicies", "get-dispatch-rate", topic, "--global").json == rate(7)
    ok("topicPolicies", "remove-dispatch-rate", topic, "-g")


def test_dry_run_changes_nothing_and_prints_the_answer(ok, topic):
    answer = ok("topics", "set-dispatch-rate", topic, "-md", "10", "--dry-run").json
    assert answer["dryRun"] is True
    assert answer["changed"] == topic
    assert ok("topics", "get-dispatch-rate", topic).out.strip() == "null"

    ok("namespaces", "set-dispatch-rate", "acme/orders", "-md", "30")
    answer = ok("namespaces", "remove-dispatch-rate", "acme/orders", "--dry-run").json
    assert answer["dryRun"] is True and answer["topics"]
    assert ok("namespaces", "get-dispatch-rate", "acme/orders").json == rate(30)

    for args in (
        ("namespaces", "set-subscription-dispatch-rate", "acme/orders", "-md", "1"),
        ("topicPolicies", "set-subscription-dispatch-rate", topic, "-s", "s1", "-md", "1"),
        ("topicPolicies", "remove-subscription-dispatch-rate", topic, "-s", "s1"),
        ("topics", "remove-dispatch-rate", topic),
    ):
        assert ok(*args, "--dry-run").json["dryRun"] is True
    assert ok("topics", "get-subscription-dispatch-rate", topic, "-s", "s1").out.strip() == "null"


def test_effective_dispatch_rates(ok, cli, topic):
    ok("namespaces", "set-dispatch-rate", "acme/orders", "-md", "100")
    ok("topics", "set-subscription-dispatch-rate", topic, "-s", "s1", "-md", "5")
    document = ok("topics", "effective-dispatch-rates", topic).json
    assert document["limiters"]["topic"]["source"] == "namespace"
    assert document["limiters"]["topic"]["value"] == rate(100)
    own = document["subscriptions"]["s1"]["subscription"]
    assert (own["source"], own["value"]) == ("subscription", rate(5))
    table = ok("topics", "effective-dispatch-rates", topic, "--output", "table").out.splitlines()
    rows = [" ".join(line.split()) for line in table]
    assert rows[0] == f"{topic} (2 partitions): limiters"
    assert rows[1].split()[:4] == ["scope", "limiter", "limit", "from"]
    assert "topic topic 100 msg/s namespace - 100 msg/s no limit" in rows
    assert "sub s1 subscription 5 msg/s subscription 5 msg/s - - no limit" in rows
    # The effective limits name the level and the limiter that won, and the footer does the
    # arithmetic over this topic's partitions.
    assert "topic 100 msg/s (namespace level, topic limiter) no limit" in rows, table
    assert "sub s1 5 msg/s (subscription level, subscription limiter) no limit" in rows, table
    assert rows[-1] == (
        "Limits apply per partition; over the 2 partitions: topic 2 \N{MULTIPLICATION SIGN} "
        "100 msg/s = 200 msg/s; sub s1 2 \N{MULTIPLICATION SIGN} 5 msg/s = 10 msg/s"
    )
    assert "404" in cli("topics", "effective-dispatch-rates", "acme/orders/missing").err
