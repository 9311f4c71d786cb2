"""The Pulsar ``TopicStats`` document of one partition: the one place that lays it out.

The owning worker builds it every second from what it measured (``workers.stats``); the
admin service builds it from the raw counters for a partition no worker has published yet
(``api.dataplane``).  Both pass their values here, so the two documents have the same fields
in the same order; what only a running worker measures (rates, backlog quota state, consumers)
has defaults that say it was not measured.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

THROTTLED_COUNTERS = tuple(
    f"dispatchThrottled{dim}EventsBy{level}Limit"
    for level in ("Subscription", "Topic", "Broker", "ResourceGroup")
    for dim in ("Msg", "Bytes")
)
NO_RATE = (0.0, 0.0)  # messages and bytes per second where nothing measured a rate


def counter(counters: Mapping[bytes, Any], name: bytes) -> int:
    """One counter of a raw stats hash (``HGETALL`` reply), 0 when absent."""
    return int(counters.get(name, 0))


PRIORITY_OUT = tuple(f"out_p{level}".encode() for level in range(10))  # dispatch.lua's


def priority_counters(counters: Mapping[bytes, Any]) -> list[int]:
    """Messages dispatched per priority 0..9 (``dispatch.lua``'s ``out_p<L>`` counters)."""
    return [int(counters.get(name, 0)) for name in PRIORITY_OUT]


def subscription_document(
    counters: Mapping[bytes, Any],
    sub_type: str,
    *,
    backlog: int = 0,
    backlog_size: int = 0,
    unacked: int = 0,
    rate_out: tuple[float, float] = NO_RATE,
    rate_redeliver: float = 0.0,
    blocked: bool = False,
    rate_expired: float | None = None,
    consumers: list[dict[str, Any]] | None = None,
    throttled: Mapping[str, int] | None = None,
    priority_levels: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One subscription's part of the document, from its raw counters (``counters``: its
    stats hash) and what was measured.  ``rate_expired`` None (nothing measured it) leaves
    out the expiry rate and the eviction counter; ``throttled`` (the throttling events by
    limiter, in the order given) defaults to none of ``THROTTLED_COUNTERS``;
    ``priority_levels`` (Sluice, docs/priority.md): per priority (highest first) the messages
    waiting, dispatched and their rate, only for a subscription that saw priorities."""
    expired = counter(counters, b"expired")
    delayed = counter(counters, b"msg_delayed")
    if rate_expired is None:
        before: dict[str, Any] = {"totalMsgExpired": expired}
        after: dict[str, Any] = {}
    else:
        before = {}
        after = {
            "msgRateExpired": rate_expired,
            "totalMsgExpired": expired,
            "msgEvictedCounter": counter(counters, b"evicted"),
        }
    return {
        "msgRateOut": rate_out[0],
        "msgThroughputOut": rate_out[1],
        "bytesOutCounter": counter(counters, b"bytes_out"),
        "msgOutCounter": counter(counters, b"msg_out"),
        "msgRateRedeliver": rate_redeliver,
        "msgBacklog": backlog,
        "msgBacklogNoDelayed": max(backlog - delayed, 0),
        # Messages held for their delivery time (stats_read.lua and stats_live.lua count them).
        "msgDelayed": delayed,
        "backlogSize": backlog_size,
        "unackedMessages": unacked,
        "msgAckCounter": counter(counters, b"acked"),
        **before,
        "type": sub_type,
        "isDurable": True,
        "blockedSubscriptionOnUnackedMsgs": blocked,
        **after,
        "consumers": consumers or [],
        **(dict.fromkeys(THROTTLED_COUNTERS, 0) if throttled is None else throttled),
        **({} if priority_levels is None else {"priorityLevels": priority_levels}),
    }


def topic_document(
    msg_in: int,
    bytes_in: int,
    subscriptions: dict[str, dict[str, Any]],
    *,
    publish_limited_total: int,
    rate_in: tuple[float, float] = NO_RATE,
    quota: Mapping[str, Any] | None = None,
    publish_limited: int = 0,
    owner: str | None = None,
) -> dict[str, Any]:
    """A partition's document from its counters (messages and bytes in, sends held back by
    the publish rate: ``publish_limited_total``, of them ``publish_limited`` in the current
    stats interval) and its subscriptions' documents; ``quota``: the backlog quota fields (a
    running worker's)."""
    subs = subscriptions.values()
    return {
        "msgRateIn": rate_in[0],
        "msgThroughputIn": rate_in[1],
        "msgRateOut": sum((s["msgRateOut"] for s in subs), 0.0),
        "msgThroughputOut": sum((s["msgThroughputOut"] for s in subs), 0.0),
        "bytesInCounter": bytes_in,
        "msgInCounter": msg_in,
        "bytesOutCounter": sum(s["bytesOutCounter"] for s in subs),
        "msgOutCounter": sum(s["msgOutCounter"] for s in subs),
        "averageMsgSize": bytes_in / msg_in if msg_in else 0.0,
        "backlogSize": sum(s["backlogSize"] for s in subs),
        "msgExpiredCounter": sum(s["totalMsgExpired"] for s in subs),
        **(quota or {}),
        "publishRateLimitedTimes": publish_limited,
        "totalPublishRateLimitedCounter": publish_limited_total,
        "publishers": [],
        "subscriptions": subscriptions,
        "replication": {},
        "owner": owner,
        "updatedAt": int(time.time() * 1000),
    }
