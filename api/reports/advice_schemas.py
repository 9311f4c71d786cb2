"""Response documents of the limit advisor (``GET /admin/v2/reports/advice/...``); every
field is described in docs/reports.md ("Advice")."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from api.schemas import Document, StrictBody


class AdviceArithmetic(Document):
    """The recommendation with its inputs: ``needed = publishRateP95 + backlogMsgs /
    targetSeconds``, ``recommended = min(capacity, needed)``, ``perPartition =
    ceil(recommended / partitions)``."""

    publishRateP95: float
    backlogMsgs: int
    targetSeconds: int
    targetSource: str
    capacity: float | None
    needed: float
    recommended: float
    partitions: int
    perPartition: int
    cappedByCapacity: bool
    formula: str


class AdviceApply(Document):
    """The policy write that applies a recommendation (``?dryRun=true`` previews it)."""

    level: str
    kind: str
    path: str
    body: dict[str, Any]


class AdviceFinding(Document):
    """One finding: a stable code and a sentence."""

    code: str
    text: str


class SubscriptionAdvice(Document):
    """What the advisor measured of one subscription over the span, and what it advises."""

    topic: str
    subscription: str
    spanFrom: str
    spanTo: str
    spanSeconds: float
    intervals: int
    partitions: int
    publishRateAvg: float
    publishRateP95: float
    dispatchRateAvg: float
    dispatchRatePeak: float
    limitTopic: float | None
    limitPerPartition: float | None
    limitLimiter: str | None
    limitSource: str | None
    limitedShare: float
    throttledShare: float
    throttledSeconds: float
    peakUtilisation: float | None
    backlogMsgs: int
    backlogBytes: int
    backlogAvg: float
    maxBacklogMsgs: int
    growthPerS: float
    growthPercentPerHour: float
    capacity: float | None
    capacityIntervals: int
    ackRatePeak: float | None
    consumers: int
    recommendation: AdviceArithmetic
    apply: AdviceApply | None
    findings: list[AdviceFinding]


class LimitAdvice(Document):
    """One recommendation per place a limit is set: the highest per-partition figure of the
    subscriptions it binds."""

    level: str
    kind: str
    path: str
    currentPerPartition: float | None
    perPartition: int
    subscriptions: list[str]
    body: dict[str, Any]


class AdviceDocument(Document):
    """The advice for a namespace or a topic, from the latest succeeded ``advice`` run."""

    tenant: str
    namespace: str
    runId: int | None
    spanFrom: str | None
    spanTo: str | None
    limits: list[LimitAdvice]
    subscriptions: list[SubscriptionAdvice]


class SimulateRequest(StrictBody):
    """``POST /admin/v2/reports/simulate``: a proposed message limit at a level, replayed over
    a past window of the namespace's recorded traffic."""

    tenant: str
    namespace: str
    level: Literal["namespace", "topic", "subscription"] = "namespace"
    topic: str | None = None
    subscription: str | None = None
    dispatchThrottlingRateInMsg: int = Field(..., ge=-1, le=2**31 - 1)
    ratePeriodInSecond: int = Field(1, ge=1, le=86400)
    since: str = Field(..., description="a duration back from now (15m) or an ISO-8601 time")
    until: str | None = Field(None, description="an ISO-8601 time; default now")
    capacity: float | None = Field(
        None, gt=0, description="msg/s the consumers take; default: observed in the window"
    )


class SimulatedIntervalDocument(Document):
    """One recorded interval, actual and simulated."""

    end: str
    seconds: float
    published: int
    delivered: int
    backlog: int
    simulatedDelivered: int
    simulatedBacklog: int
    simulatedThrottledSeconds: float


class SimulationFigures(Document):
    """Totals over the window: delivered, the delivered rate, throttled time, the backlog at
    the end."""

    delivered: int
    deliveredRate: float
    throttledSeconds: float
    backlogEnd: int


class SubscriptionSimulation(Document):
    """One subscription replayed under the proposed limit."""

    topic: str
    subscription: str
    partitions: int
    permitsPerPartition: int
    capacity: float | None
    initialBacklog: int
    published: int
    seconds: float
    actual: SimulationFigures
    simulated: SimulationFigures
    intervals: list[SimulatedIntervalDocument]


class SimulationDocument(Document):
    """The simulation's answer."""

    tenant: str
    namespace: str
    level: str
    since: str
    until: str
    dispatchThrottlingRateInMsg: int
    ratePeriodInSecond: int
    subscriptions: list[SubscriptionSimulation]
