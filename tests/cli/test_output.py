"""``--output table``: aligned tables, summarised nested values, rounded floats, columns."""

from __future__ import annotations

import pytest

from sluice.admin_cli.output import OutputError, number, rate_text, render
from sluice.admin_cli.views import PROVENANCE, RATE_COLUMNS, RATE_REPORT

RATE_ROW = {
    "runId": 3,
    "window": "minute",
    "windowStart": "2026-11-23T14:00:00+00:00",
    "tenant": "acme",
    "namespace": "orders",
    "topic": "persistent://acme/orders/created",
    "subscription": "audit",
    "intervals": 6,
    "msgOut": 5970,
    "bytesOut": 1528320,
    "avgRate": 99.50248756218906,
    "peakRate": 101.0,
    "p50Rate": 99.8,
    "p95Rate": 100.9,
    "avgByteRate": 25472.63681592,
    "partitions": 4,
    "limitPerPartitionAvg": 25.0,
    "limitPerPartitionMin": 12.5,
    "limitPerPartitionMax": 50.0,
    "limitTopicAvg": 100.0,
    "limitTopicMin": 50.0,
    "limitTopicMax": 200.0,
    "limitTopicAtEnd": 200.0,
    "limitedShare": 1.0,
    "allowedMsgs": 6000.0,
    "byteLimitPerPartitionAvg": None,
    "byteLimitTopicAvg": None,
    "byteLimitedShare": 0.0,
    "allowedBytes": None,
    "limitLimiter": "subscription",
    "limitSource": "subscription",
    "utilisation": 0.9950248756218906,
    "throttledShare": 2.4875621890547263e-05,
    "throttledBrokerShare": 0.0,
    "throttledTopicShare": 0.0,
    "throttledSubscriptionShare": 2.4875621890547263e-05,
    "throttledBy": "subscription",
}


def rate(msg: int, byte: int = -1, period: int = 1, relative: bool = False) -> dict:
    return {
        "dispatchThrottlingRateInMsg": msg,
        "dispatchThrottlingRateInByte": byte,
        "ratePeriodInSecond": period,
        "relativeToPublishRate": relative,
    }


def test_numbers_are_rounded():
    assert number(2.4875621890547263e-05) == "2.49e-05"
    assert number(0.9950248756218906) == "0.995"
    assert number(99.50248756218906) == "99.5"
    assert number(25472.63681592) == "25473"
    assert number(100.0) == "100"


def test_rates_in_words():
    assert rate_text(rate(1000)) == "1000 msg/s"
    assert rate_text(rate(50, 1048576, 2)) == "50 msg + 1 MiB per 2 s"
    assert rate_text(rate(0, 0)) == "no limit"
    assert rate_text(rate(10, relative=True)) == "publish rate + 10 msg/s"
    assert rate_text(None) == "-"


def test_rate_report_shows_the_chosen_columns_aligned_and_rounded():
    text = render([RATE_ROW, {**RATE_ROW, "subscription": "billing"}], "table", view=RATE_REPORT)
    lines = text.splitlines()
    assert lines[0].split() == RATE_COLUMNS
    assert set(lines[1]) == {"-", " "}
    assert lines[2].index("0.995") + len("0.995") == lines[0].index("utilisation") + len(
        "utilisation"
    )  # numbers align right
    assert "2.49e-05" in lines[2] and "0.995" in lines[2] and "99.5" in lines[2]
    assert "2.4875621890547263e-05" not in text
    assert "acme/orders/created" in lines[2] and "persistent://" not in text
    # The limits in words: time-weighted average, and the range when it changed.
    assert "100 (50..200)" in lines[2] and "25 (12.5..50)" in lines[2]
    assert max(len(line) for line in lines) <= 150


def test_rate_report_limits_in_words():
    steady = {**RATE_ROW, "limitTopicMin": 100.0, "limitTopicMax": 100.0}
    unlimited = {**RATE_ROW, "limitPerPartitionAvg": None, "limitTopicAvg": None}
    lines = render([steady, unlimited], "table", view=RATE_REPORT).splitlines()
    # The time is a cell of its own: windowStart takes two words.
    assert lines[2].split()[5:9] == ["100", "25", "(12.5..50)", "0.995"]
    assert lines[3].split()[5:9] == ["no", "limit", "no", "limit"]


