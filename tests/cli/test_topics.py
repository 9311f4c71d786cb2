"""``topics`` commands: creation, partitions, listing, deletion, subscriptions, stats."""

from __future__ import annotations

import pytest


def test_non_partitioned_topic(ok, cli, namespace):
    ok("topics", "create", "persistent://acme/orders/plain", "-m", "owner=team-a")
    ok("topics", "create", "acme/orders/short")  # the short spelling works too
    listed = ok("topics", "list", "acme/orders").json
    assert sorted(listed) == ["persistent://acme/orders/plain", "persistent://acme/orders/short"]
    assert ok("topics", "get-partitioned-topic-metadata", "acme/orders/plain").json == {
        "partitions": 0
    }
    assert "409" in cli("topics", "create", "acme/orders/plain").err
    ok("topics", "delete", "acme/orders/plain")
    assert "404" in cli("topics", "delete", "acme/orders/plain").err
    assert ok("topics", "list", "acme/orders").json == ["persistent://acme/orders/short"]


def test_partitioned_topic(ok, cli, namespace):
    name = "persistent://acme/orders/created"
    ok("topics", "create-partitioned-topic", name, "--partitions", "2")
    assert ok("topics", "get-partitioned-topic-metadata", name).json == {"partitions": 2}
    ok("topics", "update-partitioned-topic", name, "-p", "3")
    assert ok("topics", "get-partitioned-topic-metadata", name).json == {"partitions": 3}
    assert ok("topics", "list-partitioned-topics", "acme/orders").json == [name]
    assert len(ok("topics", "list", "acme/orders", "-td", "persistent").json) == 3
    assert ok("topics", "list", "acme/orders", "-td", "non_persistent").json == []
    shrink = cli("topics", "update-partitioned-topic", name, "-p", "1")
    assert shrink.code == 1 and "409" in shrink.err
    zero = cli("topics", "create-partitioned-topic", "acme/orders/zero", "-p", "0")
    assert zero.code == 1 and "406" in zero.err
    ok("topics", "delete-partitioned-topic", name, "-f")
    assert ok("topics", "list-partitioned-topics", "acme/orders").json == []
    assert "404" in cli("topics", "delete-partitioned-topic", name).err


def test_partitions_flag_is_required(cli, namespace):
    result = cli("topics", "create-partitioned-topic", "acme/orders/x")
    assert result.code == 2
    assert "--partitions" in result.err


def test_subscriptions(ok, cli, topic):
    assert ok("topics", "subscriptions", topic).json == ["s1"]
    ok("topics", "create-subscription", topic, "--subscription", "s2")
    assert sorted(ok("topics", "subscriptions", topic).json) == ["s1", "s2"]
    assert "409" in cli("topics", "create-subscription", topic, "-s", "s2").err
    ok("topics", "unsubscribe", topic, "-s", "s2", "-f")
    assert ok("topics", "subscriptions", topic).json == ["s1"]
    assert "404" in cli("topics", "unsubscribe", topic, "-s", "gone").err
    assert "404" in cli("topics", "subscriptions", "acme/orders/missing").err


def test_stats(ok, cli, topic):
    stats = ok("topics", "stats", f"{topic}-partition-0").json
    assert "s1" in stats["subscriptions"]
    assert "msgRateOut" in stats
    aggregated = ok("topics", "partitioned-stats", topic, "--per-partition").json
    assert set(aggregated["partitions"]) == {f"{topic}-partition-0", f"{topic}-partition-1"}
    # The base of a partitioned topic answers its totals, as Pulsar does.
    assert ok("topics", "stats", topic).json["metadata"] == {"partitions": 2}
    assert "404" in cli("topics", "partitioned-stats", "acme/orders/missing").err


def test_stats_as_tables(ok, topic):
    # One table per part, short column names, units, and no blank cell for a nested value.
    out = ok("topics", "partitioned-stats", topic, "--per-partition", "--output", "table").out
    tables = {block.splitlines()[0]: block.splitlines()[1:] for block in out.split("\n\n")}
    assert list(tables) == ["topic", "subscriptions", "partitions"]
    topic_rows = [" ".join(line.split()) for line in tables["topic"][2:]]
    assert "rate out 0 msg/s, 0 B/s" in topic_rows and "partitions 2" in topic_rows, topic_rows
    assert "backlog size 0 B" in topic_rows and "publish throttled 0 times" in topic_rows
    header, _, *subscriptions = tables["subscriptions"]
    assert header.split("  ")[0] == "subscription" and "backlog (msgs)" in header
    assert [" ".join(line.split()) for line in subscriptions] == [
        "s1 Shared 0 0 0 B 0 0 msg/s, 0 B/s 0 0 0 never"
    ]
    partitions = [" ".join(line.split()) for line in tables["partitions"][2:]]
    assert partitions == [f"{i} 0 msg/s, 0 B/s 0 msg/s, 0 B/s 0 0 B -" for i in (0, 1)]
    for lines in tables.values():
        widths = [len(cell) for cell in lines[1].split("  ") if cell]  # the dashes
        assert all(len(line.split()) >= len(widths) for line in lines[2:]), lines


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("non-persistent://acme/orders/x", "non-persistent topics are not supported"),
        ("kafka://acme/orders/x", "invalid topic domain"),
        ("acme/orders", "invalid topic name"),
        ("persistent://x", "invalid topic name"),
    ],
)
def test_bad_topic_names(cli, name, message):
    result = cli("topics", "create", name)
    assert result.code == 1
    assert message in result.err
    assert "Traceback" not in result.err


def test_bare_topic_name_means_public_default(ok):
    ok("tenants", "create", "public")
    ok("namespaces", "create", "public/default")
    ok("topics", "create", "bare")
    assert ok("topics", "list", "public/default").json == ["persistent://public/default/bare"]
