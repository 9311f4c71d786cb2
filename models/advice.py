"""The limit advisor's arithmetic: a recommended dispatch limit and findings in plain words.

Pure functions over the figures the ``advice`` report job measured for one subscription over
its span (``AdviceInputs``, one row of ``advice_report``) and the namespace's or topic's
``backlogDrainTargetSeconds`` policy.  The admin service calls them when the advice is read,
so a change of the target shows at once, without another Spark run.

The recommendation, for the whole topic (all partitions), in msg/s::

    needed      = publish p95 + backlog now / target
    recommended = min(capacity, needed)       (needed alone when capacity was not observed)
    per partition = ceil(recommended / partitions)   (the figure a dispatch rate is set to)

``capacity`` is the consumers' observed capacity: the highest acknowledgement rate of an
interval in which messages were waiting and no limiter throttled (the consumers were the
bottleneck).  docs/reports.md ("Advice") explains each input and where this differs from the
plainest formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from models.errors import InvalidInput, PreconditionFailed
from models.json_body import INT32_MAX

# The policy kind (namespace and topic level) and its value when neither level sets it.
BACKLOG_DRAIN_TARGET = "backlogDrainTargetSeconds"
DEFAULT_DRAIN_TARGET_SECONDS = 3600
# A limit whose peak use stayed under this share of it "was never reached".
NEVER_REACHED_BELOW = 1.0


def check_drain_target(value: object) -> int:
    """A ``backlogDrainTargetSeconds`` value: an int from 1; 400 for a non-int, 412 if not
    positive."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidInput(f"{BACKLOG_DRAIN_TARGET} must be an integer number of seconds")
    if value < 1 or value > INT32_MAX:
        raise PreconditionFailed(f"{BACKLOG_DRAIN_TARGET} must be 1 or more")
    return value


@dataclass(frozen=True, slots=True)
class AdviceInputs:
    """What the report measured for one subscription over the span (rates in msg/s)."""

    span_seconds: float
    partitions: int
    publish_rate_avg: float
    publish_rate_p95: float
    dispatch_rate_avg: float
    backlog_msgs: int
    backlog_bytes: int
    backlog_avg: float
    growth_per_s: float
    limit_topic_at_end: float | None
    limited_share: float
    throttled_share: float
    peak_utilisation: float | None
    capacity: float | None


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A recommended limit with the arithmetic that made it."""

    needed: float  # publish p95 + backlog / target, msg/s for the topic
    recommended: float  # min(capacity, needed), msg/s for the topic
    per_partition: int  # ceil(recommended / partitions), the value to set
    capped_by_capacity: bool  # the consumers cannot take ``needed``

    def formula(self, inputs: AdviceInputs, target: float) -> str:
        """The arithmetic in one line."""
        needed = (
            f"{inputs.publish_rate_p95:g} + {inputs.backlog_msgs} / {target:g} = {self.needed:.6g}"
        )
        capacity = "not observed" if inputs.capacity is None else f"{inputs.capacity:.6g}"
        return (
            f"min(capacity {capacity}, publish p95 + backlog / target = {needed})"
            f" = {self.recommended:.6g} msg/s; / {inputs.partitions} partition(s)"
            f" = {self.per_partition} msg/s per partition"
        )


def recommend(inputs: AdviceInputs, target_seconds: float) -> Recommendation:
    """The dispatch limit that drains the backlog within ``target_seconds`` while keeping up
    with the publish rate's 95th percentile, capped at the consumers' observed capacity."""
    if target_seconds <= 0:
        raise ValueError("the drain target must be positive")
    needed = inputs.publish_rate_p95 + inputs.backlog_msgs / target_seconds
    capped = inputs.capacity is not None and inputs.capacity < needed
    recommended = inputs.capacity if capped and inputs.capacity is not None else needed
    partitions = max(inputs.partitions, 1)
    # A limit of 0 means "no limit": never recommend less than 1 msg/s per partition.
    per_partition = max(1, math.ceil(recommended / partitions - 1e-9))
    return Recommendation(needed, recommended, per_partition, capped)


def span_words(seconds: float) -> str:
    """A span in words: ``7 days``, ``5 h``, ``12 min``, ``40 s``."""
    if seconds >= 86400 * 2:
        return f"{seconds / 86400:.0f} days"
    if seconds >= 7200:
        return f"{seconds / 3600:.0f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def growth_percent_per_hour(inputs: AdviceInputs) -> float:
    """How fast the backlog grew, in percent of its average over the span per hour."""
    return inputs.growth_per_s * 3600 / max(inputs.backlog_avg, 1.0) * 100


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the advisor noticed: a stable code and a sentence."""

    code: str
    text: str


def quota_hours(backlog: float, growth_per_s: float, limit: float) -> float | None:
    """Hours until a backlog growing at ``growth_per_s`` reaches ``limit`` (None: it does not
    grow, or no limit); 0 when it is there already."""
    if limit < 0 or growth_per_s <= 0:
        return None
    return max(0.0, (limit - backlog) / growth_per_s / 3600)


def findings(
    inputs: AdviceInputs,
    recommendation: Recommendation,
    *,
    quota_messages: float = -1,
    quota_bytes: float = -1,
) -> list[Finding]:
    """What the figures say, in plain words.  ``quota_messages`` / ``quota_bytes`` are the
    backlog quota's limits (-1: none)."""
    out: list[Finding] = []
    span = span_words(inputs.span_seconds)
    limited = inputs.limit_topic_at_end is not None and inputs.limited_share > 0
    if limited and inputs.throttled_share <= 0:
        peak = (inputs.peak_utilisation or 0.0) * 100
        out.append(
            Finding("limitNeverReached", f"limit never reached in {span} (peak {peak:.0f}% of it)")
        )
    if inputs.throttled_share > 0 and inputs.growth_per_s > 0:
        out.append(
            Finding(
                "throttledBacklogGrowing",
                f"throttled {inputs.throttled_share * 100:.0f}% of the time while the backlog"
                f" grew {growth_percent_per_hour(inputs):.0f}%/h: raise to"
                f" {recommendation.per_partition} msg/s per partition or add consumers",
            )
        )
    elif inputs.throttled_share > 0:
        out.append(
            Finding(
                "throttled",
                f"throttled {inputs.throttled_share * 100:.0f}% of the time; the backlog did"
                " not grow",
            )
        )
    if recommendation.capped_by_capacity and inputs.backlog_msgs > 0:
        out.append(
            Finding(
                "consumersTooSlow",
                f"the consumers took at most {inputs.capacity:.6g} msg/s: no limit drains the"
                " backlog within the target; add consumers",
            )
        )
    bytes_per_msg = inputs.backlog_bytes / inputs.backlog_msgs if inputs.backlog_msgs else 0.0
    hours = [
        h
        for h in (
            quota_hours(inputs.backlog_msgs, inputs.growth_per_s, quota_messages),
            quota_hours(inputs.backlog_bytes, inputs.growth_per_s * bytes_per_msg, quota_bytes)
            if bytes_per_msg
            else None,
        )
        if h is not None
    ]
    if hours:
        soonest = min(hours)
        out.append(
            Finding(
                "backlogQuotaAhead",
                f"at the current trend the backlog quota is reached in {soonest:.1f} h"
                if soonest > 0
                else "the backlog quota is reached already",
            )
        )
    return out
