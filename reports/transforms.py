"""Pure DataFrame transforms of the report jobs: snapshots in, report rows out.

Nothing here reads, writes or looks at the clock; every parameter is an argument, so each
function is tested on small explicit DataFrames.

Grain.  Workers emit one snapshot per (topic partition, subscription) per interval.
``subscription_intervals`` first sums the partitions of a topic into one row per
(topic, subscription, interval): rates add up across partitions, and so do their limits
(Pulsar's dispatch rates apply per partition), while the interval keeps the smallest and
largest partition limit and what the limiters allowed (as the workers measured it, per
partition, summed).  Reports then aggregate those interval rows into minute, hour or day
windows (UTC); an interval counts in the window where it started.

Limits over a window.  A snapshot carries the limit in force at its end and what the limits
allowed over its interval (the worker integrates them over time, so a change counts from the
moment it was applied); the report counts the interval as limited when it ended limited,
with what was allowed in it.  Per subscription and window the rate report gives the
time-weighted average, the minimum and the maximum of the limit, per partition and for the
whole topic, over the time a limit was in force (``limited_share`` says how much of the
window that was), and utilisation is what was delivered over what the limiters allowed in
those intervals.  docs/reports.md describes every column and states what stays approximate
("How exact the limit columns are"): min and max see the limits at the ends of intervals,
and a limit set or removed inside an interval counts it as limited or not by its end.

One pass for every window.  Each report is built in three steps: ``*_partials`` aggregates
intervals into the finest window as mergeable columns (sums, maxima, the last value with its
time, a quantile sketch), ``roll_up_*`` merges those into a coarser window, and ``finish_*``
turns partials into report rows.  Called with several windows, ``RATES`` and ``BACKLOG``
read the intervals once and derive hours from minutes and days from hours, which is what
makes a run over many windows cost about one aggregation of the snapshots.

Percentiles come from KLL sketches (Apache DataSketches, as Spark ships them), which merge
across windows: nearest-rank and exact for a window of up to ``SKETCH_K`` intervals (an hour
of 10 s snapshots), and beyond that within 0.7 % of rank (the sketch's bound at 99 %
confidence).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from models.reports import WINDOW_SECONDS

LEVELS = ("broker", "topic", "subscription")  # the limiters
LEVEL_NAMES = ("broker", "namespace", "topic", "subscription")  # where a value can come from
KEY = ("tenant", "namespace", "topic", "subscription")
# The KLL sketch size: exact up to this many values, rank error under 0.7 % beyond.
SKETCH_K = 400
GROUP = ("window", "window_start", *KEY)
# The limits of a snapshot: the unit, and the snapshot column with the limit in force.
LIMIT_COLUMNS = (("msg", "limit_msg_per_s"), ("byte", "limit_byte_per_s"))
# The snapshot column with what that limit allowed over the interval (by unit).
ALLOWED_COLUMNS = {"msg": "allowed_msgs", "byte": "allowed_bytes"}


# Message priorities (docs/priority.md); a snapshot's ``priority_levels`` is JSON text
# {"<priority>": [messages out in the interval, messages waiting at its end]}.
PRIORITIES = tuple(range(9, -1, -1))
PRIORITY_SCHEMA = "map<string,array<bigint>>"


_RATE_LEVEL_SUMS = tuple(f"out_p{level}" for level in PRIORITIES)
_BACKLOG_LEVEL_VALUES = tuple(f"waiting_p{level}" for level in PRIORITIES)


def _if_prioritized(frame: DataFrame, columns: list[Column]) -> list[Column]:
    """``columns`` when ``frame`` carries per-priority columns (``subscription_intervals``
    was asked for them), else none."""
    return columns if "prioritized" in frame.columns else []


def _priority_columns(levels: Column) -> dict[str, Column]:
    """A snapshot's per-priority figures from its parsed ``levels``: ``prioritized`` (1 when it
    had any), ``out_p<L>`` and ``waiting_p<L>`` (0 where absent)."""
    columns = {"prioritized": levels.isNotNull().cast("int")}
    for level in PRIORITIES:
        pair = levels.getItem(str(level))
        columns[f"out_p{level}"] = F.coalesce(pair.getItem(0), F.lit(0)).cast("long")
        columns[f"waiting_p{level}"] = F.coalesce(pair.getItem(1), F.lit(0)).cast("long")
    return columns


def _levels_json(partials: DataFrame, figures: Callable[[int], Column], kept: str) -> Column:
    """A report row's ``priority_levels``: JSON {"<priority>": {figures}}, highest first, of
    the levels whose ``kept`` figure is above 0; null for a subscription that saw none (and
    for all of them when ``partials`` carry no per-priority columns)."""
    if "prioritized" not in partials.columns:
        return F.lit(None).cast("string")
    levels = F.create_map(*[x for level in PRIORITIES for x in (F.lit(str(level)), figures(level))])
    kept_levels = F.map_filter(levels, lambda _level, value: value.getField(kept) > 0)
    return F.when(F.col("prioritized") > 0, F.to_json(kept_levels))


def _allowed(unit: str, column: str, seconds: Column) -> Column:
    """What one partition's limiter allowed in an interval it ended limited: the integral the
    worker measured (exact to the moment a limit changed), or, in snapshots of workers that
    did not measure it, the limit at the end x the interval's length."""
    return F.coalesce(F.col(ALLOWED_COLUMNS[unit]), F.col(column) * seconds)


