"""The ``advice`` report: what the limit advisor needs to know of each subscription, over a
run's whole span (not per minute, hour or day).

A pure DataFrame function from raw snapshots (``advice_rows``), like the transforms of the
other reports.  Per (topic, subscription, interval) the partitions are summed (as
``reports.transforms.subscription_intervals`` does), then each interval gets:

* its publish rate (``msg_in``) and dispatch rate (``msg_out``), per second of the interval;
* ``acked``: what the subscription acknowledged in it, from the backlog: messages published
  minus the growth of the backlog since the interval before (the backlog is what is not
  acknowledged); the subscription's first interval has none;
* ``consumer_bound``: messages were waiting in the log (backlog minus unacknowledged
  deliveries), consumers were connected, and no limiter cut dispatch short: the consumers'
  permits were the bottleneck, so the ack rate is what they could take.

The span's row then has the publish rate's mean and 95th percentile (nearest rank, exact up
to 400 intervals, as the rate report), the dispatch rate, the limit at the end and where it
was set, how often and how long a limiter throttled, the peak of rate over limit, the backlog
now, its average and its least-squares slope, and the consumers' capacity: the highest ack
rate of a consumer-bound interval (null when there was none).  ``models.advice`` turns this
row into a recommendation and findings when the advice is read.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from models.reports import SPAN_WINDOW
from reports.transforms import KEY, LEVEL_NAMES, SKETCH_K, least_squares_slope

LIMITERS = ("throttled_broker", "throttled_topic", "throttled_subscription")


def _code(column: str) -> Column:
    """A level name as its 1-based position in ``LEVEL_NAMES`` (null stays null)."""
    return F.array_position(F.array(*[F.lit(n) for n in LEVEL_NAMES]), F.col(column)).cast("int")


def _name(code: Column) -> Column:
    return F.when(code > 0, F.element_at(F.array(*[F.lit(n) for n in LEVEL_NAMES]), code))


def advice_intervals(snapshots: DataFrame) -> DataFrame:
    """One row per (topic, subscription, interval), partitions summed, with the interval's
    rates, ``acked``, ``ack_rate`` and ``consumer_bound`` (see the module docstring)."""
    rows = snapshots.where(F.col("subscription") != "").withColumn(
        "interval", F.round(F.col("ts") / F.col("interval_ms")).cast("long")
    )
    every = F.count("limit_msg_per_s") == F.count(F.lit(1))
    merged = rows.groupBy(*KEY, "interval").agg(
        F.max("ts").alias("ts"),
        (F.max("interval_ms") / 1000.0).alias("seconds"),
        F.count(F.lit(1)).alias("partitions"),
        F.sum("msg_in").alias("msg_in"),
        F.sum("msg_out").alias("msg_out"),
        F.sum("backlog_msgs").alias("backlog_msgs"),
        F.sum("backlog_bytes").alias("backlog_bytes"),
        F.sum("unacked").alias("unacked"),
        F.sum("consumers").alias("consumers"),
        F.when(every, F.sum("limit_msg_per_s")).alias("limit"),
        F.when(every, F.max("limit_msg_per_s")).alias("limit_per_partition"),
        F.max(_code("limit_msg_limiter")).alias("limiter_code"),
        F.max(_code("limit_msg_source")).alias("source_code"),
        (F.sum(sum((F.col(c) for c in LIMITERS), F.lit(0))) > 0).alias("throttled"),
    )
    previous = F.lag("backlog_msgs").over(Window.partitionBy(*KEY).orderBy("interval"))
    acked = F.col("msg_in") - (F.col("backlog_msgs") - previous)
    with_rates = merged.withColumns(
        {
            "publish_rate": F.col("msg_in") / F.col("seconds"),
            "rate": F.col("msg_out") / F.col("seconds"),
            "acked": acked,
        }
    )
    return with_rates.withColumns(
        {
            "ack_rate": F.col("acked") / F.col("seconds"),
            "consumer_bound": F.col("acked").isNotNull()
            & ~F.col("throttled")
            & (F.col("consumers") > 0)
            & (F.col("backlog_msgs") - F.col("unacked") > 0),
        }
    )


def advice_rows(snapshots: DataFrame, since: datetime) -> DataFrame:
    """The ``advice_report`` rows of the snapshots (one per subscription), for a span that
    starts at ``since`` (the rows' ``window_start``; time in the slope counts from it)."""
    intervals = advice_intervals(snapshots)
    seconds = F.col("seconds")
    x = F.col("ts") / 1000.0 - F.lit(since.timestamp())
    y = F.col("backlog_msgs").cast("double")
    limited = F.col("limit").isNotNull()
    spans = intervals.groupBy(*KEY).agg(
        F.count(F.lit(1)).alias("intervals"),
        F.max("ts").alias("last_ts"),
        F.sum(seconds).alias("span_seconds"),
        F.max_by("partitions", "ts").alias("partitions"),
        F.sum("msg_in").alias("msg_in"),
        F.sum("msg_out").alias("msg_out"),
        F.kll_sketch_agg_double("publish_rate", SKETCH_K).alias("publish_sketch"),
        F.max("rate").alias("dispatch_rate_peak"),
        F.max_by("limit", "ts").alias("limit_topic_at_end"),
        F.max_by("limit_per_partition", "ts").alias("limit_per_partition_at_end"),
        F.max_by("limiter_code", "ts").alias("limiter_code"),
        F.max_by("source_code", "ts").alias("source_code"),
        F.sum(F.when(limited, seconds).otherwise(0.0)).alias("limited_seconds"),
        F.sum(F.col("throttled").cast("long")).alias("throttled_intervals"),
        F.sum(F.when(F.col("throttled"), seconds).otherwise(0.0)).alias("throttled_seconds"),
        F.max(F.when(F.col("limit") > 0, F.col("rate") / F.col("limit"))).alias("peak_utilisation"),
        F.max_by("backlog_msgs", "ts").alias("backlog_msgs"),
        F.max_by("backlog_bytes", "ts").alias("backlog_bytes"),
        F.avg("backlog_msgs").alias("backlog_avg"),
        F.max("backlog_msgs").alias("max_backlog_msgs"),
        F.sum(x).alias("sx"),
        F.sum(y).alias("sy"),
        F.sum(x * y).alias("sxy"),
        F.sum(x * x).alias("sxx"),
        F.max(F.when(F.col("consumer_bound"), F.col("ack_rate"))).alias("capacity"),
        F.sum(F.col("consumer_bound").cast("int")).alias("capacity_intervals"),
        F.max(F.when(~F.col("throttled"), F.col("ack_rate"))).alias("ack_rate_peak"),
        F.max_by("consumers", "ts").alias("consumers"),
    )
    n = F.col("intervals")
    return spans.select(
        F.lit(SPAN_WINDOW).alias("window"),
        F.lit(since).cast("timestamp").alias("window_start"),
        *KEY,
        F.timestamp_millis("last_ts").alias("span_end"),
        n.cast("int").alias("intervals"),
        "span_seconds",
        F.col("partitions").cast("int").alias("partitions"),
        (F.col("msg_in") / F.col("span_seconds")).alias("publish_rate_avg"),
        F.kll_sketch_get_quantile_double("publish_sketch", F.lit(0.95)).alias("publish_rate_p95"),
        (F.col("msg_out") / F.col("span_seconds")).alias("dispatch_rate_avg"),
        "dispatch_rate_peak",
        "limit_topic_at_end",
        "limit_per_partition_at_end",
        _name(F.col("limiter_code")).alias("limit_limiter"),
        _name(F.col("source_code")).alias("limit_source"),
        (F.col("limited_seconds") / F.col("span_seconds")).alias("limited_share"),
        (F.col("throttled_intervals") / n).alias("throttled_share"),
        "throttled_seconds",
        "peak_utilisation",
        "backlog_msgs",
        "backlog_bytes",
        "backlog_avg",
        "max_backlog_msgs",
        least_squares_slope().alias("growth_per_s"),
        "capacity",
        F.col("capacity_intervals").cast("int").alias("capacity_intervals"),
        "ack_rate_peak",
        F.col("consumers").cast("int").alias("consumers"),
    )
