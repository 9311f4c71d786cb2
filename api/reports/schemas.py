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


class RateReportDocument(Document):
    """Dispatch of one subscription in one window against the limit in force."""

    intervals: int
    msgOut: int
    bytesOut: int
    avgRate: float
    peakRate: float
    p50Rate: float
    p95Rate: float
    avgByteRate: float
    limitMsgPerS: float | None
    limitBytePerS: float | None
    limitLimiter: str | None
    limitSource: str | None
    utilisation: float | None
    throttledShare: float
    throttledBrokerShare: float
    throttledTopicShare: float
    throttledSubscriptionShare: float
    throttledBy: str | None
    runId: int
    window: str
    windowStart: str
    tenant: str
    namespace: str
    topic: str
    subscription: str


class BacklogReportDocument(Document):
    """Backlog of one subscription in one window, its growth and time to drain."""

    intervals: int
    backlogMsgs: int
    backlogBytes: int
    maxBacklogMsgs: int
    growthPerS: float
    publishRate: float
    dispatchRate: float
    limitMsgPerS: float | None
    drainRate: float | None
    drainSeconds: float | None
    drainStatus: str
    growthRank: int
    runId: int
    window: str
    windowStart: str
    tenant: str
    namespace: str
    topic: str
    subscription: str


class RunDocument(Document):
    """One report run."""

    id: int
    job: str
    status: str
    startedAt: str
    finishedAt: str | None
    windowFrom: str | None
    windowTo: str | None
    rows: int
    attempt: int
    error: str | None
    params: dict[str, Any]


class QueuedRun(Document):
    """A run queued now: the task id and the jobs it runs."""

    taskId: str
    jobs: list[str]
