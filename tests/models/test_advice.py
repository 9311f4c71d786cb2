"""The limit advisor's arithmetic and findings (``models.advice``), as pure functions."""

from __future__ import annotations

import dataclasses

import pytest

from models.advice import (
    AdviceInputs,
    check_drain_target,
    findings,
    quota_hours,
    recommend,
    span_words,
)
from models.errors import InvalidInput, PreconditionFailed
from models.flow_resolution import FlowInputs, resolve_flow
from models.resolution import Level

BASE = AdviceInputs(
    span_seconds=7 * 86400,
    partitions=4,
    publish_rate_avg=80.0,
    publish_rate_p95=100.0,
    dispatch_rate_avg=80.0,
    backlog_msgs=36_000,
    backlog_bytes=3_600_000,
    backlog_avg=30_000.0,
    growth_per_s=0.25,
    limit_topic_at_end=400.0,
    limited_share=1.0,
    throttled_share=0.41,
    peak_utilisation=1.0,
    capacity=None,
)


def test_needed_is_publish_p95_plus_backlog_over_target_per_partition_rounded_up():
    advice = recommend(BASE, 3600)
    assert advice.needed == pytest.approx(100 + 36_000 / 3600)  # 110 msg/s for the topic
    assert advice.recommended == advice.needed and not advice.capped_by_capacity
    assert advice.per_partition == 28  # ceil(110 / 4)
    assert "min(capacity not observed" in advice.formula(BASE, 3600)


def test_the_consumers_capacity_caps_the_recommendation():
    inputs = dataclasses.replace(BASE, capacity=90.0)
    advice = recommend(inputs, 3600)
    assert (advice.recommended, advice.capped_by_capacity, advice.per_partition) == (
        90.0,
        True,
        23,
    )
    # Capacity above what is needed changes nothing.
    assert recommend(dataclasses.replace(BASE, capacity=500.0), 3600).recommended == 110.0


def test_a_recommendation_never_reads_as_no_limit():
    idle = dataclasses.replace(BASE, publish_rate_p95=0.0, backlog_msgs=0)
    assert recommend(idle, 60).per_partition == 1
    with pytest.raises(ValueError):
        recommend(BASE, 0)


def test_findings_name_a_limit_never_reached_with_its_peak():
    quiet = dataclasses.replace(
        BASE, throttled_share=0.0, peak_utilisation=0.12, growth_per_s=0.0, backlog_msgs=0
    )
    said = findings(quiet, recommend(quiet, 3600))
    assert [(f.code, f.text) for f in said] == [
        ("limitNeverReached", "limit never reached in 7 days (peak 12% of it)")
    ]


def test_findings_name_a_throttled_growing_backlog_and_the_quota_ahead():
    advice = recommend(BASE, 3600)
    said = {f.code: f.text for f in findings(BASE, advice, quota_messages=36_000 + 0.25 * 18_000)}
    assert said["throttledBacklogGrowing"] == (
        "throttled 41% of the time while the backlog grew 3%/h: raise to 28 msg/s per"
        " partition or add consumers"
    )
    assert said["backlogQuotaAhead"] == "at the current trend the backlog quota is reached in 5.0 h"
    assert "limitNeverReached" not in said


def test_no_limit_no_never_reached_finding_and_a_shrinking_backlog_reaches_no_quota():
    free = dataclasses.replace(
        BASE, limit_topic_at_end=None, limited_share=0.0, throttled_share=0.0, growth_per_s=-1
    )
    assert findings(free, recommend(free, 3600), quota_messages=10) == []
    assert quota_hours(100, 0.0, 1000) is None and quota_hours(100, 1.0, -1) is None
    assert quota_hours(2000, 1.0, 1000) == 0.0


def test_span_words():
    assert [span_words(s) for s in (40, 600, 5 * 3600, 7 * 86400)] == [
        "40 s",
        "10 min",
        "5 h",
        "7 days",
    ]


def test_the_drain_target_resolves_topic_over_namespace_over_the_default():
    assert resolve_flow(FlowInputs()).backlog_drain_target.value == 3600
    limits = resolve_flow(
        FlowInputs(
            namespace={"backlogDrainTargetSeconds": 600},
            topic={"backlogDrainTargetSeconds": 60},
        )
    )
    assert (limits.backlog_drain_target.value, limits.backlog_drain_target.source) == (
        60,
        Level.TOPIC,
    )
    ns_only = resolve_flow(FlowInputs(namespace={"backlogDrainTargetSeconds": 600}))
    assert ns_only.backlog_drain_target.source is Level.NAMESPACE


def test_a_drain_target_is_whole_positive_seconds():
    assert check_drain_target(1) == 1
    with pytest.raises(PreconditionFailed):
        check_drain_target(0)
    with pytest.raises(InvalidInput):
        check_drain_target(1.5)
    with pytest.raises(InvalidInput):
        check_drain_target(True)
