"""Pure DataFrame transforms of the report jobs: snapshots in, report rows out.

Nothing here reads, writes or looks at the clock; every parameter is an argument, so each
function is tested on small explicit DataFrames.

Grain.  Workers emit one snapshot per (topic partition, subscription) per interval.
``subscription_intervals`` first sums the partitions of a topic into one row per
(topic, subscription, interval): rates add up across partitions, and so do their limits
(Pulsar's dispatch rates apply per partition).  Reports then aggregate those interval rows
into minute, hour or day windows (UTC); an interval counts in the window where it started.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from models.reports import WINDOW_SECONDS

LEVELS = ("broker", "topic", "subscription")  # the limiters
LEVEL_NAMES = ("broker", "namespace", "topic", "subscription")  # where a value can come from
KEY = ("tenant", "namespace", "topic", "subscription")
# Percentiles are nearest-rank, from a summary with a relative error of 1 / this.
PERCENTILE_ACCURACY = 10_000


def _all_or_null(column: str) -> Column:
    """Sum of ``column`` across partitions, or null when any partition has no limit."""
    return F.when(F.count(column) == F.count(F.lit(1)), F.sum(column))


def _code(column: str) -> Column:
    """A level name as its position in ``LEVEL_NAMES`` (1-based), null stays null."""
    code = F.lit(None).cast("int")
    for index, name in reversed(list(enumerate(LEVEL_NAMES, 1))):
        code = F.when(F.col(column) == name, index).otherwise(code)
    return code


def _name(code: Column) -> Column:
    """The level name of a code made by ``_code``."""
    return F.element_at(F.array(*[F.lit(n) for n in LEVEL_NAMES]), code)


def subscription_intervals(snapshots: DataFrame) -> DataFrame:
    """One row per (topic, subscription, interval) with the partitions summed.

    Snapshots of a topic's partitions taken in the same tick share an interval: the interval
    index is ``ts / interval_ms`` rounded, which tolerates a tick's jitter.  A non-partitioned
    topic has one snapshot per interval already, so only partitions are grouped (a shuffle of
    every row is what costs most here).  Partition-level rows without a subscription are left
    out.
    """
    rows = snapshots.where(F.col("subscription") != "").withColumn(
        "interval", F.round(F.col("ts") / F.col("interval_ms")).cast("long")
    )
    # Levels travel as numbers: aggregates over strings would force sort-based plans.
    # Partitions of a topic share their limits' levels; if not, the narrowest wins.
    single = rows.where(F.col("partition") < 0).select(
        *KEY,
        "interval",
        "ts",
        (F.col("interval_ms") / 1000.0).alias("seconds"),
        "msg_in",
        "msg_out",
        "bytes_out",
        "backlog_msgs",
        "backlog_bytes",
        F.col("limit_msg_per_s").alias("limit_msg"),
        F.col("limit_byte_per_s").alias("limit_byte"),
        _code("limit_msg_limiter").alias("limiter_msg"),
        _code("limit_byte_limiter").alias("limiter_byte"),
        _code("limit_msg_source").alias("source_msg"),
        _code("limit_byte_source").alias("source_byte"),
        *[(F.col(f"throttled_{level}") > 0).alias(f"throttled_{level}") for level in LEVELS],
    )
    merged = (
        rows.where(F.col("partition") >= 0)
        .groupBy(*KEY, "interval")
        .agg(
            F.max("ts").alias("ts"),
            (F.max("interval_ms") / 1000.0).alias("seconds"),
            F.sum("msg_in").alias("msg_in"),
            F.sum("msg_out").alias("msg_out"),
            F.sum("bytes_out").alias("bytes_out"),
            F.sum("backlog_msgs").alias("backlog_msgs"),
            F.sum("backlog_bytes").alias("backlog_bytes"),
            _all_or_null("limit_msg_per_s").alias("limit_msg"),
            _all_or_null("limit_byte_per_s").alias("limit_byte"),
            F.max(_code("limit_msg_limiter")).alias("limiter_msg"),
            F.max(_code("limit_byte_limiter")).alias("limiter_byte"),
            F.max(_code("limit_msg_source")).alias("source_msg"),
            F.max(_code("limit_byte_source")).alias("source_byte"),
            *[(F.sum(f"throttled_{level}") > 0).alias(f"throttled_{level}") for level in LEVELS],
        )
    )
    grouped = single.unionByName(merged)
    return grouped.withColumns(
        {
            "rate": F.col("msg_out") / F.col("seconds"),
            "byte_rate": F.col("bytes_out") / F.col("seconds"),
            "throttled": F.greatest(*[F.col(f"throttled_{level}") for level in LEVELS]),
        }
    )


def _with_window(intervals: DataFrame, window: str) -> DataFrame:
    if window not in WINDOW_SECONDS:
        raise ValueError(f"unknown window '{window}': use one of {sorted(WINDOW_SECONDS)}")
    return intervals.withColumns(
        {
            "window": F.lit(window),
            # An interval belongs to the window in which it started.
            "window_start": F.date_trunc(
                window,
                F.timestamp_millis(F.col("ts") - (F.col("seconds") * 1000).cast("long")),
            ),
        }
    )


def _share(flag: str) -> Column:
    return F.avg(F.col(flag).cast("double"))


def rate_report(snapshots: DataFrame, window: str) -> DataFrame:
    """``rate_report_from_intervals`` of the snapshots' subscription intervals."""
    return rate_report_from_intervals(subscription_intervals(snapshots), window)


