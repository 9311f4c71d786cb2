"""The report transforms on small explicit DataFrames; expected rows are worked out by hand."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta

import orjson
import pytest
from pyspark.sql import Row
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from models.stats import StatsSnapshot
from reports.transforms import (
    BACKLOG,
    RATES,
    SKETCH_K,
    backlog_report,
    finest_window,
    rate_report,
    subscription_intervals,
)
from tests.reports.conftest import LIMITED, T0, TOPIC, at_the_limit, frame, snap


def _at(hour: int, minute: int) -> datetime:
    return T0.replace(hour=hour, minute=minute).replace(tzinfo=None)


def test_rate_report_minute_window_against_the_limit(spark):
    # Six 10 s intervals in 10:00: rates 100, 100, 50, 100, 100, 50 msg/s; throttled by the
    # topic limiter whenever at 100.
    outs = [1000, 1000, 500, 1000, 1000, 500]
    rows = [
        snap(
            10 * (i + 1),
            msg_out=n,
            bytes_out=n * 10,
            throttled_topic=3 if n == 1000 else 0,
            **LIMITED,
        )
        for i, n in enumerate(outs)
    ]
    report = rate_report(frame(spark, rows), "minute")
    expected = [
        Row(
            window="minute",
            window_start=_at(10, 0),
            subscription="sub",
            intervals=6,
            msg_out=5000,
            bytes_out=50000,
            avg_rate=5000 / 60,
            peak_rate=100.0,
            p50_rate=100.0,
            p95_rate=100.0,
            avg_byte_rate=50000 / 60,
            partitions=1,
            limit_per_partition_avg=100.0,
            limit_topic_avg=100.0,
            limit_topic_min=100.0,
            limit_topic_max=100.0,
            limit_topic_at_end=100.0,
            limited_share=1.0,
            allowed_msgs=6000.0,
            byte_limit_topic_avg=None,
            byte_limited_share=0.0,
            allowed_bytes=None,
            limit_limiter="topic",
            limit_source="namespace",
            utilisation=5000 / 6000,
            throttled_share=4 / 6,
            throttled_broker_share=0.0,
            throttled_topic_share=4 / 6,
            throttled_subscription_share=0.0,
            throttled_by="topic",
        )
    ]
    actual = report.select(*expected[0].asDict().keys())
    assertDataFrameEqual(actual, spark.createDataFrame(expected, actual.schema), rtol=1e-9)


def test_partitions_add_up_rates_and_limits(spark):
    # Two partitions, 50 msg/s limit each, 500 messages each in one interval, ticks 3 ms apart.
    rows = [
        snap(10, partition=0, msg_out=500, limit_msg_per_s=50.0),
        snap(10.003, partition=1, msg_out=500, limit_msg_per_s=50.0),
    ]
    intervals = subscription_intervals(frame(spark, rows))
    assert intervals.count() == 1
    report = rate_report(frame(spark, rows), "minute").collect()[0]
    assert (report.avg_rate, report.partitions, report.utilisation) == (100.0, 2, 1.0)
    assert (report.limit_per_partition_avg, report.limit_topic_avg) == (50.0, 100.0)


def test_a_partition_without_a_limit_makes_the_topic_unlimited(spark):
    rows = [
        snap(10, partition=0, msg_out=500, limit_msg_per_s=50.0),
        snap(10, partition=1, msg_out=500),
    ]
    report = rate_report(frame(spark, rows), "minute").collect()[0]
    limits = (report.limit_topic_avg, report.limit_per_partition_max, report.limit_topic_at_end)
    assert limits == (None, None, None)
    assert (report.limited_share, report.allowed_msgs, report.utilisation) == (0.0, None, None)


LIMIT_FIELDS = (
    "partitions",
    "limit_per_partition_avg",
    "limit_per_partition_min",
    "limit_per_partition_max",
    "limit_topic_avg",
    "limit_topic_min",
    "limit_topic_max",
    "limit_topic_at_end",
    "limited_share",
    "allowed_msgs",
    "utilisation",
)


def _limits(row: Row) -> dict:
    return {name: row[name] for name in LIMIT_FIELDS}


def _raised_minute(extra: Callable[[int, int, int], dict]) -> list[StatsSnapshot]:
    """The minute of docs/reports.md's example: four partitions at 50 msg/s each, raised to
    100 msg/s at 10:00:45, 10 s intervals ending 10:00:10 ... 10:01:00, each partition
    dispatching at its limit (500 messages per interval, 750 in the interval of the change,
    1000 in the last).  ``extra(i, p, out)``: more fields of interval ``i`` of partition ``p``."""
    return [
        snap(10 * (i + 1), partition=p, msg_out=out, limit_msg_per_s=limit, **extra(i, p, out))
        for i, (limit, out) in enumerate([(50.0, 500)] * 4 + [(100.0, 750), (100.0, 1000)])
        for p in range(4)
    ]


def test_a_limit_raised_inside_the_minute_is_weighted_by_time(spark):
    # The example of docs/reports.md.  Four partitions at 50 msg/s each, raised to 100 msg/s
    # at 10:00:45; 10 s stats intervals ending 10:00:10 ... 10:01:00.  A snapshot carries the
    # limit in force at its end, so the interval 10:00:40-50 counts at 100 msg/s: per
    # partition 50, 50, 50, 50, 100, 100 msg/s over six 10 s intervals.
    # Each partition dispatches at its limit: 500 messages per interval, 750 in the interval
    # of the change (5 s at 50 msg/s and 5 s at 100 msg/s), 1000 in the last one.
    rows = _raised_minute(
        lambda i, p, out: {
            "limit_msg_limiter": "topic",
            "limit_msg_source": "namespace",
            "throttled_topic": 1,
        }
    )
    row = rate_report(frame(spark, rows), "minute").collect()[0]
    assert (row.window_start, row.intervals, row.msg_out) == (_at(10, 0), 6, 15000)
    # 15,000 messages in 60 s; the busiest interval ran at 4 x 100 msg/s.
    assert (row.avg_rate, row.peak_rate, row.p50_rate) == (250.0, 400.0, 200.0)
    # Allowed: 4 partitions x (4 x 10 s x 50 + 2 x 10 s x 100) = 4 x 4,000 = 16,000 messages.
    assert _limits(row) == pytest.approx(
        {
            "partitions": 4,
            "limit_per_partition_avg": 16000 / 240,  # 66.7: 240 partition-seconds
            "limit_per_partition_min": 50.0,
            "limit_per_partition_max": 100.0,
            "limit_topic_avg": 16000 / 60,  # 266.7: 4 x 66.7
            "limit_topic_min": 200.0,
            "limit_topic_max": 400.0,
            "limit_topic_at_end": 400.0,
            "limited_share": 1.0,
            "allowed_msgs": 16000.0,
            "utilisation": 15000 / 16000,  # 0.9375
        },
        rel=1e-12,
    )


def test_a_limit_raised_inside_the_minute_counts_from_the_change(spark):
    # The same minute as the workers record it now: each snapshot also carries what its
    # limits allowed over the interval, integrated over time (workers.limit_time), so the
    # interval of the change allows 5 s x 50 + 5 s x 100 = 750 per partition, not 1,000.
    # A snapshot from a worker that did not measure it (partition 3's first interval here)
    # still counts limit x length.
    rows = _raised_minute(
        lambda i, p, out: {"allowed_msgs": None if (i, p) == (0, 3) else float(out)}
    )
    row = rate_report(frame(spark, rows), "minute").collect()[0]
    assert _limits(row) == pytest.approx(
        {
            "partitions": 4,
            "limit_per_partition_avg": 62.5,  # 15,000 / 240 partition-seconds
            "limit_per_partition_min": 50.0,  # the limits at the ends of intervals
            "limit_per_partition_max": 100.0,
            "limit_topic_avg": 250.0,  # 15,000 / 60 s
            "limit_topic_min": 200.0,
            "limit_topic_max": 400.0,
            "limit_topic_at_end": 400.0,
            "limited_share": 1.0,
            "allowed_msgs": 15000.0,
            "utilisation": 1.0,  # dispatched at the limit all the time
        },
        rel=1e-12,
    )
    # A non-partitioned topic the same way.
    single = [
        snap(10, msg_out=500, limit_msg_per_s=50.0, allowed_msgs=500.0),
        snap(20, msg_out=750, limit_msg_per_s=100.0, allowed_msgs=750.0),
    ]
    row = rate_report(frame(spark, single), "minute").collect()[0]
    assert (row.allowed_msgs, row.limit_topic_avg, row.utilisation) == (1250.0, 62.5, 1.0)


def test_partitions_with_different_limits_per_partition_and_per_topic(spark):
    # Limits relative to the publish rate differ by partition.  Two partitions, three
    # intervals: partition 0 at 30, 30, 40 msg/s, partition 1 at 50, 70, 60 msg/s; the topic
    # at 80, 100, 100 msg/s.  Each partition dispatches 300 and 500 messages per interval.
    limits = [(30.0, 50.0), (30.0, 70.0), (40.0, 60.0)]
    rows = [
        snap(10 * (i + 1), partition=p, msg_out=(300, 500)[p], limit_msg_per_s=pair[p])
        for i, pair in enumerate(limits)
        for p in range(2)
    ]
    row = rate_report(frame(spark, rows), "minute").collect()[0]
    assert _limits(row) == pytest.approx(
        {
            "partitions": 2,
            "limit_per_partition_avg": 280 / 6,  # 46.7: (30+30+40+50+70+60) / 6
            "limit_per_partition_min": 30.0,
            "limit_per_partition_max": 70.0,
            "limit_topic_avg": 280 / 3,  # 93.3: (80+100+100) / 3
            "limit_topic_min": 80.0,
            "limit_topic_max": 100.0,
            "limit_topic_at_end": 100.0,
            "limited_share": 1.0,
            "allowed_msgs": 2800.0,  # 280 msg/s-intervals x 10 s
            "utilisation": 2400 / 2800,  # 3 x 800 delivered
        },
        rel=1e-12,
    )


def test_limits_count_only_the_time_a_limit_was_in_force(spark):
    # 100 msg/s for the first two intervals, then the policy is removed: the averages cover
    # the limited 20 s only, and so does utilisation (2,000 of 2,000 allowed).
    rows = [
        snap(10, msg_out=1000, **LIMITED),
        snap(20, msg_out=1000, **LIMITED),
        snap(30, msg_out=3000),
        snap(40, msg_out=3000),
    ]
    row = rate_report(frame(spark, rows), "minute").collect()[0]
    assert row.avg_rate == 200.0  # 8,000 messages over 40 s
    assert _limits(row) == {
        "partitions": 1,
        "limit_per_partition_avg": 100.0,
        "limit_per_partition_min": 100.0,
        "limit_per_partition_max": 100.0,
        "limit_topic_avg": 100.0,
        "limit_topic_min": 100.0,
        "limit_topic_max": 100.0,
        "limit_topic_at_end": None,  # no limit in the last interval
        "limited_share": 0.5,
        "allowed_msgs": 2000.0,
        "utilisation": 1.0,
    }


def test_rolled_up_limits_weigh_each_minute_by_its_time(spark):
    # 10:00 at 100 msg/s; 10:01 at 200 msg/s, raised to 400 msg/s from its fourth interval;
    # 10:02 at 400 msg/s.  A byte limit of 10 kB/s only in 10:00.  50 msg/s of 100 bytes.
    def limit(i: int) -> float:
        return 100.0 if i < 6 else 200.0 if i < 9 else 400.0

    rows = [
        snap(
            10 * (i + 1),
            msg_out=500,
            bytes_out=50_000,
            limit_msg_per_s=limit(i),
            limit_byte_per_s=10_000.0 if i < 6 else None,
        )
        for i in range(18)
    ]
    starts = {"minute": _at(10, 0), "hour": _at(10, 0)}
    report = RATES(subscription_intervals(frame(spark, rows)), starts)
    by_window = {(r.window, r.window_start): r for r in report.collect()}
    minutes = [by_window["minute", _at(10, m)] for m in range(3)]
    assert [(r.limit_topic_avg, r.limit_topic_min, r.limit_topic_max) for r in minutes] == [
        (100.0, 100.0, 100.0),
        (300.0, 200.0, 400.0),  # (3 x 200 + 3 x 400) / 6
        (400.0, 400.0, 400.0),
    ]
    hour = by_window["hour", _at(10, 0)]
    # (6 x 100 + 3 x 200 + 9 x 400) x 10 s = 48,000 allowed over 180 s: 266.7 msg/s.
    assert _limits(hour) == pytest.approx(
        {
            "partitions": 1,
            "limit_per_partition_avg": 4800 / 18,
            "limit_per_partition_min": 100.0,
            "limit_per_partition_max": 400.0,
            "limit_topic_avg": 4800 / 18,
            "limit_topic_min": 100.0,
            "limit_topic_max": 400.0,
            "limit_topic_at_end": 400.0,
            "limited_share": 1.0,
            "allowed_msgs": 48000.0,
            # Messages: 9,000 of 48,000 (0.19); bytes: 300 kB of 600 kB in 10:00 (0.5).
            "utilisation": 0.5,
        },
        rel=1e-12,
    )
    byte_limits = (
        hour.byte_limit_topic_avg,
        hour.byte_limit_per_partition_max,
        hour.byte_limit_topic_at_end,
        hour.byte_limited_share,
        hour.allowed_bytes,
    )
    assert byte_limits == pytest.approx((10_000.0, 10_000.0, None, 1 / 3, 600_000.0))


def test_unlimited_and_unthrottled(spark):
    rows = [snap(10, msg_out=300), snap(20, msg_out=100)]
    row = rate_report(frame(spark, rows), "minute").collect()[0]
    assert (row.limit_topic_avg, row.utilisation, row.throttled_by) == (None, None, None)
    # Percentiles are nearest-rank: the median of 30 and 10 msg/s is 10.
    assert (row.throttled_share, row.peak_rate, row.p50_rate) == (0.0, 30.0, 10.0)


def test_byte_limit_binds_when_it_is_the_tighter_one(spark):
    # 100 msg/s of 1 kB against 1000 msg/s and 200 kB/s: bytes are at 50 %, messages at 10 %.
    rows = [
        snap(
            10,
            msg_out=1000,
            bytes_out=1_000_000,
            limit_msg_per_s=1000.0,
            limit_byte_per_s=200_000.0,
        )
    ]
    assert rate_report(frame(spark, rows), "minute").collect()[0].utilisation == 0.5


def test_throttled_by_picks_the_level_that_throttled_most(spark):
    rows = [
        snap(10, msg_out=10, throttled_broker=1),
        snap(20, msg_out=10, throttled_subscription=5),
        snap(30, msg_out=10, throttled_subscription=1),
    ]
    row = rate_report(frame(spark, rows), "minute").collect()[0]
    assert row.throttled_by == "subscription"
    assert row.throttled_share == 1.0


def test_windows_group_by_the_interval_start(spark):
    # Intervals ending 10:00:10 ... 10:02:00: the one ending at 10:01:00 belongs to 10:00.
    rows = [snap(10 * (i + 1), msg_out=10) for i in range(12)]
    minutes = rate_report(frame(spark, rows), "minute").orderBy("window_start").collect()
    assert [(r.window_start, r.intervals) for r in minutes] == [
        (_at(10, 0), 6),
        (_at(10, 1), 6),
    ]
    hours = rate_report(frame(spark, rows), "hour").collect()
    assert [(r.window_start, r.intervals, r.msg_out) for r in hours] == [(_at(10, 0), 12, 120)]


def test_empty_input_gives_empty_reports(spark):
    empty = frame(spark, [])
    assert rate_report(empty, "hour").count() == 0
    assert backlog_report(empty, "hour").count() == 0
    with pytest.raises(ValueError, match="unknown window"):
        rate_report(empty, "week")


def test_growing_backlog_that_never_drains(spark):
    # Backlog 100, 200, 300, 400 at 10 s steps: slope 10 msg/s.  Publish 110 msg/s against a
    # 100 msg/s limit: it cannot drain.
    rows = at_the_limit(4, 1100, 100, 1000)
    report = backlog_report(frame(spark, rows), "minute")
    expected = [
        Row(
            window_start=_at(10, 0),
            intervals=4,
            backlog_msgs=400,
            backlog_bytes=4000,
            max_backlog_msgs=400,
            growth_per_s=10.0,
            publish_rate=110.0,
            dispatch_rate=100.0,
            limit_topic_at_end=100.0,
            drain_rate=-10.0,
            drain_status="never",
            drain_seconds=None,
            growth_rank=1,
        )
    ]
    actual = report.select(*expected[0].asDict().keys())
    assertDataFrameEqual(actual, spark.createDataFrame(expected, actual.schema), rtol=1e-9)


def test_draining_backlog_estimate(spark):
    # 1000 messages left; limit 100 msg/s, publish 50 msg/s: 50 msg/s net, 20 s to drain.
    rows = [
        snap(10, msg_in=500, msg_out=1000, backlog_msgs=1500, **LIMITED),
        snap(20, msg_in=500, msg_out=1000, backlog_msgs=1000, **LIMITED),
    ]
    row = backlog_report(frame(spark, rows), "minute").collect()[0]
    assert (row.drain_status, row.drain_rate, row.drain_seconds) == ("draining", 50.0, 20.0)
    assert row.growth_per_s == pytest.approx(-50.0)


def test_unlimited_backlog_drains_at_the_observed_dispatch_rate(spark):
    rows = [snap(10, msg_in=100, msg_out=300, backlog_msgs=400)]
    row = backlog_report(frame(spark, rows), "minute").collect()[0]
    # 30 msg/s out, 10 msg/s in: 20 msg/s net, 400 messages: 20 s.  One interval: no slope.
    assert (row.drain_status, row.drain_seconds, row.growth_per_s) == ("draining", 20.0, 0.0)


def test_empty_backlog(spark):
    row = backlog_report(frame(spark, [snap(10, msg_in=5, msg_out=5)]), "minute").collect()[0]
    assert (row.drain_status, row.drain_seconds) == ("empty", 0.0)


def test_top_growing_ranks_within_each_window(spark):
    rows = []
    for i in range(3):
        rows.append(snap(10 * (i + 1), subscription="slow", backlog_msgs=10 * i))
        rows.append(snap(10 * (i + 1), subscription="fast", backlog_msgs=100 * i))
        rows.append(snap(10 * (i + 1), subscription="shrinking", backlog_msgs=100 - 10 * i))
    report = backlog_report(frame(spark, rows), "minute")
    ranks = {r.subscription: r.growth_rank for r in report.collect()}
    assert ranks == {"fast": 1, "slow": 2, "shrinking": 3}
    growing = {r.subscription: r.growth_per_s for r in report.collect()}
    assert growing["fast"] > growing["slow"] > 0 > growing["shrinking"]


def test_rows_without_subscription_are_partition_level_only(spark):
    rows = [snap(10, subscription="", msg_in=100), snap(10, msg_out=7)]
    report = rate_report(frame(spark, rows), "minute").collect()
    assert [(r.subscription, r.topic, r.msg_out) for r in report] == [("sub", TOPIC, 7)]


def _day_and_a_half(spark):
    """Two subscriptions, 5-minute snapshots from 10:00 to 23:55 the next day: limits that
    change, throttling now and then, a backlog that rises and falls."""
    rng = random.Random(7)
    rows = []
    for i in range(1, 12 * 38):
        for sub in ("a", "b"):
            limited = (i // 40) % 3 != 2
            rows.append(
                snap(
                    300 * i,
                    subscription=sub,
                    interval_ms=300_000,
                    msg_in=rng.randrange(0, 40_000),
                    msg_out=rng.randrange(0, 30_000),
                    bytes_out=rng.randrange(0, 3_000_000),
                    backlog_msgs=abs(5_000 - (i * 37) % 10_000) + rng.randrange(0, 50),
                    backlog_bytes=rng.randrange(0, 10**6),
                    throttled_topic=rng.randrange(0, 2),
                    throttled_subscription=int(rng.random() < 0.2),
                    limit_msg_per_s=100.0 + 10 * (i // 40) if limited else None,
                    limit_msg_limiter="topic" if limited else None,
                    limit_msg_source="namespace" if limited else None,
                )
            )
    return subscription_intervals(frame(spark, rows))


STARTS = {
    "minute": datetime(2026, 11, 24, 18, 30),
    "hour": datetime(2026, 11, 23, 12, 0),
    "day": datetime(2026, 11, 23, 0, 0),
}


@pytest.mark.parametrize("report", [RATES, BACKLOG], ids=["rates", "backlog"])
def test_one_pass_over_every_window_equals_each_window_on_its_own(spark, report):
    # Hours are rolled up from minutes and days from hours; each window computed from the
    # intervals directly must give the same rows, percentiles and slopes included.
    intervals = _day_and_a_half(spark)
    expected = None
    for window, start in STARTS.items():
        rows = report.window(intervals, window).where(F.col("window_start") >= F.lit(start))
        expected = rows if expected is None else expected.unionByName(rows)
    actual = report(intervals, STARTS)
    counts = {r.window: r["count"] for r in actual.groupBy("window").count().collect()}
    # Intervals begin every 5 minutes up to 23:50 the next day: 18:30 to 23:50 is 65 minute
    # windows; hours from 12:00 on the first day to 23:00 on the next are 36; days 2.
    assert counts == {"minute": 65 * 2, "hour": 36 * 2, "day": 2 * 2}
    assertDataFrameEqual(actual, expected, rtol=1e-9)


def test_windows_roll_up_from_the_finest_requested():
    assert finest_window(["day", "hour"]) == "hour"
    assert finest_window(("day", "minute", "hour")) == "minute"
    with pytest.raises(ValueError, match="unknown window"):
        finest_window(["week"])
    with pytest.raises(ValueError, match="no report windows"):
        finest_window([])


def test_rolled_up_percentiles_are_exact_up_to_the_sketch_size(spark):
    # 240 one-minute intervals over 4 hours: rates 1..240 msg/s in a shuffled order.  The day
    # window merges four hourly sketches of 60 values each; nearest-rank p50 is 120, p95 228.
    assert SKETCH_K >= 240
    rates = list(range(1, 241))
    random.Random(3).shuffle(rates)
    rows = [snap(60 * (i + 1), interval_ms=60_000, msg_out=r * 60) for i, r in enumerate(rates)]
    starts = {"hour": datetime(2026, 11, 23), "day": datetime(2026, 11, 23)}
    [day] = (
        RATES(subscription_intervals(frame(spark, rows)), starts).where("window = 'day'").collect()
    )
    assert (day.intervals, day.p50_rate, day.p95_rate, day.peak_rate) == (240, 120.0, 228.0, 240.0)


def test_percentiles_beyond_the_sketch_size_stay_close_in_rank(spark):
    # 4 * SKETCH_K ten-second intervals with distinct rates, merged across hours into a day.
    # The sketch's rank error is under 0.7 % at 99 % confidence; 2 % leaves room for chance.
    n = 4 * SKETCH_K
    rates = list(range(1, n + 1))
    random.Random(5).shuffle(rates)
    rows = [snap(10 * (i + 1), msg_out=r * 10) for i, r in enumerate(rates)]
    starts = {"hour": datetime(2026, 11, 23), "day": datetime(2026, 11, 23)}
    [day] = (
        RATES(subscription_intervals(frame(spark, rows)), starts).where("window = 'day'").collect()
    )
    assert day.intervals == n
    assert abs(day.p50_rate - 0.5 * n) <= 0.02 * n
    assert abs(day.p95_rate - 0.95 * n) <= 0.02 * n


def test_a_window_before_its_start_is_left_out(spark):
    rows = [snap(600 * (i + 1), interval_ms=600_000, msg_out=60) for i in range(18)]
    intervals = subscription_intervals(frame(spark, rows))
    start = datetime(2026, 11, 23, 11, 0)
    report = RATES(intervals, {"hour": start, "day": datetime(2026, 11, 23)})
    hours = sorted((r.window_start, r.intervals) for r in report.where("window = 'hour'").collect())
    # 10:00 is before the hour start: only the day window counts its intervals.
    assert hours == [(start, 6), (start + timedelta(hours=1), 6)]
    [day] = report.where("window = 'day'").collect()
    assert day.intervals == 18


def _levels(**levels: tuple[int, int]) -> str:
    """A snapshot's priority_levels: p<L>=(messages out, messages waiting)."""
    return orjson.dumps({name[1:]: list(pair) for name, pair in levels.items()}).decode()


