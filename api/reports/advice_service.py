"""The limit advisor's answer: the latest ``advice`` run's rows with, for each subscription,
the recommended dispatch limit, its arithmetic and findings (``models.advice``).

The recommendation uses the ``backlogDrainTargetSeconds`` and backlog quota each topic
resolves to now (topic > namespace > default), so a change of the target shows at the next
read.  Each recommendation says where to apply it: the dispatch-rate policy, at the level
whose value bound the subscription at the span's end, as the path and body of the ordinary
policy write (``?dryRun=true`` previews it; the write is audited as any other).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from sqlalchemy import func, select

from api.unit_of_work import UnitOfWork
from models.advice import (
    DEFAULT_DRAIN_TARGET_SECONDS,
    AdviceInputs,
    findings,
    growth_percent_per_hour,
    recommend,
)
from models.flow import QuotaType
from models.flow_resolution import FlowLimits, resolve_flow
from models.orm import DISPATCH_RATE, SUBSCRIPTION_DISPATCH_RATE
from models.reports import RUN_SUCCEEDED, AdviceReportRow, ReportRun
from models.repository import get_namespace, load_snapshot
from sluice.protocol.names import TopicName


def _segment(name: str) -> str:
    return quote(name, safe="")


def apply_target(row: AdviceReportRow) -> tuple[str, str, str] | None:
    """Where the limit that bound ``row`` is set: (level, kind, policy path); None when no
    limit was in force or the broker's own limiter bound (not a namespace policy)."""
    if row.limit_limiter in (None, "broker") or row.limit_topic_at_end is None:
        return None
    topic = TopicName.from_full(row.topic)
    base_ns = f"/admin/v2/namespaces/{_segment(row.tenant)}/{_segment(row.namespace)}"
    base_topic = (
        f"/admin/v2/persistent/{_segment(row.tenant)}/{_segment(row.namespace)}"
        f"/{_segment(topic.local)}"
    )
    if row.limit_limiter == "subscription":
        if row.limit_source == "subscription":
            path = f"{base_topic}/{_segment(row.subscription)}/{DISPATCH_RATE}"
            return "subscription", DISPATCH_RATE, path
        kind = SUBSCRIPTION_DISPATCH_RATE
    else:
        kind = DISPATCH_RATE
    if row.limit_source == "topic":
        return "topic", kind, f"{base_topic}/{kind}"
    # Set at the namespace, or a broker default: a namespace value overrides it.
    return "namespace", kind, f"{base_ns}/{kind}"


def rate_body(per_partition: int) -> dict[str, Any]:
    """The dispatch-rate body of a recommended message limit (no byte limit, 1 s period)."""
    return {
        "dispatchThrottlingRateInMsg": per_partition,
        "dispatchThrottlingRateInByte": -1,
        "ratePeriodInSecond": 1,
        "relativeToPublishRate": False,
    }


def inputs_of(row: AdviceReportRow) -> AdviceInputs:
    """The arithmetic's inputs from a report row."""
    return AdviceInputs(
        span_seconds=row.span_seconds,
        partitions=row.partitions,
        publish_rate_avg=row.publish_rate_avg,
        publish_rate_p95=row.publish_rate_p95,
        dispatch_rate_avg=row.dispatch_rate_avg,
        backlog_msgs=row.backlog_msgs,
        backlog_bytes=row.backlog_bytes,
        backlog_avg=row.backlog_avg,
        growth_per_s=row.growth_per_s,
        limit_topic_at_end=row.limit_topic_at_end,
        limited_share=row.limited_share,
        throttled_share=row.throttled_share,
        peak_utilisation=row.peak_utilisation,
        capacity=row.capacity,
    )