def _code(column: str) -> Column:
    """A level name as its position in ``LEVEL_NAMES`` (1-based), null stays null."""
    code = F.lit(None).cast("int")
    for index, name in reversed(list(enumerate(LEVEL_NAMES, 1))):
        code = F.when(F.col(column) == name, index).otherwise(code)
    return code


def _name(code: Column) -> Column:
    """The level name of a code made by ``_code``."""
    return F.element_at(F.array(*[F.lit(n) for n in LEVEL_NAMES]), code)


def _limit_columns(unit: str, column: str) -> dict[str, Column]:
    """Per-interval limit columns of one unit (``msg`` or ``byte``) over a topic's partition
    rows: the topic's limit (the partitions' sum), the smallest and largest partition limit,
    and what the limiters allowed (``_allowed``, per partition, summed).  All null when
    any partition has no limit: the topic is not limited in that interval."""
    every = F.count(column) == F.count(F.lit(1))
    return {
        f"limit_{unit}": F.when(every, F.sum(column)),
        f"limit_{unit}_min": F.when(every, F.min(column)),
        f"limit_{unit}_max": F.when(every, F.max(column)),
        f"allowed_{unit}s": F.when(
            every, F.sum(_allowed(unit, column, F.col("interval_ms") / 1000.0))
        ),
    }


def _merge_partitions(rows: DataFrame, levels: Mapping[str, Column]) -> DataFrame:
    """The snapshots of a partitioned topic's subscription summed per interval (see
    ``subscription_intervals``)."""
    return (
        rows.where(F.col("partition") >= 0)
        .groupBy(*KEY, "interval")
        .agg(
            F.max("ts").alias("ts"),
            (F.max("interval_ms") / 1000.0).alias("seconds"),
            F.count(F.lit(1)).alias("partitions"),
            (F.sum("interval_ms") / 1000.0).alias("partition_seconds"),
            F.sum("msg_in").alias("msg_in"),
            F.sum("msg_out").alias("msg_out"),
            F.sum("bytes_out").alias("bytes_out"),
            F.sum("backlog_msgs").alias("backlog_msgs"),
            F.sum("backlog_bytes").alias("backlog_bytes"),
            *[
                expression.alias(name)
                for unit, column in LIMIT_COLUMNS
                for name, expression in _limit_columns(unit, column).items()
            ],
            F.max(_code("limit_msg_limiter")).alias("limiter_msg"),
            F.max(_code("limit_byte_limiter")).alias("limiter_byte"),
            F.max(_code("limit_msg_source")).alias("source_msg"),
            F.max(_code("limit_byte_source")).alias("source_byte"),
            *[(F.sum(f"throttled_{level}") > 0).alias(f"throttled_{level}") for level in LEVELS],
            *[
                (F.max(column) if name == "prioritized" else F.sum(column)).alias(name)
                for name, column in levels.items()
            ],
        )
    )


