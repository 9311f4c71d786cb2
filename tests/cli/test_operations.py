"""``topics`` operation commands against the real admin server and Redis.

No worker runs here: messages are produced with the client straight into Redis, and what the
operations did is read back with ``peek-messages``, ``examine-message`` and
``stats-internal`` (a worker would dispatch exactly what these show)."""

from __future__ import annotations

import pytest

import sluice
from tests.cli.parsing import parsing_test, usage_error_test

T = "persistent://acme/orders/ops"


@pytest.fixture
def produced(ok, namespace, redis_server):
    """Topic ``ops`` with subscription ``audit`` and five messages m0..m4; their ids."""
    ok("topics", "create", T)
    ok("topics", "create-subscription", T, "-s", "audit")
    with sluice.Client(redis_server.url) as client:
        producer = client.create_producer(T)
        ids = [
            producer.send(f"m{i}".encode(), properties={"i": str(i)}, partition_key="k")
            for i in range(5)
        ]
        producer.close()
    return ids


def position(message_id) -> str:
    return f"{message_id.ledger_id()}:{message_id.entry_id()}"


def peek(ok, count: int = 1) -> list[str]:
    return [
        m["payload"] for m in ok("topics", "peek-messages", T, "-s", "audit", "-n", str(count)).json
    ]


def test_peek_and_examine(ok, cli, produced):
    messages = ok("topics", "peek-messages", T, "-s", "audit", "-n", "2").json
    assert [m["payload"] for m in messages] == ["m0", "m1"]
    first = messages[0]
    assert first["messageId"] == position(produced[0])
    assert first["properties"] == {"i": "0"} and first["key"] == "k"
    # The server's clock: read by the produce script, then by Redis for the entry's id, so the
    # id's time part may be a millisecond later.
    assert 0 <= produced[0].ledger_id() - first["publishTime"] <= 1
    assert peek(ok, 10) == ["m0", "m1", "m2", "m3", "m4"]  # fewer than asked: what there is
    latest = ok("topics", "examine-message", T).json
    assert latest["payload"] == "m4" and latest["messageId"] == position(produced[4])
    earliest = ok("topics", "examine-message", T, "-i", "earliest", "-m", "2").json
    assert earliest["payload"] == "m1"
    missing = cli("topics", "examine-message", T, "-i", "earliest", "-m", "9")
    assert missing.code == 1 and "Message not found (HTTP 404)" in missing.err


def test_skip_clear_backlog_and_expire(ok, cli, produced):
    ok("topics", "skip", T, "-s", "audit", "-n", "2")
    assert peek(ok) == ["m2"]
    ok("topics", "expire-messages", T, "-s", "audit", "-t", "1h")  # nothing that old
    assert peek(ok) == ["m2"]
    ok("topics", "clear-backlog", T, "-s", "audit")
    empty = cli("topics", "peek-messages", T, "-s", "audit")
    assert empty.code == 1 and "Message not found (HTTP 404)" in empty.err
    ok("topics", "reset-cursor", T, "-s", "audit", "-m", "earliest")
    assert peek(ok) == ["m0"]
    ok("topics", "expire-messages-all-subscriptions", T, "-t", "0")
    assert ok("topics", "stats-internal", T).json["cursors"]["audit"]["lag"] == 0
    unknown = cli("topics", "skip", T, "-s", "nobody", "-n", "1")
    assert unknown.code == 1
    assert f"Subscription nobody not found for topic {T} (HTTP 404)" in unknown.err


def test_reset_cursor(ok, cli, produced):
    ok("topics", "clear-backlog", T, "-s", "audit")
    ok("topics", "reset-cursor", T, "-s", "audit", "-m", position(produced[3]))
    assert peek(ok, 5) == ["m3", "m4"]
    ok("topics", "reset-cursor", T, "-s", "audit", "-m", position(produced[3]), "-e")
    assert peek(ok, 5) == ["m4"]
    ok("topics", "reset-cursor", T, "-s", "audit", "--messageId", produced[1].stream_id)
    assert peek(ok) == ["m1"]
    ok("topics", "reset-cursor", T, "-s", "audit", "-t", "1h")  # now minus an hour
    assert peek(ok) == ["m0"]
    ok("topics", "reset-cursor", T, "-s", "audit", "-m", "latest")
    assert cli("topics", "peek-messages", T, "-s", "audit").code == 1
    neither = cli("topics", "reset-cursor", T, "-s", "audit")
    assert neither.code == 1 and "--time" in neither.err
    bad = cli("topics", "reset-cursor", T, "-s", "audit", "-m", "12x")
    assert bad.code == 1 and "invalid message id" in bad.err
    beyond = cli(
        "topics", "reset-cursor", T, "-s", "audit", "-m", f"{produced[4].ledger_id() + 10**6}:0"
    )
    assert beyond.code == 1 and "(HTTP 412)" in beyond.err


