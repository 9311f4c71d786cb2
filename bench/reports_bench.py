"""Report jobs on 10 and 20 million synthetic snapshot rows, against DuckDB on the same data.

    python -m bench.reports_bench [--quick] [--windows hour,day]

Writes synthetic snapshots (1,000 subscriptions over 100 topics, 10 s intervals) into a
Parquet lake, then times each job as the scheduler runs it (read, transform, write the
results to a scratch PostgreSQL database over JDBC, record the run) on ``local[2]``; then the
same with twice the rows.  The baseline, measured in the same run, is the rate report
computed by DuckDB (two threads, in process) from the same Parquet files.  Generation is
not timed, nor is a first run of both jobs on a small lake that warms the JVM up (without it
the first size would also pay for compiling the aggregation code).  ``--quick`` uses 200
thousand and 400 thousand rows and no warm-up.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.harness import pg_server_url, report
from migrations import upgrade
from models.db import create_scratch_database, drop_database, make_sync_engine
from models.settings import Settings
from reports.jobs import run_job
from reports.session import spark_session
from reports.store import RunStore

SUBSCRIPTIONS = 1000
SUBS_PER_TOPIC = 10
INTERVAL_MS = 10_000
START = datetime(2026, 1, 1, tzinfo=UTC)

DUCKDB_RATE_REPORT = """
WITH iv AS (
  SELECT tenant, namespace, topic, subscription, round(ts / interval_ms) AS interval,
         max(ts) AS ts, max(interval_ms) / 1000.0 AS seconds, count(*) AS partitions,
         sum(interval_ms) / 1000.0 AS partition_seconds,
         sum(msg_out) AS msg_out, sum(bytes_out) AS bytes_out,
         {limit_msg}, {limit_byte},
         mode(limit_msg_limiter) AS limiter, mode(limit_msg_source) AS source,
         sum(throttled_broker) > 0 AS tb, sum(throttled_topic) > 0 AS tt,
         sum(throttled_subscription) > 0 AS tsub
  FROM read_parquet('{{path}}/**/*.parquet', hive_partitioning = true)
  WHERE subscription <> '' AND ts >= {{since_ms}} AND ts < {{until_ms}}
  GROUP BY ALL
), w AS (
  SELECT *, msg_out / seconds AS rate,
         date_trunc('{{window}}', make_timestamp(CAST((ts - seconds * 1000) * 1000 AS BIGINT)))
           AS window_start
  FROM iv
)
SELECT window_start, tenant, namespace, topic, subscription, count(*) AS intervals,
       max(partitions), sum(msg_out), sum(bytes_out), sum(msg_out) / sum(seconds) AS avg_rate,
       max(rate), quantile_cont(rate, 0.5), quantile_cont(rate, 0.95),
       sum(bytes_out) / sum(seconds), {window_msg}, {window_byte},
       arg_max(limiter, ts), arg_max(source, ts),
       greatest(sum(msg_out) FILTER (WHERE limit_msg IS NOT NULL) / sum(allowed_msgs),
                sum(bytes_out) FILTER (WHERE limit_byte IS NOT NULL) / sum(allowed_bytes)),
       avg(CAST(tb OR tt OR tsub AS INT)), avg(CAST(tb AS INT)), avg(CAST(tt AS INT)),
       avg(CAST(tsub AS INT))