def subscription_intervals(snapshots: DataFrame, priorities: bool = False) -> DataFrame:
    """One row per (topic, subscription, interval) with the partitions summed.

    Snapshots of a topic's partitions taken in the same tick share an interval: the interval
    index is ``ts / interval_ms`` rounded, which tolerates a tick's jitter.  A non-partitioned
    topic has one snapshot per interval already, so only partitions are grouped (a shuffle of
    every row is what costs most here).  Partition-level rows without a subscription are left
    out.  ``partitions`` counts the partition rows of the interval and ``partition_seconds``
    their seconds; the limit columns are those of ``_limit_columns``.
    """
    rows = snapshots.where(F.col("subscription") != "").withColumn(
        "interval", F.round(F.col("ts") / F.col("interval_ms")).cast("long")
    )
    # Per-priority columns only when asked (some snapshot has priorities): they cost every
    # aggregation of the reports a fifth more columns.
    levels: dict[str, Column] = {}
    if priorities:
        rows = rows.withColumn("levels", F.from_json("priority_levels", PRIORITY_SCHEMA))
        levels = _priority_columns(F.col("levels"))
    # Levels travel as numbers: aggregates over strings would force sort-based plans.
    # Partitions of a topic share their limits' levels; if not, the narrowest wins.
    seconds = F.col("interval_ms") / 1000.0
    single = rows.where(F.col("partition") < 0).select(
        *KEY,
        "interval",
        "ts",
        seconds.alias("seconds"),
        F.lit(1).cast("long").alias("partitions"),
        seconds.alias("partition_seconds"),
        "msg_in",
        "msg_out",
        "bytes_out",
        "backlog_msgs",
        "backlog_bytes",
        *[
            expression.alias(name)
            for unit, column in LIMIT_COLUMNS
            for name, expression in {
                f"limit_{unit}": F.col(column),
                f"limit_{unit}_min": F.col(column),
                f"limit_{unit}_max": F.col(column),
                f"allowed_{unit}s": F.when(
                    F.col(column).isNotNull(), _allowed(unit, column, seconds)
                ),
            }.items()
        ],
        _code("limit_msg_limiter").alias("limiter_msg"),
        _code("limit_byte_limiter").alias("limiter_byte"),
        _code("limit_msg_source").alias("source_msg"),
        _code("limit_byte_source").alias("source_byte"),
        *[(F.col(f"throttled_{level}") > 0).alias(f"throttled_{level}") for level in LEVELS],
        *[column.alias(name) for name, column in levels.items()],
    )
    merged = _merge_partitions(rows, levels)
    grouped = single.unionByName(merged)
    return grouped.withColumns(
        {
            "rate": F.col("msg_out") / F.col("seconds"),
            "byte_rate": F.col("bytes_out") / F.col("seconds"),
            "throttled": F.greatest(*[F.col(f"throttled_{level}") for level in LEVELS]),
        }
    )


def _window_of(window: str) -> str:
    if window not in WINDOW_SECONDS:
        raise ValueError(f"unknown window '{window}': use one of {sorted(WINDOW_SECONDS)}")
    return window


def _with_window(intervals: DataFrame, window: str) -> DataFrame:
    return intervals.withColumns(
        {
            "window": F.lit(_window_of(window)),
            # An interval belongs to the window in which it started.
            "window_start": F.date_trunc(
                window,
                F.timestamp_millis(F.col("ts") - (F.col("seconds") * 1000).cast("long")),
            ),
        }
    )


def _coarser(partials: DataFrame, window: str) -> DataFrame:
    """Partials relabelled to the ``window`` that contains each of their windows."""
    return partials.withColumns(
        {
            "window": F.lit(_window_of(window)),
            "window_start": F.date_trunc(window, "window_start"),
        }
    )


def _count(column: str) -> Column:
    return F.sum(F.col(column).cast("long"))


def _ratio(numerator: str, denominator: str) -> Column:
    return F.try_divide(F.col(numerator), F.col(denominator))


