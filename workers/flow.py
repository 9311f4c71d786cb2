"""Flow control of one owned partition: backlog quota enforcement and message TTL.

Every stats tick (about once a second) the worker knows the partition's backlog per
subscription.  The backlog of the *slowest* subscription is checked against the resolved
backlog quotas (``models.flow_resolution.quota_breach``):

* ``producer_request_hold`` / ``producer_exception``: the worker sets ``sl:{P}:quota`` and
  ``produce.lua`` refuses every send atomically until the backlog is under the quota again
  (the client holds or retries).  The flag expires by itself if the worker goes away.
* ``consumer_backlog_eviction``: producers are never refused; instead the oldest backlog of
  each subscription over the quota is skipped (``skip.lua``: acknowledged if delivered,
  passed by the group's cursor if not) down to 90 % of the limit, counted as evicted.

The TTL runs in housekeeping: entries older than the TTL that no consumer got yet are passed
by each subscription's cursor and counted as expired; they are never dispatched.
"""

from __future__ import annotations

import logging
import time

from redis.exceptions import ResponseError

from models.flow import QuotaType, RetentionPolicy
from models.flow_resolution import (
    Backlog,
    Breach,
    FlowLimits,
    eviction_target,
    needs_age,
    priority_eviction_limit,
    quota_breach,
)
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import SKIP
from sluice.protocol.text import as_text
from workers.context import WorkerContext
from workers.samples import SubscriptionSample

log = logging.getLogger(__name__)

QUOTA_FLAG_TTL_SECONDS = 10  # a refused producer is let go if no worker renews the flag
SKIP_BATCH = 10_000  # most entries one skip.lua call passes (the rest go next tick)
# lowest_priority_eviction refuses like producer_exception on what produce.lua cannot check
# itself (limitSize, limitTime); its limitMessages is produce.lua's (docs/priority.md).
REFUSING = (
    RetentionPolicy.PRODUCER_REQUEST_HOLD,
    RetentionPolicy.PRODUCER_EXCEPTION,
    RetentionPolicy.LOWEST_PRIORITY_EVICTION,
)


def _parts(stream_id: bytes | str) -> tuple[int, int]:
    text = stream_id.decode() if isinstance(stream_id, bytes) else stream_id
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def _ms(stream_id: bytes | str) -> int:
    text = stream_id.decode() if isinstance(stream_id, bytes) else stream_id
    return int(text.split("-")[0])