def test_stats_internal_unload_and_lookup(ok, cli, produced):
    doc = ok("topics", "stats-internal", T, "-m").json
    assert doc["numberOfEntries"] == 5
    assert doc["lastConfirmedEntry"] == position(produced[4])
    assert doc["owner"] is None  # no worker runs here
    assert doc["cursors"]["audit"]["lag"] == 5
    ok("topics", "unload", T)
    lookup = cli("topics", "lookup", T)
    assert lookup.code == 1 and "No live worker owns" in lookup.err and "(HTTP 503)" in lookup.err
    ok("topics", "create-partitioned-topic", "acme/orders/wide", "-p", "2")
    internals = ok("topics", "partitioned-stats-internal", "acme/orders/wide").json
    assert internals["metadata"] == {"partitions": 2} and len(internals["partitions"]) == 2
    assert ok("topics", "partitioned-lookup", "acme/orders/wide").json == {
        "persistent://acme/orders/wide-partition-0": None,
        "persistent://acme/orders/wide-partition-1": None,
    }
    ok("topics", "unload", "acme/orders/wide")
    refused = cli("topics", "skip", "acme/orders/wide", "-s", "x", "-n", "1")
    assert refused.code == 1 and "(HTTP 405)" in refused.err


def test_peek_a_batch_entry(ok, produced, redis_server):
    with sluice.Client(redis_server.url) as client:
        producer = client.create_producer(T, batching_enabled=True, batching_max_messages=2)
        producer.send_async(b"b0", None, properties={"x": "1"})
        producer.send_async(b"b1", None)
        producer.flush()
        producer.close()
    ok("topics", "skip", T, "-s", "audit", "-n", "5")
    messages = ok("topics", "peek-messages", T, "-s", "audit", "-n", "2").json
    assert [m["payload"] for m in messages] == ["b0", "b1"]
    assert messages[0]["messageId"].endswith(":0") and messages[1]["messageId"].endswith(":1")
    assert messages[0]["properties"] == {"x": "1"}


test_pulsar_admin_command_lines_parse = parsing_test(
    [
        (f"topics clear-backlog {T} -s sub", {"subscription": "sub"}),
        (f"topics skip {T} --subscription sub --count 5", {"count": 5}),
        (f"topics expire-messages {T} -s sub -t 3600", {"expire_time": 3600}),
        (f"topics expire-messages {T} -s sub --expireTime 1h", {"expire_time": 3600}),
        (f"topics expire-messages-all-subscriptions {T} -t 2d", {"expire_time": 172_800}),
        (f"topics reset-cursor {T} -s sub -t 10m", {"time": 600, "message_id": None}),
        (
            f"topics reset-cursor {T} -s sub --messageId 12:3 --exclude-reset-position",
            {"message_id": "12:3", "exclude_reset_position": True},
        ),
        (f"topics peek-messages {T} -s sub", {"count": 1}),
        (f"topics peek-messages {T} -s sub -n 3", {"count": 3}),
        (f"topics examine-message {T}", {"initial_position": "latest", "message_position": 1}),
        (
            f"topics examine-message {T} --initialPosition earliest --messagePosition 4",
            {"initial_position": "earliest", "message_position": 4},
        ),
        (f"topics stats-internal {T} --metadata", {"metadata": True}),
        (f"topics partitioned-stats-internal {T}", {"topic": T}),
        (f"topics unload {T}", {"topic": T}),
        (f"topics lookup {T}", {"topic": T}),
        (f"topics partitioned-lookup {T}", {"topic": T}),
    ]
)


test_usage_errors = usage_error_test(
    [
        f"topics skip {T} -s sub",  # -n is required
        f"topics clear-backlog {T}",  # -s is required
        f"topics expire-messages {T} -s sub -t soon",
        f"topics reset-cursor {T} -s sub -t 10 minutes",
    ]
)