def finest_window(windows: Iterable[str]) -> str:
    """The shortest of ``windows``: the one aggregated from intervals."""
    order = sorted((_window_of(w) for w in windows), key=WINDOW_SECONDS.__getitem__)
    if not order:
        raise ValueError("no report windows")
    return order[0]


@dataclass(frozen=True, slots=True)
class Report:
    """A report as its three steps (see the module docstring)."""

    partials: Callable[[DataFrame, str], DataFrame]
    roll_up: Callable[[DataFrame, str], DataFrame]
    finish: Callable[[DataFrame], DataFrame]

    def from_partials(self, finest: DataFrame, starts: Mapping[str, datetime]) -> DataFrame:
        """Rows of every window in ``starts`` (window -> first window start to report) from
        ``finest``, the partials of the finest of them; each coarser window is rolled up
        from the one before.  ``finest`` is used by every window: a caller may cache it."""
        order = sorted((_window_of(w) for w in starts), key=WINDOW_SECONDS.__getitem__)
        frames = []
        level = finest
        for index, window in enumerate(order):
            if index:
                level = self.roll_up(level, window)
            frames.append(self.finish(level.where(F.col("window_start") >= F.lit(starts[window]))))
        return reduce(DataFrame.unionByName, frames)

    def window(self, intervals: DataFrame, window: str) -> DataFrame:
        """Rows of one ``window`` from subscription intervals."""
        return self.finish(self.partials(intervals, window))

    def __call__(self, intervals: DataFrame, starts: Mapping[str, datetime]) -> DataFrame:
        """Rows of every window in ``starts`` from subscription intervals, in one pass."""
        return self.from_partials(self.partials(intervals, finest_window(starts)), starts)


# The two units a limit comes in: the prefix of their interval columns, of their report columns.
UNITS = (("msg", ""), ("byte", "byte_"))


def _limit_partials(unit: str) -> list[Column]:
    """Mergeable aggregates of one unit's limit over intervals (see ``finish_rates``)."""
    limited = F.col(f"limit_{unit}").isNotNull()
    return [
        F.sum(F.when(limited, F.col("seconds"))).alias(f"limited_{unit}_seconds"),
        F.sum(F.when(limited, F.col("partition_seconds"))).alias(
            f"limited_{unit}_partition_seconds"
        ),
        F.sum(f"allowed_{unit}s").alias(f"allowed_{unit}s"),
        F.min(f"limit_{unit}").alias(f"limit_{unit}_topic_min"),
        F.max(f"limit_{unit}").alias(f"limit_{unit}_topic_max"),
        F.min(f"limit_{unit}_min").alias(f"limit_{unit}_partition_min"),
        F.max(f"limit_{unit}_max").alias(f"limit_{unit}_partition_max"),
        F.sum(F.when(limited, F.col("msg_out" if unit == "msg" else "bytes_out"))).alias(
            f"limited_{unit}_out"
        ),
        F.max_by(f"limit_{unit}", "ts").alias(f"limit_{unit}_at_end"),
    ]


def rate_partials(intervals: DataFrame, window: str) -> DataFrame:
    """Mergeable aggregates of the rate report per subscription per ``window``."""
    intervals = _with_window(intervals, window)
    return intervals.groupBy(*GROUP).agg(
        F.count(F.lit(1)).alias("intervals"),
        F.max("partitions").alias("partitions"),
        F.sum("msg_out").alias("msg_out"),
        F.sum("bytes_out").alias("bytes_out"),
        F.sum("seconds").alias("seconds"),
        F.max("rate").alias("peak_rate"),
        F.kll_sketch_agg_double("rate", SKETCH_K).alias("rate_sketch"),
        F.max("ts").alias("last_ts"),
        *[c for unit, _ in UNITS for c in _limit_partials(unit)],
        F.max_by(F.coalesce("limiter_msg", "limiter_byte"), "ts").alias("limiter_code"),
        F.max_by(F.coalesce("source_msg", "source_byte"), "ts").alias("source_code"),
        _count("throttled").alias("throttled_intervals"),
        *[_count(f"throttled_{level}").alias(f"throttled_{level}_intervals") for level in LEVELS],
        *_if_prioritized(
            intervals,
            [
                F.max("prioritized").alias("prioritized"),
                *[F.sum(c).alias(c) for c in _RATE_LEVEL_SUMS],
            ],
        ),
    )


