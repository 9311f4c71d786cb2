"""The report jobs: read snapshots from the lake, transform, write results, record the run.

Each job is a thin ``run_job`` call: the read and the write are here, the computation is in
``reports.transforms``.  A run recomputes every window that overlaps ``[since, until)`` from
the window's start, so a day window is always whole, and replaces earlier results for those
windows when it succeeds.  A run that exceeds its time budget is cancelled (its Spark jobs
are killed) and recorded as failed.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from models.reports import REPORT_JOBS, SPAN_WINDOW, WINDOW_SECONDS
from reports.advice import advice_rows
from reports.lake import ARROW_SCHEMA, holds_priorities, snapshots_path
from reports.store import RunStore
from reports.transforms import BACKLOG, RATES, Report, finest_window, subscription_intervals

log = logging.getLogger(__name__)

# Each job's report, computed from subscription intervals for every window of a run.
REPORTS: dict[str, Report] = {"rates": RATES, "backlog": BACKLOG}
# Jobs that report on a run's whole span, one row per subscription: snapshots, since -> rows.
SPAN_REPORTS = {"advice": advice_rows}
# A span job's run replaces every earlier run's rows (the advice is the latest one).
_EVERY_SPAN = datetime(1970, 1, 1, tzinfo=UTC)
JOBS = REPORT_JOBS

_SPARK_TYPES = {"string": StringType(), "int64": LongType(), "double": DoubleType()}
SNAPSHOT_SCHEMA = StructType(
    [StructField(f.name, _SPARK_TYPES[str(f.type)], f.nullable) for f in ARROW_SCHEMA]
    + [StructField("date", DateType()), StructField("hour", IntegerType())]
)


class TimeBudgetExceeded(RuntimeError):
    """A run took longer than its budget and was cancelled."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """What one job run did."""

    job: str
    run_id: int
    rows: int
    seconds: float
    attempt: int = 1


def window_floor(moment: datetime, window: str) -> datetime:
    """The start of the ``window`` (minute, hour, day; UTC) that contains ``moment``."""
    step = WINDOW_SECONDS[window]
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % step, UTC)


def read_snapshots(spark: SparkSession, lake_url: str, since: datetime, until: datetime):
    """Snapshots with ``since <= ts < until``, pruned to the date partitions in range."""
    try:
        frame = spark.read.schema(SNAPSHOT_SCHEMA).parquet(snapshots_path(lake_url))
    except AnalysisException as exc:
        if "PATH_NOT_FOUND" not in str(exc) and "does not exist" not in str(exc):
            raise
        frame = spark.createDataFrame([], SNAPSHOT_SCHEMA)
    return frame.where(
        (F.col("date") >= F.lit(since.date()))
        & (F.col("date") <= F.lit(until.date()))
        & (F.col("ts") >= int(since.timestamp() * 1000))
        & (F.col("ts") < int(until.timestamp() * 1000))
    ).drop("date", "hour")


@contextmanager
def time_budget(spark: SparkSession, seconds: float, group: str) -> Iterator[None]:
    """Cancel every Spark job started in this block once ``seconds`` have passed."""
    context = spark.sparkContext
    expired = threading.Event()

    def cancel() -> None:
        expired.set()
        context.cancelJobGroup(group)

    context.setJobGroup(group, f"sluice report run {group}", interruptOnCancel=True)
    timer = threading.Timer(seconds, cancel)
    timer.daemon = True
    timer.start()
    try:
        yield
    except Exception as exc:
        if expired.is_set():
            raise TimeBudgetExceeded(f"time budget of {seconds:g} s exceeded") from exc
        raise
    finally:
        timer.cancel()
        context.setLocalProperty("spark.jobGroup.id", None)
    if expired.is_set():
        raise TimeBudgetExceeded(f"time budget of {seconds:g} s exceeded")


def _write_windows(
    store: RunStore,
    job: str,
    run_id: int,
    snapshots,
    windows: tuple[str, ...],
    starts: dict[str, datetime],
    *,
    lake_url: str,
    until: datetime,
) -> None:
    """Compute and write the rows of a windowed job (minute, hour, day)."""
    report = REPORTS[job]
    # Per-priority figures cost every aggregation more columns: only when some snapshot in
    # range has them.  The Parquet footers say, without a Spark job; where this process
    # cannot open the lake itself (no HDFS client here, say), a scan of that one column.
    try:
        priorities = holds_priorities(lake_url, min(starts.values()), until)
    except (OSError, NotImplementedError, pa.ArrowException) as exc:
        log.debug("footers of %s not read (%s): scanning priority_levels", lake_url, exc)
        priorities = not snapshots.where(F.col("priority_levels").isNotNull()).isEmpty()
    intervals = subscription_intervals(snapshots, priorities=priorities)
    # The finest window's aggregates feed every coarser window: computed once.
    finest = report.partials(intervals, finest_window(windows)).persist()
    try:
        frame = report.from_partials(finest, starts)
        store.write(job, run_id, frame.withColumn("run_id", F.lit(run_id).cast("long")))
    finally:
        finest.unpersist()


def run_job(
    spark: SparkSession,
    store: RunStore,
    lake_url: str,
    job: str,
    *,
    since: datetime,
    until: datetime,
    windows: tuple[str, ...],
    budget_seconds: float,
    attempt: int = 1,
    run_id: int | None = None,
    max_attempts: int = 1,
    data_until: datetime | None = None,
) -> RunResult:
    """Run one job over ``[since, until)``; record it; return what it wrote.

    With ``run_id`` this is the next attempt of that queued run; a failed attempt queues the
    run again while it has had fewer than ``max_attempts``.  Without, a new run is recorded
    (as attempt ``attempt``).  ``data_until`` is the time up to which the landed snapshots
    hold every live worker's data (``reports.freshness``), recorded as ``dataUntil``.
    """
    if job not in REPORTS and job not in SPAN_REPORTS:
        raise ValueError(f"unknown report job '{job}': use one of {', '.join(JOBS)}")
    unknown = [w for w in windows if w not in WINDOW_SECONDS]
    if unknown or not windows:
        raise ValueError(f"bad report windows {windows}: use minute, hour, day")
    span = job in SPAN_REPORTS
    starts = {SPAN_WINDOW: since} if span else {w: window_floor(since, w) for w in windows}
    earliest = min(starts.values())
    started = datetime.now(UTC)
    run_id, attempt = store.start(
        job,
        earliest,
        until,
        attempt=attempt,
        run_id=run_id,
        params={
            "windows": list(windows),
            "since": since.isoformat(),
            "until": until.isoformat(),
            "dataUntil": min(data_until, until).isoformat() if data_until else None,
        },
    )
    try:
        with time_budget(spark, budget_seconds, f"sluice-run-{run_id}"):
            snapshots = read_snapshots(spark, lake_url, earliest, until)
            if span:
                frame = SPAN_REPORTS[job](snapshots, since)
                store.write(job, run_id, frame.withColumn("run_id", F.lit(run_id).cast("long")))
            else:
                _write_windows(
                    store, job, run_id, snapshots, windows, starts, lake_url=lake_url, until=until
                )
        rows = store.succeed(job, run_id, {SPAN_WINDOW: _EVERY_SPAN} if span else starts)
    except BaseException as exc:
        error = "".join(traceback.format_exception_only(exc)).strip()
        store.fail(job, run_id, error, requeue=attempt < max_attempts)
        raise
    seconds = (datetime.now(UTC) - started) / timedelta(seconds=1)
    return RunResult(job=job, run_id=run_id, rows=rows, seconds=seconds, attempt=attempt)