def rate_report_from_intervals(intervals: DataFrame, window: str) -> DataFrame:
    """Dispatch per subscription per window against the limit in force.

    ``utilisation`` is what was delivered over what the limit allowed, on the intervals that
    had a limit (messages or bytes, whichever is higher, i.e. the binding one); null when no
    limit applied.  ``throttled_share`` is the share of intervals in which some limiter cut
    dispatch short; ``throttled_by`` the level that did so most often.
    """
    intervals = _with_window(intervals, window)
    limited_msg = F.col("limit_msg").isNotNull()
    limited_byte = F.col("limit_byte").isNotNull()
    report = intervals.groupBy("window", "window_start", *KEY).agg(
        F.count(F.lit(1)).cast("int").alias("intervals"),
        F.sum("msg_out").alias("msg_out"),
        F.sum("bytes_out").alias("bytes_out"),
        (F.sum("msg_out") / F.sum("seconds")).alias("avg_rate"),
        F.max("rate").alias("peak_rate"),
        F.percentile_approx("rate", 0.5, PERCENTILE_ACCURACY).alias("p50_rate"),
        F.percentile_approx("rate", 0.95, PERCENTILE_ACCURACY).alias("p95_rate"),
        (F.sum("bytes_out") / F.sum("seconds")).alias("avg_byte_rate"),
        F.max_by("limit_msg", "ts").alias("limit_msg_per_s"),
        F.max_by("limit_byte", "ts").alias("limit_byte_per_s"),
        F.max_by(F.coalesce("limiter_msg", "limiter_byte"), "ts").alias("limiter_code"),
        F.max_by(F.coalesce("source_msg", "source_byte"), "ts").alias("source_code"),
        (
            F.sum(F.when(limited_msg, F.col("msg_out")))
            / F.sum(F.when(limited_msg, F.col("limit_msg") * F.col("seconds")))
        ).alias("msg_utilisation"),
        (
            F.sum(F.when(limited_byte, F.col("bytes_out")))
            / F.sum(F.when(limited_byte, F.col("limit_byte") * F.col("seconds")))
        ).alias("byte_utilisation"),
        _share("throttled").alias("throttled_share"),
        *[_share(f"throttled_{level}").alias(f"throttled_{level}_share") for level in LEVELS],
    )
    shares = [F.col(f"throttled_{level}_share") for level in LEVELS]
    most = F.greatest(*shares)
    throttled_by = F.when(F.col("throttled_share") > 0, F.lit(None).cast("string"))
    for level, share in zip(reversed(LEVELS), reversed(shares), strict=True):
        # The narrowest level wins a tie: it is the one a user would change.
        throttled_by = F.when((F.col("throttled_share") > 0) & (share == most), level).otherwise(
            throttled_by
        )
    return report.withColumns(
        {
            "utilisation": F.greatest("msg_utilisation", "byte_utilisation"),
            "throttled_by": throttled_by,
            "limit_limiter": _name(F.col("limiter_code")),
            "limit_source": _name(F.col("source_code")),
        }
    ).drop("msg_utilisation", "byte_utilisation", "limiter_code", "source_code")