FROM w GROUP BY ALL
"""


def _interval_limits(unit: str, column: str) -> str:
    """The per-interval limit columns of one unit, as the Spark job computes them."""
    every = f"count({column}) = count(*)"
    return (
        f"CASE WHEN {every} THEN sum({column}) END AS limit_{unit}, "
        f"CASE WHEN {every} THEN min({column}) END AS limit_{unit}_min, "
        f"CASE WHEN {every} THEN max({column}) END AS limit_{unit}_max, "
        f"CASE WHEN {every} THEN sum({column} * interval_ms / 1000.0) END AS allowed_{unit}s"
    )


def _window_limits(unit: str) -> str:
    """The rate report's limit columns of one unit over a window's intervals."""
    limited = f"FILTER (WHERE limit_{unit} IS NOT NULL)"
    return (
        f"sum(allowed_{unit}s) / sum(partition_seconds) {limited}, "
        f"min(limit_{unit}_min), max(limit_{unit}_max), "
        f"sum(allowed_{unit}s) / sum(seconds) {limited}, "
        f"min(limit_{unit}), max(limit_{unit}), arg_max(limit_{unit}, ts), "
        f"coalesce(sum(seconds) {limited}, 0) / sum(seconds), sum(allowed_{unit}s)"
    )


DUCKDB_RATE_REPORT = DUCKDB_RATE_REPORT.format(
    limit_msg=_interval_limits("msg", "limit_msg_per_s"),
    limit_byte=_interval_limits("byte", "limit_byte_per_s"),
    window_msg=_window_limits("msg"),
    window_byte=_window_limits("byte"),
)


def generate(spark, lake: Path, rows: int) -> tuple[datetime, datetime]:
    """Write ``rows`` synthetic snapshots into ``lake``; return the time range they cover."""
    from pyspark.sql import functions as F

    intervals = rows // SUBSCRIPTIONS
    start_ms = int(START.timestamp() * 1000)
    frame = (
        spark.range(rows)
        .withColumns(
            {
                "sub_index": F.col("id") % SUBSCRIPTIONS,
                "step": (F.col("id") / SUBSCRIPTIONS).cast("long"),
            }
        )
        .withColumns(
            {
                "snapshot_id": F.concat(F.col("id").cast("string"), F.lit("-0")),
                "ts": F.lit(start_ms) + (F.col("step") + 1) * INTERVAL_MS,
                "interval_ms": F.lit(INTERVAL_MS).cast("long"),
                "worker": F.lit("bench-worker"),
                "tenant": F.lit("bench"),
                "namespace": F.lit("ns"),
                "topic": F.concat(
                    F.lit("persistent://bench/ns/t"),
                    (F.col("sub_index") / SUBS_PER_TOPIC).cast("long").cast("string"),
                ),
                "partition": F.lit(-1).cast("long"),
                "subscription": F.concat(
                    F.lit("s"), (F.col("sub_index") % SUBS_PER_TOPIC).cast("string")
                ),
                "msg_in": (F.rand(1) * 1200).cast("long"),
                "bytes_in": (F.rand(2) * 120_000).cast("long"),
                "msg_out": (F.rand(3) * 1000).cast("long"),
                "bytes_out": (F.rand(4) * 100_000).cast("long"),
                "msg_redelivered": F.lit(0).cast("long"),
                "throttled_broker": F.lit(0).cast("long"),
                "throttled_topic": (F.rand(5) * 2).cast("long"),
                "throttled_subscription": (F.rand(6) * 1.3).cast("long"),
                "backlog_msgs": (F.col("step") * F.col("sub_index") % 100_000).cast("long"),
                "backlog_bytes": (F.col("step") * F.col("sub_index") % 100_000 * 100).cast("long"),
                "unacked": F.lit(10).cast("long"),
                "consumers": F.lit(1).cast("long"),
                "limit_msg_per_s": F.lit(100.0),
                "limit_byte_per_s": F.lit(None).cast("double"),
                "limit_msg_limiter": F.lit("topic"),
                "limit_byte_limiter": F.lit(None).cast("string"),
                "limit_msg_source": F.lit("namespace"),
                "limit_byte_source": F.lit(None).cast("string"),
            }
        )
        .withColumns(
            {
                "date": F.date_format(F.timestamp_millis("ts"), "yyyy-MM-dd"),
                "hour": F.date_format(F.timestamp_millis("ts"), "HH"),
            }
        )
        .drop("id", "sub_index", "step")
    )
    frame.write.mode("overwrite").partitionBy("date", "hour").parquet(str(lake / "snapshots"))
    end = START + timedelta(milliseconds=(intervals + 1) * INTERVAL_MS)
    return START, end


def duckdb_rate_report(lake: Path, since: datetime, until: datetime, window: str) -> int:
    """The rate report computed by DuckDB; returns its row count."""
    import duckdb

    connection = duckdb.connect()
    connection.execute("SET threads TO 2")
    query = DUCKDB_RATE_REPORT.format(
        path=lake / "snapshots",
        since_ms=int(since.timestamp() * 1000),
        until_ms=int(until.timestamp() * 1000),
        window=window,
    )
    rows = len(connection.execute(query).fetchall())
    connection.close()
    return rows


def both_jobs(spark, store, lake: Path, since, until, windows) -> dict:
    """Run the rates and the backlog job as the scheduler does; their results by job."""
    return {
        job: run_job(
            spark,
            store,
            str(lake),
            job,
            since=since,
            until=until,
            windows=windows,
            budget_seconds=3600,
        )
        for job in ("rates", "backlog")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--windows", default="hour,day", help="report windows (default hour,day)")
    args = parser.parse_args()
    sizes = (200_000, 400_000) if args.quick else (10_000_000, 20_000_000)
    windows = tuple(args.windows.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="sluice-reports-bench-"))
    database_url = create_scratch_database(pg_server_url(), "sluice_bench")
    upgrade(database_url)
    engine = make_sync_engine(database_url)
    settings = Settings(
        spark_master="local[2]", spark_shuffle_partitions=8, spark_driver_memory="6g"
    )
    spark = spark_session(settings, "sluice-reports-bench")
    store = RunStore(engine, database_url, settings.jdbc_jar)
    figures: list[dict] = []
    try:
        if not args.quick:
            lake = tmp / "warm-up"
            since, until = generate(spark, lake, 200_000)
            both_jobs(spark, store, lake, since, until, windows)
            shutil.rmtree(lake, ignore_errors=True)
        for rows in sizes:
            lake = tmp / f"lake-{rows}"
            since, until = generate(spark, lake, rows)
            started = time.perf_counter()
            answer = duckdb_rate_report(lake, since, until, windows[0])
            duck = time.perf_counter() - started
            job_seconds = {
                job: (result.seconds, result.rows)
                for job, result in both_jobs(spark, store, lake, since, until, windows).items()
            }
            both = sum(s for s, _ in job_seconds.values())
            figures.append(
                {
                    "snapshot rows": f"{rows:,}",
                    "rates job s": job_seconds["rates"][0],
                    "backlog job s": job_seconds["backlog"][0],
                    "both jobs s": both,
                    "snapshot rows/s (both jobs)": rows / both,
                    "result rows": job_seconds["rates"][1] + job_seconds["backlog"][1],
                    f"DuckDB rate report ({windows[0]}) s": duck,
                    "DuckDB rows": answer,
                    "rates job / DuckDB": job_seconds["rates"][0] / duck,
                }
            )
            shutil.rmtree(lake, ignore_errors=True)
            figures[-1]["both jobs / first size"] = both / figures[0]["both jobs s"]
    finally:
        spark.stop()
        engine.dispose()
        drop_database(pg_server_url(), database_url)
        shutil.rmtree(tmp, ignore_errors=True)
    report(
        f"Report jobs on local[2] ({', '.join(windows)} windows), baseline DuckDB (2 threads)",
        figures,
        args.json,
    )


if __name__ == "__main__":
    main()