class PartitionFlow:
    """Backlog quota and TTL of one partition; counters for its stats document.

    ``limits`` are handed down by the partition runner on every policy change."""

    def __init__(
        self, context: WorkerContext, partition: TopicName, limits: FlowLimits, fencing_token: str
    ) -> None:
        self.context = context
        self.partition = partition
        self.limits = limits
        self.fencing_token = fencing_token
        self.breach: Breach | None = None
        self.flag_set: bool | None = None  # None: unknown (clear it on the first tick)
        self.evicted_entries = 0
        self.priority_index = False  # the partition's "pq:<level>" index may exist
        # The partition's priority level streams (fields of its levels hash) as its stats
        # were last read (``workers.stats``): its backlog is on every one of its streams.
        self.levels: list[bytes] = []

    def _skip_call(
        self, subscription: str, cutoff: str, budget: int, include_pending: bool, field: str
    ):
        # Expiry and eviction drop the oldest messages, whatever their priority.
        script_keys, args = SKIP.call(
            self.partition,
            subscription,
            cutoff,
            budget,
            include_pending,
            field,
            self.fencing_token,
            oldest_first=True,
        )
        return self.context.scripts[SKIP.name](keys=script_keys, args=args)

    # --- message TTL ----------------------------------------------------------------------

    async def expire(self, now_ms: int, subscriptions: list[str]) -> int:
        """Pass entries older than the TTL that were never dispatched; messages expired."""
        ttl = self.limits.message_ttl.value
        if ttl <= 0:
            return 0
        cutoff = f"{now_ms - ttl * 1000}-0"
        expired = 0
        for name in subscriptions:
            _entries, messages = await self._skip_call(name, cutoff, SKIP_BATCH, False, "expired")
            expired += int(messages)
        return expired

    # --- backlog quota --------------------------------------------------------------------

    async def check_quota(
        self, samples: dict[str, SubscriptionSample], msg_in: int, bytes_in: int
    ) -> None:
        """Compare the slowest subscription's backlog with the quotas and act on a breach
        (``msg_in`` / ``bytes_in``: what was published so far, for the average size)."""
        await self._tidy_priority_index()
        if not self.context.policy.setting("backlogQuotaCheckEnabled"):
            await self._set_flag(None)
            return
        limits = self.limits
        avg_size = bytes_in / msg_in if msg_in else 0.0
        backlogs = {name: s.lag + s.pending for name, s in samples.items()}
        ages = await self._ages(samples) if needs_age(limits) else {}
        slowest = max(backlogs.values(), default=0)
        backlog = Backlog(
            messages=slowest,
            bytes=int(slowest * avg_size),
            oldest_age_seconds=max(ages.values(), default=None),
        )
        breach = quota_breach(limits, backlog)
        self.breach = breach
        if breach is not None and breach.policy in REFUSING:
            await self._set_flag(breach)
            return
        await self._set_flag(None)
        if breach is not None:
            await self._evict(limits, backlogs, avg_size)

    async def _tidy_priority_index(self) -> None:
        """Keep the partition's priority index (``produce.lua`` writes it under
        ``lowest_priority_eviction``) to the entries some subscription may still need; drop
        it when the policy is gone."""
        redis = self.context.redis
        index = keys.eviction_index(self.partition)
        if not priority_eviction_limit(self.limits):
            if self.priority_index:
                await redis.delete(*index)
                self.priority_index = False
            return
        self.priority_index = True
        keep: tuple[int, int, bool] | None = None  # (ms, seq, inclusive) of the first needed
        for stream in keys.level_logs(self.partition, self.levels):
            try:
                groups = await redis.xinfo_groups(stream)
            except ResponseError:
                if stream == keys.log(self.partition):
                    return  # no stream yet
                continue
            for group in groups:
                name = group["name"]
                if group.get("pending"):
                    summary = await redis.xpending(stream, name)
                    first = (*_parts(summary["min"]), True)
                else:
                    first = (*_parts(group["last-delivered-id"]), False)
                if keep is None or first[:2] < keep[:2] or (first[:2] == keep[:2] and first[2]):
                    keep = first
        if keep is None:
            upto = "+"
        else:
            ms, seq, inclusive = keep
            upto = ("(" if inclusive else "[") + f"{ms:013d}-{seq:010d}"
        async with redis.pipeline(transaction=False) as pipe:
            for key in index:
                pipe.zremrangebylex(key, "-", upto)
            await pipe.execute()

    async def _set_flag(self, breach: Breach | None) -> None:
        redis = self.context.redis
        flag = keys.quota(self.partition)
        if breach is None:
            if self.flag_set is not False:
                await redis.delete(flag)
                self.flag_set = False
            return
        value = f"{breach.policy.value}\t{breach.describe(self.partition.full)}"
        await redis.set(flag, value, ex=QUOTA_FLAG_TTL_SECONDS)
        if not self.flag_set:
            log.info("%s", breach.describe(self.partition.full))
        self.flag_set = True

    async def _ages(self, samples: dict[str, SubscriptionSample]) -> dict[str, float]:
        """Age in seconds of each subscription's oldest unacknowledged entry."""
        redis = self.context.redis
        partition = self.partition
        stream = keys.log(partition)
        now_ms = int(time.time() * 1000)
        if self.levels:
            return await self._level_ages(samples, now_ms)
        ages: dict[str, float] = {}
        for name, sample in samples.items():
            if sample.lag + sample.pending <= 0:
                continue
            oldest = None
            if sample.pending:
                summary = await redis.xpending(stream, name)
                oldest = summary.get("min") if isinstance(summary, dict) else None
            if oldest is None:
                cursor = await redis.get(keys.sub_key(partition, name, "cursor")) or b"0-0"
                first = await redis.xrange(stream, min=b"(" + cursor, max="+", count=1)
                oldest = first[0][0] if first else None
            if oldest is not None:
                ages[name] = max(now_ms - _ms(oldest), 0) / 1000
        return ages

    async def _level_ages(
        self, samples: dict[str, SubscriptionSample], now_ms: int
    ) -> dict[str, float]:
        """``_ages`` of a partition with level streams: the oldest entry over its streams
        (on each, the first pending one, else the first after the group's last-delivered
        id), in two round trips."""
        redis = self.context.redis
        streams = keys.level_logs(self.partition, self.levels)
        async with redis.pipeline(transaction=False) as pipe:
            for stream in streams:
                pipe.xinfo_groups(stream)
            infos = await pipe.execute(raise_on_error=False)
        asked = []
        async with redis.pipeline(transaction=False) as pipe:
            for stream, groups in zip(streams, infos, strict=True):
                for group in groups if isinstance(groups, list) else []:
                    name = as_text(group["name"])
                    sample = samples.get(name)
                    if sample is None or sample.lag + sample.pending <= 0:
                        continue
                    if group["pending"]:
                        pipe.xpending(stream, name)
                    else:
                        after = b"(" + group["last-delivered-id"]
                        pipe.xrange(stream, min=after, max="+", count=1)
                    asked.append(name)
            replies = await pipe.execute()
        oldest: dict[str, int] = {}
        for name, reply in zip(asked, replies, strict=True):
            first = reply["min"] if isinstance(reply, dict) else (reply[0][0] if reply else None)
            if first is not None:
                oldest[name] = min(oldest.get(name, now_ms), _ms(first))
        return {name: max(now_ms - ms, 0) / 1000 for name, ms in oldest.items()}

    async def _evict(self, limits: FlowLimits, backlogs: dict[str, int], avg_size: float) -> None:
        """Skip the oldest backlog of every subscription that is over a quota."""
        storage = limits.quotas[QuotaType.DESTINATION_STORAGE].value
        age = limits.quotas[QuotaType.MESSAGE_AGE].value
        now_ms = int(time.time() * 1000)
        evict_storage = storage.policy is RetentionPolicy.CONSUMER_BACKLOG_EVICTION
        for name, backlog in backlogs.items():
            excess = 0
            if not evict_storage:
                pass
            elif storage.limit_messages >= 0 and backlog >= storage.limit_messages:
                excess = backlog - eviction_target(storage.limit_messages)
            if (
                storage.limit_size >= 0
                and avg_size > 0
                and backlog * avg_size >= storage.limit_size
            ):
                keep = int(eviction_target(storage.limit_size) / avg_size)
                excess = max(excess, backlog - keep)
            if excess > 0:
                entries, _messages = await self._skip_call(
                    name, "+", min(excess, SKIP_BATCH), True, "evicted"
                )
                self.evicted_entries += int(entries)
            if age.limit_time >= 0 and age.policy is RetentionPolicy.CONSUMER_BACKLOG_EVICTION:
                cutoff = f"{now_ms - age.limit_time * 1000}-0"
                entries, _messages = await self._skip_call(
                    name, cutoff, SKIP_BATCH, True, "evicted"
                )
                self.evicted_entries += int(entries)