def test_columns_all_and_chosen():
    every = render([RATE_ROW], "table", columns=["all"], view=RATE_REPORT).splitlines()
    assert every[0].split() == [*RATE_ROW, "topicLimit", "partitionLimit"]
    chosen = render([RATE_ROW], "table", columns=["subscription", "utilisation"], view=RATE_REPORT)
    assert chosen.splitlines()[0].split() == ["subscription", "utilisation"]
    assert chosen.splitlines()[2].split() == ["audit", "0.995"]
    with pytest.raises(OutputError, match="unknown column nope; the columns are: runId"):
        render([RATE_ROW], "table", columns=["nope"], view=RATE_REPORT)


def test_a_narrow_terminal_wraps_text_columns():
    row = {"entity": "persistent://acme/orders/" + "x" * 60, "action": "create"}
    text = render([row, row], "table", width=50)
    assert max(len(line) for line in text.splitlines()) <= 50
    assert len(text.splitlines()) > 4


def test_objects_flatten_and_lists_of_objects_get_their_own_table():
    answer = {
        "msgRateOut": 12.345678,
        "metadata": {"partitions": 2},
        "consumers": [{"name": "c1", "msgRateOut": 1.23456}, {"name": "c2", "msgRateOut": 2.0}],
        "limit": rate(5),
    }
    text = render(answer, "table")
    rows = [" ".join(line.split()) for line in text.splitlines()]
    assert rows[0] == "KEY VALUE"
    assert "msgRateOut 12.3" in rows
    assert "metadata.partitions 2" in rows
    assert "limit 5 msg/s" in rows
    assert "consumers:" in rows
    assert "c1 1.23" in rows and "c2 2" in rows


def test_provenance_view():
    answer = {
        "topic": "persistent://acme/orders/created",
        "partitions": 4,
        "appliesPer": "partition",
        "limiters": {
            "broker": {
                "source": "broker",
                "value": rate(0, 0),
                "enabled": False,
                "levels": [{"level": "broker", "value": rate(0, 0), "set": True}],
            },
            "topic": {
                "source": "namespace",
                "value": rate(1000),
                "enabled": True,
                "levels": [
                    {"level": "topic", "value": None, "set": False},
                    {"level": "namespace", "value": rate(1000), "set": True},
                    {"level": "broker", "value": rate(0, 0), "set": True},
                ],
            },
        },
        "effective": {"msgPerSecond": 1000.0, "bytePerSecond": None, "msgLimiter": "topic"},
        "subscriptions": {
            "audit": {
                "subscription": {
                    "source": "subscription",
                    "value": rate(50, 1048576, 2),
                    "enabled": True,
                    "levels": [
                        {"level": "subscription", "value": rate(50, 1048576, 2), "set": True}
                    ],
                },
                "effective": {
                    "msgPerSecond": 25.0,
                    "bytePerSecond": 524288.0,
                    "msgLimiter": "subscription",
                    "byteLimiter": "subscription",
                },
            }
        },
    }
    text = render(answer, "table", view=PROVENANCE)
    rows = [" ".join(line.split()) for line in text.splitlines()]
    assert rows[0] == "persistent://acme/orders/created (4 partitions): limiters"
    assert rows[1].split() == [
        "scope",
        "limiter",
        "limit",
        "from",
        "subscription",
        "topic",
        "namespace",
        "broker",
    ]
    assert "topic topic 1000 msg/s namespace - 1000 msg/s no limit" in rows
    assert (
        "sub audit subscription 50 msg + 1 MiB per 2 s subscription 50 msg + 1 MiB per 2 s" in rows
    )
    assert "topic 1000 msg/s (namespace level, topic limiter) no limit" in rows
    assert (
        "sub audit 25 msg/s (subscription level, subscription limiter) "
        "512 KiB/s (subscription level, subscription limiter)"
    ) in rows
    assert rows[-1] == (
        "Limits apply per partition; over the 4 partitions: topic 4 \N{MULTIPLICATION SIGN} "
        "1,000 msg/s = 4,000 msg/s; sub audit 4 \N{MULTIPLICATION SIGN} 25 msg/s = 100 msg/s"
    )
    assert "{" not in text