def backlog_report(snapshots: DataFrame, window: str) -> DataFrame:
    """``backlog_report_from_intervals`` of the snapshots' subscription intervals."""
    return backlog_report_from_intervals(subscription_intervals(snapshots), window)


def backlog_report_from_intervals(intervals: DataFrame, window: str) -> DataFrame:
    """Backlog per subscription per window, its growth, and when it will drain.

    ``growth_per_s`` is the least-squares slope of the backlog over the window's intervals.
    The backlog drains at the effective limit minus the publish rate; with no limit, at the
    observed dispatch rate minus the publish rate.  ``drain_status`` is ``empty`` (no
    backlog), ``draining`` (``drain_seconds`` is the estimate) or ``never`` (the drain rate is
    not positive; ``drain_seconds`` is null).  ``growth_rank`` orders subscriptions within a
    window, fastest growing first.
    """
    intervals = _with_window(intervals, window)
    x = F.col("ts") / 1000.0 - F.unix_timestamp("window_start")
    y = F.col("backlog_msgs").cast("double")
    sums = intervals.groupBy("window", "window_start", *KEY).agg(
        F.count(F.lit(1)).cast("int").alias("intervals"),
        F.max_by("backlog_msgs", "ts").alias("backlog_msgs"),
        F.max_by("backlog_bytes", "ts").alias("backlog_bytes"),
        F.max("backlog_msgs").alias("max_backlog_msgs"),
        (F.sum("msg_in") / F.sum("seconds")).alias("publish_rate"),
        (F.sum("msg_out") / F.sum("seconds")).alias("dispatch_rate"),
        F.max_by("limit_msg", "ts").alias("limit_msg_per_s"),
        F.sum(x).alias("sx"),
        F.sum(y).alias("sy"),
        F.sum(x * y).alias("sxy"),
        F.sum(x * x).alias("sxx"),
    )
    n = F.col("intervals")
    denominator = n * F.col("sxx") - F.col("sx") * F.col("sx")
    growth = F.when(
        denominator > 1e-9, (n * F.col("sxy") - F.col("sx") * F.col("sy")) / denominator
    ).otherwise(F.lit(0.0))
    capacity = F.coalesce(F.col("limit_msg_per_s"), F.col("dispatch_rate"))
    drain_rate = capacity - F.col("publish_rate")
    empty = F.col("backlog_msgs") <= 0
    rank_window = Window.partitionBy("window", "window_start").orderBy(
        F.desc("growth_per_s"), F.desc("backlog_msgs"), *KEY
    )
    return (
        sums.withColumns({"growth_per_s": growth, "drain_rate": drain_rate})
        .withColumns(
            {
                "drain_status": F.when(empty, "empty")
                .when(F.col("drain_rate") > 0, "draining")
                .otherwise("never"),
                "drain_seconds": F.when(empty, F.lit(0.0)).when(
                    F.col("drain_rate") > 0, F.col("backlog_msgs") / F.col("drain_rate")
                ),
                "growth_rank": F.row_number().over(rank_window),
            }
        )
        .drop("sx", "sy", "sxy", "sxx")
    )


def top_growing(backlog: DataFrame, n: int) -> DataFrame:
    """The ``n`` fastest-growing backlogs of each window."""
    return backlog.where((F.col("growth_rank") <= n) & (F.col("growth_per_s") > 0))