def test_priority_levels_add_up_over_partitions_and_intervals(spark):
    """Per priority, the rate report sums what went out (over partitions and intervals) and
    the backlog report keeps what waited at the window's end; a subscription without
    priorities has none, and levels with nothing to report are left out."""
    rows = [
        snap(10, partition=0, msg_out=30, priority_levels=_levels(p9=(20, 5), p4=(10, 0))),
        snap(10, partition=1, msg_out=10, priority_levels=_levels(p9=(10, 0), p0=(0, 7))),
        snap(20, partition=0, msg_out=25, priority_levels=_levels(p9=(5, 0), p4=(20, 3))),
        snap(20, partition=1, msg_out=5, priority_levels=_levels(p0=(5, 2))),
        snap(10, subscription="plain", msg_out=50),
        snap(20, subscription="plain", msg_out=50),
    ]
    snapshots = frame(spark, rows)
    rates = {r.subscription: r for r in rate_report(snapshots, "minute", True).collect()}
    assert orjson.loads(rates["sub"].priority_levels) == {
        "9": {"msgOut": 35, "avgRate": 1.75},
        "4": {"msgOut": 30, "avgRate": 1.5},
        "0": {"msgOut": 5, "avgRate": 0.25},
    }
    assert list(orjson.loads(rates["sub"].priority_levels)) == ["9", "4", "0"]
    assert rates["plain"].priority_levels is None
    backlog = {r.subscription: r for r in backlog_report(snapshots, "minute", True).collect()}
    assert orjson.loads(backlog["sub"].priority_levels) == {
        "4": {"msgBacklog": 3},
        "0": {"msgBacklog": 2},
    }
    assert backlog["plain"].priority_levels is None
    # Asked for no per-priority figures (no snapshot of the run has any): the same rows,
    # priority_levels null in every one.
    plain = rate_report(snapshots, "minute").collect()
    assert [r.priority_levels for r in plain] == [None, None]
    assert [r.msg_out for r in plain] == [r.msg_out for r in rates.values()]


@pytest.mark.parametrize("report", [RATES, BACKLOG], ids=["rates", "backlog"])
def test_priority_levels_roll_up_as_each_window_on_its_own(spark, report):
    rows = [
        snap(
            300 * i,
            interval_ms=300_000,
            msg_out=i,
            priority_levels=_levels(p9=(i, i % 3), p2=(2 * i, i % 5)),
        )
        for i in range(1, 12 * 30)
    ]
    intervals = subscription_intervals(frame(spark, rows), priorities=True)
    starts = {"minute": datetime(2026, 11, 24, 0, 0), "hour": STARTS["hour"], "day": STARTS["day"]}
    expected = None
    for window, start in starts.items():
        got = report.window(intervals, window).where(F.col("window_start") >= F.lit(start))
        expected = got if expected is None else expected.unionByName(got)
    actual = report(intervals, starts).select("window", "window_start", "priority_levels")
    assertDataFrameEqual(actual, expected.select(*actual.columns))
    assert actual.where(F.col("priority_levels").isNull()).count() == 0
