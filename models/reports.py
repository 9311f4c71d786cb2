"""Report tables: job runs, and the rate and backlog reports the Spark jobs write.

Every result row carries the id of the run that wrote it.  A run's rows count only once the
run is marked ``succeeded`` (readers join on it), so a run that fails halfway never shows
half-written results; its rows are deleted when it fails.  Runs recompute whole windows, so
the same window can appear in several runs: readers take, for each key, the latest
succeeded run.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, declared_attr, mapped_column

from models.base import Base, BigId, Json, Timestamp, utcnow

RUN_QUEUED = "queued"
RUN_RUNNING = "running"
RUN_SUCCEEDED = "succeeded"
RUN_FAILED = "failed"
RUN_STATUSES = (RUN_QUEUED, RUN_RUNNING, RUN_SUCCEEDED, RUN_FAILED)
RUN_FINAL = (RUN_SUCCEEDED, RUN_FAILED)

WINDOWS = ("minute", "hour", "day")
WINDOW_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


class ReportRun(Base):
    """One run of one report job: queued, running, then succeeded or failed.

    A run is recorded when it is queued (by ``POST /admin/v2/reports/runs``, or by the task
    itself for a scheduled run), before any worker takes it.  ``attempt`` counts the attempts
    that started (0 while queued); an attempt that fails with retries left puts the run back
    to ``queued`` with its ``error``, and the last one marks it ``failed``.
    """

    __tablename__ = "report_runs"
    __table_args__ = (
        Index("ix_report_runs_job_started", "job", "started_at"),
        Index("ix_report_runs_task_id", "task_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    job: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default=RUN_QUEUED)
    task_id: Mapped[str | None] = mapped_column(String(64))  # the Celery task that runs it
    queued_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(Timestamp)  # of the latest attempt
    finished_at: Mapped[datetime | None] = mapped_column(Timestamp)
    window_from: Mapped[datetime | None] = mapped_column(Timestamp)
    window_to: Mapped[datetime | None] = mapped_column(Timestamp)
    rows: Mapped[int] = mapped_column(BigInteger, default=0)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text)
    params: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)


class _ReportRow:
    """Columns every report row has: the run, the window and the subscription it describes;
    indexed for lookups by namespace and window, and by run."""

    @declared_attr.directive
    def __table_args__(cls) -> tuple[Index, ...]:
        table = cls.__tablename__  # type: ignore[attr-defined]  # each report table names it
        return (
            Index(f"ix_{table}_lookup", "tenant", "namespace", "window", "window_start"),
            Index(f"ix_{table}_run", "run_id"),
        )

    run_id: Mapped[int] = mapped_column(BigInteger)
    window: Mapped[str] = mapped_column(String(8))
    window_start: Mapped[datetime] = mapped_column(Timestamp)
    tenant: Mapped[str] = mapped_column(String(255))
    namespace: Mapped[str] = mapped_column(String(255))
    topic: Mapped[str] = mapped_column(String(700))
    subscription: Mapped[str] = mapped_column(String(255))


class RateReportRow(_ReportRow, Base):
    """Dispatch per subscription per window, against the limit in force."""

    __tablename__ = "rate_report"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    intervals: Mapped[int] = mapped_column(Integer)
    # Columns added in revision 0004 are null in rows written before it.
    partitions: Mapped[int | None] = mapped_column(Integer)  # most partitions in an interval
    msg_out: Mapped[int] = mapped_column(BigInteger)
    bytes_out: Mapped[int] = mapped_column(BigInteger)
    avg_rate: Mapped[float] = mapped_column(Float)  # msg/s over the covered intervals
    peak_rate: Mapped[float] = mapped_column(Float)
    p50_rate: Mapped[float] = mapped_column(Float)
    p95_rate: Mapped[float] = mapped_column(Float)
    avg_byte_rate: Mapped[float] = mapped_column(Float)
    # Message limits, msg/s, over the time a limit was in force (docs/reports.md).
    limit_per_partition_avg: Mapped[float | None] = mapped_column(Float)  # time-weighted
    limit_per_partition_min: Mapped[float | None] = mapped_column(Float)
    limit_per_partition_max: Mapped[float | None] = mapped_column(Float)
    limit_topic_avg: Mapped[float | None] = mapped_column(Float)  # partitions summed
    limit_topic_min: Mapped[float | None] = mapped_column(Float)
    limit_topic_max: Mapped[float | None] = mapped_column(Float)
    limit_topic_at_end: Mapped[float | None] = mapped_column(Float)  # last interval's
    limited_share: Mapped[float | None] = mapped_column(Float)  # limited seconds / seconds
    allowed_msgs: Mapped[float | None] = mapped_column(Float)  # sum of limit x seconds
    # Byte limits, bytes/s, the same way.
    byte_limit_per_partition_avg: Mapped[float | None] = mapped_column(Float)
    byte_limit_per_partition_min: Mapped[float | None] = mapped_column(Float)
    byte_limit_per_partition_max: Mapped[float | None] = mapped_column(Float)
    byte_limit_topic_avg: Mapped[float | None] = mapped_column(Float)
    byte_limit_topic_min: Mapped[float | None] = mapped_column(Float)
    byte_limit_topic_max: Mapped[float | None] = mapped_column(Float)
    byte_limit_topic_at_end: Mapped[float | None] = mapped_column(Float)
    byte_limited_share: Mapped[float | None] = mapped_column(Float)
    allowed_bytes: Mapped[float | None] = mapped_column(Float)
    limit_limiter: Mapped[str | None] = mapped_column(String(16))  # broker|topic|subscription
    limit_source: Mapped[str | None] = mapped_column(String(16))  # broker|namespace|topic|...
    utilisation: Mapped[float | None] = mapped_column(Float)  # delivered / allowed
    throttled_share: Mapped[float] = mapped_column(Float)  # intervals throttled / intervals
    throttled_broker_share: Mapped[float] = mapped_column(Float)
    throttled_topic_share: Mapped[float] = mapped_column(Float)
    throttled_subscription_share: Mapped[float] = mapped_column(Float)
    throttled_by: Mapped[str | None] = mapped_column(String(16))  # level throttling most
    # Per message priority (revision 0011; null for a subscription that saw none): JSON text
    # {"<priority>": {"msgOut": n, "avgRate": msg/s}}, the levels that dispatched any.
    priority_levels: Mapped[str | None] = mapped_column(Text)


class BacklogReportRow(_ReportRow, Base):
    """Backlog per subscription per window, its growth, and when it will drain."""

    __tablename__ = "backlog_report"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    intervals: Mapped[int] = mapped_column(Integer)
    backlog_msgs: Mapped[int] = mapped_column(BigInteger)  # at the window's end
    backlog_bytes: Mapped[int] = mapped_column(BigInteger)
    max_backlog_msgs: Mapped[int] = mapped_column(BigInteger)
    growth_per_s: Mapped[float] = mapped_column(Float)  # least-squares slope, msg/s
    publish_rate: Mapped[float] = mapped_column(Float)  # msg/s
    dispatch_rate: Mapped[float] = mapped_column(Float)  # msg/s
    limit_topic_at_end: Mapped[float | None] = mapped_column(Float)  # msg/s, partitions summed
    drain_rate: Mapped[float | None] = mapped_column(Float)  # net msg/s the backlog shrinks by
    drain_seconds: Mapped[float | None] = mapped_column(Float)  # None when it never drains
    drain_status: Mapped[str] = mapped_column(String(8))  # empty | draining | never
    growth_rank: Mapped[int] = mapped_column(Integer)  # 1 = fastest growing in the window
    # Per message priority (revision 0011; null for a subscription that saw none): JSON text
    # {"<priority>": {"msgBacklog": n}}, messages waiting in its priority index at the end.
    priority_levels: Mapped[str | None] = mapped_column(Text)


class AdviceReportRow(_ReportRow, Base):
    """What the limit advisor measured per subscription over a run's whole span (``window`` is
    ``span``, ``window_start`` the span's start): the inputs of ``models.advice``."""

    __tablename__ = "advice_report"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    span_end: Mapped[datetime] = mapped_column(Timestamp)  # the end of the last interval
    intervals: Mapped[int] = mapped_column(Integer)
    span_seconds: Mapped[float] = mapped_column(Float)  # seconds the intervals cover
    partitions: Mapped[int] = mapped_column(Integer)  # at the span's end
    publish_rate_avg: Mapped[float] = mapped_column(Float)  # msg/s, all partitions
    publish_rate_p95: Mapped[float] = mapped_column(Float)  # of the intervals' rates
    dispatch_rate_avg: Mapped[float] = mapped_column(Float)
    dispatch_rate_peak: Mapped[float] = mapped_column(Float)
    limit_topic_at_end: Mapped[float | None] = mapped_column(Float)  # partitions summed
    limit_per_partition_at_end: Mapped[float | None] = mapped_column(Float)
    limit_limiter: Mapped[str | None] = mapped_column(String(16))  # broker|topic|subscription
    limit_source: Mapped[str | None] = mapped_column(String(16))  # broker|namespace|topic|...
    limited_share: Mapped[float] = mapped_column(Float)  # limited seconds / seconds
    throttled_share: Mapped[float] = mapped_column(Float)  # throttled intervals / intervals
    throttled_seconds: Mapped[float] = mapped_column(Float)
    peak_utilisation: Mapped[float | None] = mapped_column(Float)  # max interval rate / limit
    backlog_msgs: Mapped[int] = mapped_column(BigInteger)  # at the span's end
    backlog_bytes: Mapped[int] = mapped_column(BigInteger)
    backlog_avg: Mapped[float] = mapped_column(Float)
    max_backlog_msgs: Mapped[int] = mapped_column(BigInteger)
    growth_per_s: Mapped[float] = mapped_column(Float)  # least-squares slope, msg/s
    capacity: Mapped[float | None] = mapped_column(Float)  # max ack rate, consumer-bound
    capacity_intervals: Mapped[int] = mapped_column(Integer)  # consumer-bound intervals
    ack_rate_peak: Mapped[float | None] = mapped_column(Float)  # max ack rate, unthrottled
    consumers: Mapped[int] = mapped_column(Integer)  # at the span's end


# A report's identity: its job name, the table of its rows (the job names, in this order, are
# every report job there is).
REPORT_TABLES: dict[str, type[RateReportRow] | type[BacklogReportRow] | type[AdviceReportRow]] = {
    "rates": RateReportRow,
    "backlog": BacklogReportRow,
    "advice": AdviceReportRow,
}
# The window of a job that reports on a run's whole span rather than minutes, hours or days.
SPAN_WINDOW = "span"
SPAN_JOBS = ("advice",)
REPORT_JOBS = tuple(REPORT_TABLES)


def report_columns(job: str) -> list[str]:
    """The columns of a job's result rows, in table order (no id)."""
    return [c.name for c in REPORT_TABLES[job].__table__.columns if c.name != "id"]


def queued_run(job: str, *, task_id: str | None, params: dict[str, Any]) -> dict[str, Any]:
    """The column values of a run of ``job`` recorded as queued (no attempt started yet)."""
    return {
        "job": job,
        "status": RUN_QUEUED,
        "task_id": task_id,
        "queued_at": utcnow(),
        "attempt": 0,
        "rows": 0,
        "params": params,
    }