_RATE_SUMS = (
    "intervals",
    "msg_out",
    "bytes_out",
    "seconds",
    *[
        name
        for unit, _ in UNITS
        for name in (
            f"limited_{unit}_seconds",
            f"limited_{unit}_partition_seconds",
            f"allowed_{unit}s",
            f"limited_{unit}_out",
        )
    ],
    "throttled_intervals",
    *[f"throttled_{level}_intervals" for level in LEVELS],
)
_RATE_MINS = tuple(
    name for unit, _ in UNITS for name in (f"limit_{unit}_topic_min", f"limit_{unit}_partition_min")
)
_RATE_MAXES = (
    "partitions",
    "peak_rate",
    *[
        name
        for unit, _ in UNITS
        for name in (f"limit_{unit}_topic_max", f"limit_{unit}_partition_max")
    ],
)
_LAST_RATE_VALUES = (
    *[f"limit_{unit}_at_end" for unit, _ in UNITS],
    "limiter_code",
    "source_code",
)


def roll_up_rates(partials: DataFrame, window: str) -> DataFrame:
    """Rate partials of a finer window merged into ``window``."""
    return (
        _coarser(partials, window)
        .groupBy(*GROUP)
        .agg(
            *[F.sum(c).alias(c) for c in _RATE_SUMS],
            *[F.min(c).alias(c) for c in _RATE_MINS],
            *[F.max(c).alias(c) for c in _RATE_MAXES],
            F.kll_merge_agg_double("rate_sketch", SKETCH_K).alias("rate_sketch"),
            F.max("last_ts").alias("last_ts"),
            *[F.max_by(c, "last_ts").alias(c) for c in _LAST_RATE_VALUES],
            *_if_prioritized(
                partials,
                [
                    F.max("prioritized").alias("prioritized"),
                    *[F.sum(c).alias(c) for c in _RATE_LEVEL_SUMS],
                ],
            ),
        )
    )


def _limit_report_columns(unit: str, prefix: str) -> list[Column]:
    """One unit's limit columns of a report row, named with ``prefix`` (``byte_`` or none)."""
    return [
        _ratio(f"allowed_{unit}s", f"limited_{unit}_partition_seconds").alias(
            f"{prefix}limit_per_partition_avg"
        ),
        F.col(f"limit_{unit}_partition_min").alias(f"{prefix}limit_per_partition_min"),
        F.col(f"limit_{unit}_partition_max").alias(f"{prefix}limit_per_partition_max"),
        _ratio(f"allowed_{unit}s", f"limited_{unit}_seconds").alias(f"{prefix}limit_topic_avg"),
        F.col(f"limit_{unit}_topic_min").alias(f"{prefix}limit_topic_min"),
        F.col(f"limit_{unit}_topic_max").alias(f"{prefix}limit_topic_max"),
        F.col(f"limit_{unit}_at_end").alias(f"{prefix}limit_topic_at_end"),
        (F.coalesce(F.col(f"limited_{unit}_seconds"), F.lit(0.0)) / F.col("seconds")).alias(
            f"{prefix}limited_share"
        ),
        F.col(f"allowed_{unit}s").alias(f"allowed_{unit}s"),
    ]


