"""The body of a report run, and the response documents of the report routes (field order
follows the report tables)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from api.schemas import Document, StrictBody


class RunRequest(StrictBody):
    """``POST /admin/v2/reports/runs``: which jobs to run (all by default) and how far back."""

    jobs: list[str] | None = None
    lookbackSeconds: float | None = Field(None, gt=0, le=10 * 365 * 86400)


class _RowKey(Document):
    """The run, window and subscription a report row describes: the last fields of every
    report document.  A document names this base first and the base of its own fields second:
    pydantic orders fields from the last base to the first, so these come after its own."""

    runId: int
    window: str
    windowStart: str
    tenant: str
    namespace: str
    topic: str
    subscription: str


class _RateFields(Document):
    """The rate report's own fields."""

    intervals: int
    partitions: int | None
    msgOut: int
    bytesOut: int
    avgRate: float
    peakRate: float
    p50Rate: float
    p95Rate: float
    avgByteRate: float
    limitPerPartitionAvg: float | None
    limitPerPartitionMin: float | None
    limitPerPartitionMax: float | None
    limitTopicAvg: float | None
    limitTopicMin: float | None
    limitTopicMax: float | None
    limitTopicAtEnd: float | None
    limitedShare: float | None
    allowedMsgs: float | None
    byteLimitPerPartitionAvg: float | None
    byteLimitPerPartitionMin: float | None
    byteLimitPerPartitionMax: float | None
    byteLimitTopicAvg: float | None
    byteLimitTopicMin: float | None
    byteLimitTopicMax: float | None
    byteLimitTopicAtEnd: float | None
    byteLimitedShare: float | None
    allowedBytes: float | None
    limitLimiter: str | None
    limitSource: str | None
    utilisation: float | None
    throttledShare: float
    throttledBrokerShare: float
    throttledTopicShare: float
    throttledSubscriptionShare: float
    throttledBy: str | None
    # Per message priority, highest first, the levels that dispatched any ({"msgOut",
    # "avgRate"}); null for a subscription that saw no priority.
    priorityLevels: dict[str, dict[str, float]] | None = None


class _BacklogFields(Document):
    """The backlog report's own fields."""

    intervals: int
    backlogMsgs: int
    backlogBytes: int
    maxBacklogMsgs: int
    growthPerS: float
    publishRate: float
    dispatchRate: float
    limitTopicAtEnd: float | None
    drainRate: float | None
    drainSeconds: float | None
    drainStatus: str
    growthRank: int
    # Per message priority, highest first, the messages waiting in the subscription's
    # priority index at the window's end ({"msgBacklog"}); null when it saw no priority.
    priorityLevels: dict[str, dict[str, float]] | None = None


class RateReportDocument(_RowKey, _RateFields):
    """Dispatch of one subscription in one window against the limits in force (every field:
    docs/reports.md).  Limits are msg/s (``byte...``: bytes/s) over the time a limit was in
    force, weighted by time; per partition as configured, per topic summed over partitions."""


class BacklogReportDocument(_RowKey, _BacklogFields):
    """Backlog of one subscription in one window, its growth and time to drain."""


class RunDocument(Document):
    """One report run: ``queued`` until a worker takes it, ``running``, then ``succeeded`` or
    ``failed``.  ``attempt`` counts the attempts that started; an attempt that failed with
    retries left puts the run back to ``queued`` with its ``error``.  ``dataUntil`` is the
    time up to which its latest attempt's data reaches (every live worker's stats until then
    were landed before it read them); null until an attempt starts."""

    id: int
    job: str
    status: str
    taskId: str | None
    queuedAt: str
    startedAt: str | None
    finishedAt: str | None
    windowFrom: str | None
    windowTo: str | None
    dataUntil: str | None
    rows: int
    attempt: int
    error: str | None
    params: dict[str, Any]


class QueuedRun(Document):
    """A run requested now: the Celery task, the jobs, and the runs recorded for them (one per
    job, ``queued``; follow them at ``/admin/v2/reports/runs/{id}``)."""

    taskId: str
    jobs: list[str]
    runIds: list[int]
    runs: list[RunDocument]