def subscription_advice(row: AdviceReportRow, limits: FlowLimits | None) -> dict[str, Any]:
    """One subscription's advice document."""
    target = limits.backlog_drain_target if limits is not None else None
    target_seconds = target.value if target is not None else DEFAULT_DRAIN_TARGET_SECONDS
    inputs = inputs_of(row)
    recommendation = recommend(inputs, target_seconds)
    quota = limits.quotas[QuotaType.DESTINATION_STORAGE].value if limits is not None else None
    said = findings(
        inputs,
        recommendation,
        quota_messages=quota.limit_messages if quota is not None else -1,
        quota_bytes=quota.limit_size if quota is not None else -1,
    )
    where = apply_target(row)
    return {
        "topic": row.topic,
        "subscription": row.subscription,
        "spanFrom": row.window_start.isoformat(),
        "spanTo": row.span_end.isoformat(),
        "spanSeconds": row.span_seconds,
        "intervals": row.intervals,
        "partitions": row.partitions,
        "publishRateAvg": row.publish_rate_avg,
        "publishRateP95": row.publish_rate_p95,
        "dispatchRateAvg": row.dispatch_rate_avg,
        "dispatchRatePeak": row.dispatch_rate_peak,
        "limitTopic": row.limit_topic_at_end,
        "limitPerPartition": row.limit_per_partition_at_end,
        "limitLimiter": row.limit_limiter,
        "limitSource": row.limit_source,
        "limitedShare": row.limited_share,
        "throttledShare": row.throttled_share,
        "throttledSeconds": row.throttled_seconds,
        "peakUtilisation": row.peak_utilisation,
        "backlogMsgs": row.backlog_msgs,
        "backlogBytes": row.backlog_bytes,
        "backlogAvg": row.backlog_avg,
        "maxBacklogMsgs": row.max_backlog_msgs,
        "growthPerS": row.growth_per_s,
        "growthPercentPerHour": growth_percent_per_hour(inputs),
        "capacity": row.capacity,
        "capacityIntervals": row.capacity_intervals,
        "ackRatePeak": row.ack_rate_peak,
        "consumers": row.consumers,
        "recommendation": {
            "publishRateP95": row.publish_rate_p95,
            "backlogMsgs": row.backlog_msgs,
            "targetSeconds": target_seconds,
            "targetSource": target.source.value if target is not None else "broker",
            "capacity": row.capacity,
            "needed": recommendation.needed,
            "recommended": recommendation.recommended,
            "partitions": row.partitions,
            "perPartition": recommendation.per_partition,
            "cappedByCapacity": recommendation.capped_by_capacity,
            "formula": recommendation.formula(inputs, target_seconds),
        },
        "apply": None
        if where is None
        else {
            "level": where[0],
            "kind": where[1],
            "path": where[2],
            "body": rate_body(recommendation.per_partition),
        },
        "findings": [{"code": f.code, "text": f.text} for f in said],
    }


def limit_advice(subscriptions: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One recommendation per place a limit is set (a namespace, topic or subscription
    policy): the highest per-partition figure of the subscriptions it binds, so each of
    them drains within its target."""
    places: dict[str, dict[str, Any]] = {}
    for advice in subscriptions:
        where = advice["apply"]
        if where is None:
            continue
        per_partition = advice["recommendation"]["perPartition"]
        place = places.setdefault(
            where["path"],
            {
                "level": where["level"],
                "kind": where["kind"],
                "path": where["path"],
                "currentPerPartition": advice["limitPerPartition"],
                "perPartition": per_partition,
                "subscriptions": [],
            },
        )
        place["perPartition"] = max(place["perPartition"], per_partition)
        place["subscriptions"].append(f"{advice['topic']}/{advice['subscription']}")
    for place in places.values():
        place["body"] = rate_body(place["perPartition"])
    return list(places.values())


async def advice(
    uow: UnitOfWork, tenant: str, namespace: str, topic: str | None = None
) -> dict[str, Any]:
    """The advice for a namespace (or one topic) from the latest succeeded ``advice`` run."""
    ns = await get_namespace(uow.session, tenant, namespace)
    run_id = await uow.session.scalar(
        select(func.max(ReportRun.id)).where(
            ReportRun.job == "advice", ReportRun.status == RUN_SUCCEEDED
        )
    )
    query = select(AdviceReportRow).where(
        AdviceReportRow.run_id == run_id,
        AdviceReportRow.tenant == tenant,
        AdviceReportRow.namespace == namespace,
    )
    if topic:
        query = query.where(AdviceReportRow.topic == topic)
    rows = (
        await uow.session.scalars(
            query.order_by(AdviceReportRow.topic, AdviceReportRow.subscription)
        )
    ).all()
    # Each topic's limits as they resolve now (a topic deleted since: the namespace's).
    snapshot = await load_snapshot(uow.session, namespace_id=ns.id)
    resolved = {
        name: resolve_flow(snapshot.flow_inputs_for(TopicName.from_full(name)))
        for name in {row.topic for row in rows}
    }
    subscriptions = [subscription_advice(row, resolved[row.topic]) for row in rows]
    return {
        "tenant": tenant,
        "namespace": namespace,
        "runId": run_id,
        "spanFrom": rows[0].window_start.isoformat() if rows else None,
        "spanTo": max(r.span_end for r in rows).isoformat() if rows else None,
        "limits": limit_advice(subscriptions),
        "subscriptions": subscriptions,
    }