def finish_rates(partials: DataFrame) -> DataFrame:
    """Report rows from rate partials.

    Limits (messages, and bytes with the ``byte_`` prefix) count over the intervals in which
    the topic had one, each for its length: ``limit_topic_avg`` is what the limiters allowed
    (``allowed_msgs``) over those seconds, ``limit_per_partition_avg`` the same over the
    partitions' seconds; min and max are the extremes over those intervals (per partition:
    over every partition); ``limit_topic_at_end`` is the limit of the window's last interval
    and ``limited_share`` the share of the window's seconds that had a limit.

    ``utilisation`` is what was delivered over what the limiters allowed, on the intervals that
    had a limit (messages or bytes, whichever is higher, i.e. the binding one); null when no
    limit applied.  ``throttled_share`` is the share of intervals in which some limiter cut
    dispatch short; ``throttled_by`` the level that did so most often.
    """
    shares = [F.col(f"throttled_{level}_share") for level in LEVELS]
    most = F.greatest(*shares)
    throttled_by = F.lit(None).cast("string")
    for level, share in zip(reversed(LEVELS), reversed(shares), strict=True):
        # The narrowest level wins a tie: it is the one a user would change.
        throttled_by = F.when((F.col("throttled_share") > 0) & (share == most), level).otherwise(
            throttled_by
        )
    rows = partials.select(
        *GROUP,
        F.col("intervals").cast("int").alias("intervals"),
        F.col("partitions").cast("int").alias("partitions"),
        "msg_out",
        "bytes_out",
        _ratio("msg_out", "seconds").alias("avg_rate"),
        "peak_rate",
        F.kll_sketch_get_quantile_double("rate_sketch", F.lit(0.5)).alias("p50_rate"),
        F.kll_sketch_get_quantile_double("rate_sketch", F.lit(0.95)).alias("p95_rate"),
        _ratio("bytes_out", "seconds").alias("avg_byte_rate"),
        *[c for unit, prefix in UNITS for c in _limit_report_columns(unit, prefix)],
        _ratio("throttled_intervals", "intervals").alias("throttled_share"),
        *[
            _ratio(f"throttled_{level}_intervals", "intervals").alias(f"throttled_{level}_share")
            for level in LEVELS
        ],
        F.greatest(
            _ratio("limited_msg_out", "allowed_msgs"), _ratio("limited_byte_out", "allowed_bytes")
        ).alias("utilisation"),
        "limiter_code",
        "source_code",
        _levels_json(
            partials,
            lambda level: F.struct(
                F.col(f"out_p{level}").alias("msgOut"),
                _ratio(f"out_p{level}", "seconds").alias("avgRate"),
            ),
            "msgOut",
        ).alias("priority_levels"),
    )
    return rows.withColumns(
        {
            "throttled_by": throttled_by,
            "limit_limiter": _name(F.col("limiter_code")),
            "limit_source": _name(F.col("source_code")),
        }
    ).drop("limiter_code", "source_code")


def rate_report(snapshots: DataFrame, window: str, priorities: bool = False) -> DataFrame:
    """The rate report of one ``window`` from raw snapshots (``finish_rates``)."""
    return RATES.window(subscription_intervals(snapshots, priorities), window)


def backlog_partials(intervals: DataFrame, window: str) -> DataFrame:
    """Mergeable aggregates of the backlog report per subscription per ``window``: the
    least-squares sums take time as seconds since the window's start.  Each interval is a
    partial of its own (one interval, its sums of x at 0, the offset ``o`` its x), merged as
    ``_merge_backlog`` merges a finer window's partials."""
    intervals = _with_window(intervals, window)
    zero = F.lit(0.0)
    return _merge_backlog(
        intervals.select(
            *GROUP,
            F.lit(1).cast("long").alias("intervals"),
            F.col("ts").alias("last_ts"),
            "backlog_msgs",
            "backlog_bytes",
            F.col("backlog_msgs").alias("max_backlog_msgs"),
            "msg_in",
            "msg_out",
            "seconds",
            F.col("limit_msg").alias("limit_topic_at_end"),
            zero.alias("sx"),
            F.col("backlog_msgs").cast("double").alias("sy"),
            zero.alias("sxy"),
            zero.alias("sxx"),
            (F.col("ts") / 1000.0 - F.unix_timestamp("window_start")).alias("o"),
            *_if_prioritized(
                intervals, [F.col(c) for c in ("prioritized", *_BACKLOG_LEVEL_VALUES)]
            ),
        )
    )


def roll_up_backlog(partials: DataFrame, window: str) -> DataFrame:
    """Backlog partials of a finer window merged into ``window``, each offset ``o`` from the
    new start by its finer window's start."""
    coarse = _coarser(partials.withColumn("fine_start", F.col("window_start")), window)
    o = F.unix_timestamp("fine_start") - F.unix_timestamp("window_start")
    return _merge_backlog(coarse.withColumn("o", o.cast("double")))


def _merge_backlog(partials: DataFrame) -> DataFrame:
    """Backlog partials merged per ``GROUP``; time in the least-squares sums moves by each
    partial's offset ``o`` from the window's start:
    sum(x + o) = sx + n o, sum((x + o) y) = sxy + o sy, sum((x + o)^2) = sxx + 2 o sx + n o^2."""
    o = F.col("o")
    n = F.col("intervals")
    return partials.groupBy(*GROUP).agg(
        F.sum("intervals").alias("intervals"),
        F.max("last_ts").alias("last_ts"),
        F.max_by("backlog_msgs", "last_ts").alias("backlog_msgs"),
        F.max_by("backlog_bytes", "last_ts").alias("backlog_bytes"),
        F.max("max_backlog_msgs").alias("max_backlog_msgs"),
        F.sum("msg_in").alias("msg_in"),
        F.sum("msg_out").alias("msg_out"),
        F.sum("seconds").alias("seconds"),
        F.max_by("limit_topic_at_end", "last_ts").alias("limit_topic_at_end"),
        F.sum(F.col("sx") + n * o).alias("sx"),
        F.sum("sy").alias("sy"),
        F.sum(F.col("sxy") + o * F.col("sy")).alias("sxy"),
        F.sum(F.col("sxx") + 2 * o * F.col("sx") + n * o * o).alias("sxx"),
        *_if_prioritized(
            partials,
            [
                F.max("prioritized").alias("prioritized"),
                *[F.max_by(c, "last_ts").alias(c) for c in _BACKLOG_LEVEL_VALUES],
            ],
        ),
    )


def least_squares_slope() -> Column:
    """The slope of the least-squares line through ``intervals`` points from their sums
    ``sx``, ``sy``, ``sxy`` and ``sxx``; 0 when the x hardly vary (one point)."""
    n = F.col("intervals")
    denominator = n * F.col("sxx") - F.col("sx") * F.col("sx")
    return F.when(
        denominator > 1e-9, (n * F.col("sxy") - F.col("sx") * F.col("sy")) / denominator
    ).otherwise(F.lit(0.0))


def finish_backlog(partials: DataFrame) -> DataFrame:
    """Report rows from backlog partials.

    ``growth_per_s`` is the least-squares slope of the backlog over the window's intervals.
    The backlog drains at the topic's message limit at the window's end
    (``limit_topic_at_end``, the partitions' limits summed) minus the publish rate; with no
    limit, at the observed dispatch rate minus the publish rate.  ``drain_status`` is ``empty`` (no
    backlog), ``draining`` (``drain_seconds`` is the estimate) or ``never`` (the drain rate is
    not positive; ``drain_seconds`` is null).  ``growth_rank`` orders subscriptions within a
    window, fastest growing first.
    """
    rows = partials.select(
        *GROUP,
        F.col("intervals").cast("int").alias("intervals"),
        "backlog_msgs",
        "backlog_bytes",
        "max_backlog_msgs",
        _ratio("msg_in", "seconds").alias("publish_rate"),
        _ratio("msg_out", "seconds").alias("dispatch_rate"),
        "limit_topic_at_end",
        least_squares_slope().alias("growth_per_s"),
        _levels_json(
            partials,
            lambda level: F.struct(F.col(f"waiting_p{level}").alias("msgBacklog")),
            "msgBacklog",
        ).alias("priority_levels"),
    )
    capacity = F.coalesce(F.col("limit_topic_at_end"), F.col("dispatch_rate"))
    empty = F.col("backlog_msgs") <= 0
    rank_window = Window.partitionBy("window", "window_start").orderBy(
        F.desc("growth_per_s"), F.desc("backlog_msgs"), *KEY
    )
    return rows.withColumn("drain_rate", capacity - F.col("publish_rate")).withColumns(
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


def backlog_report(snapshots: DataFrame, window: str, priorities: bool = False) -> DataFrame:
    """The backlog report of one ``window`` from raw snapshots (``finish_backlog``)."""
    return BACKLOG.window(subscription_intervals(snapshots, priorities), window)


RATES = Report(rate_partials, roll_up_rates, finish_rates)
BACKLOG = Report(backlog_partials, roll_up_backlog, finish_backlog)
