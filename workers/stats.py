"""Worker statistics: Pulsar-shaped stats documents, reporting snapshots, rates.

Every second the worker reads each running partition's counters (published, dispatched,
acknowledged) and gauges (backlog, unacked, consumers, permits) in one pipeline, computes rates
over a few seconds, and stores a ``TopicStats``-shaped JSON document at ``sl:{P}:doc`` that the
admin service serves at ``.../stats`` (beyond ``READS_PER_SECOND`` subscriptions, each
partition less often; a dormant partition keeps its last document, ``workers.dormancy``).
Every ``stats_interval_seconds`` it appends one ``StatsSnapshot`` per partition and
subscription to the reporting stream (and at once when a report run asks for the interval so
far, ``models.stats.SNAPSHOT_REQUEST``); that is also the
stats interval over which ``publishRateLimitedTimes`` counts, as Pulsar's does over its
``statsUpdateFrequencyInSecs`` (``totalPublishRateLimitedCounter`` only grows).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import orjson

from dataplane.backlog import read_backlogs
from dataplane.stats_document import (
    counter,
    priority_counters,
    subscription_document,
    topic_document,
)
from models.flow import QuotaType
from models.stats import (
    SNAPSHOT_FIELD,
    SNAPSHOT_REQUEST,
    SNAPSHOT_STREAM,
    SNAPSHOT_TAKEN,
    StatsSnapshot,
)
from sluice.protocol import keys
from sluice.protocol.connection import REDIS_FAULTS
from workers.context import WorkerContext
from workers.dispatcher import Dispatcher
from workers.jobs import bounded
from workers.partition import PartitionRunner
from workers.samples import RateMeter, SubscriptionSample

log = logging.getLogger(__name__)

DOC_TTL_SECONDS = 30
# Subscriptions whose counters one tick reads at most: a worker running more refreshes each
# partition's document less often than every second (10,000 subscriptions: every 10 s; Pulsar
# refreshes its topic stats every 60 s).
READS_PER_SECOND = 1_000
REASONS = ("broker", "topic", "subscription")
SUBS_PER_CALL = 200  # subscriptions one ``stats_read.lua`` call reads at most
ROWS_PER_CALL = 500  # snapshot rows one pipelined round trip appends at most


def _load(doc: bytes | None) -> dict:
    """A stored stats document (JSON, or zlib-compressed JSON), {} when none or unreadable."""
    if not doc:
        return {}
    try:
        loaded = orjson.loads(doc if doc[:1] == b"{" else zlib.decompress(doc))
    except (orjson.JSONDecodeError, zlib.error):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _pairs(flat: list) -> dict:
    """A flat ``HGETALL``-style reply as a dict."""
    it = iter(flat)
    return dict(zip(it, it, strict=True))


@dataclass
class Baseline:
    """Counter values at the previous snapshot (to report per-interval deltas).

    A ``fresh`` baseline starts at zero (a subscription born while this worker ran the
    partition); otherwise the first value recorded is the starting point.
    """

    fresh: bool = False
    values: dict[str, int] = field(default_factory=dict)

    def delta(self, name: str, value: int) -> int:
        before = self.values.get(name, 0 if self.fresh else value)
        self.values[name] = value
        return max(value - before, 0)


class StatsPublisher:
    """Reads, computes and publishes the stats of every owned partition."""

    def __init__(self, context: WorkerContext) -> None:
        self.context = context
        self.out_meters: defaultdict[tuple[str, str], RateMeter] = defaultdict(RateMeter)
        self.redeliver_meters: defaultdict[tuple[str, str], RateMeter] = defaultdict(RateMeter)
        self.expire_meters: defaultdict[tuple[str, str], RateMeter] = defaultdict(RateMeter)
        self.level_meters: defaultdict[tuple[str, str], list[RateMeter]] = defaultdict(
            _level_meters
        )
        self.baselines: defaultdict[tuple[str, str], Baseline] = defaultdict(_fresh_baseline)
        self.docs: dict[str, dict] = {}
        # Per partition: sends the publish rate held back, as counted when the current stats
        # interval began (``publishRateLimitedTimes`` counts from there, as in Pulsar).
        self.publish_limited_base: dict[str, int] = {}
        self._last_snapshot = time.monotonic()
        self._request_served: bytes | None = None  # the last report run's request snapshotted
        self.read_every = 1.0  # seconds between two reads of one running partition

    async def adopt(self, runner: PartitionRunner) -> None:
        """Take counter baselines when this worker starts running a partition: what happened
        before it is history, what happens after is reported interval by interval."""
        samples = await self._read(runner)
        partition = runner.partition.full
        part_base = Baseline()
        part_base.delta("msg_in", runner.msg_in)
        part_base.delta("bytes_in", runner.bytes_in)
        self.baselines[(partition, "")] = part_base
        self.publish_limited_base[partition] = runner.publish_throttled
        for name, sample in samples.items():
            baseline = Baseline()
            for key, field_name in (
                ("msg_out", b"msg_out"),
                ("bytes_out", b"bytes_out"),
                ("redelivered", b"redelivered"),
            ):
                baseline.delta(key, counter(sample.counters, field_name))
            self.baselines[(partition, name)] = baseline

    def count_from(self, partition: str, last: bytes | None) -> None:
        """A partition woken from dormancy (just ``adopt``ed) counts from ``last``, its last
        stats document, whose counters the rows reported when it went dormant (or was
        glanced at) reached: the messages that woke it, and what it did since it started,
        are reported too."""
        doc = _load(last)
        pairs = [("", doc, (("msg_in", "msgInCounter"), ("bytes_in", "bytesInCounter")))]
        for name, sub in doc.get("subscriptions", {}).items():
            pairs.append(
                (name, sub, (("msg_out", "msgOutCounter"), ("bytes_out", "bytesOutCounter")))
            )
        for name, fields, names in pairs:
            baseline = self.baselines.get((partition, name))
            if baseline is None or not isinstance(fields, dict):
                continue
            for key, field_name in names:
                then, now = fields.get(field_name), baseline.values.get(key)
                if isinstance(then, int) and now is not None:
                    baseline.values[key] = min(then, now)

    def forget(self, partition: str) -> None:
        """Drop what was kept for a partition this worker no longer runs."""
        for key in [k for k in self.baselines if k[0] == partition]:
            del self.baselines[key]
        for meters in (
            self.out_meters,
            self.redeliver_meters,
            self.expire_meters,
            self.level_meters,
        ):
            for key in [k for k in meters if k[0] == partition]:
                del meters[key]
        self.docs.pop(partition, None)
        self.publish_limited_base.pop(partition, None)

    async def tick(
        self,
        runners: Iterable[PartitionRunner],
        dormant_rows: Callable[[int], list[StatsSnapshot]] = lambda _interval_ms: [],
    ) -> None:
        """Read every running partition (``runners``, a few at a time), publish its document
        and note what it found (quiet detection); snapshot when due, with ``dormant_rows``
        for the partitions that do not run."""
        context = self.context
        now = time.monotonic()
        interval_ms = int((now - self._last_snapshot) * 1000)
        snapshot_due = interval_ms >= context.settings.stats_interval_seconds * 1000
        # A report run that asked for the interval so far gets it at this tick.
        request = await context.redis.get(SNAPSHOT_REQUEST)
        requested = request is not None and request != self._request_served
        snapshot_due = snapshot_due or requested
        snapshots: list[StatsSnapshot] = []

        runners = list(runners)
        due = self._due(runners, now)
        if requested:  # the run's data must reach now on every partition: read them all
            due = runners
            for runner in runners:
                runner.stats_read_at = now

        async def one(runner: PartitionRunner) -> None:
            samples = await self._read(runner)
            runner.samples = samples
            try:
                await runner.flow.check_quota(samples, runner.msg_in, runner.bytes_in)
            except REDIS_FAULTS as exc:
                log.warning("backlog quota check of %s: %s", runner.partition.full, exc)
            runner.note_publish(now)
            doc = self._document(runner, samples, now)
            runner.observe(fingerprint(runner, samples), acked(samples), now)
            self.docs[runner.partition.full] = doc
            await context.redis.set(
                keys.doc(runner.partition),
                orjson.dumps(doc),
                ex=max(DOC_TTL_SECONDS, math.ceil(3 * self.read_every)),
            )
            if snapshot_due:
                snapshots.extend(self._snapshots(runner, samples, interval_ms))
                self.publish_limited_base[runner.partition.full] = runner.publish_throttled

        await bounded(due, one)
        if snapshot_due:
            read = {id(r) for r in due}
            for runner in runners:
                if id(runner) not in read and runner.samples is not None:
                    snapshots.extend(self._snapshots(runner, runner.samples, interval_ms))
                    self.publish_limited_base[runner.partition.full] = runner.publish_throttled
                    await asyncio.sleep(0)  # the dispatchers' turns between partitions
            snapshots.extend(dormant_rows(interval_ms))
            self._last_snapshot = now
            taken = orjson.dumps(
                {"ts": int(time.time() * 1000), "request": (request or b"").decode()}
            )
            await self.append(snapshots, taken=taken)
            self._request_served = request

    async def append(
        self,
        snapshots: list[StatsSnapshot],
        doc: tuple[str, bytes] | None = None,
        taken: bytes | None = None,
    ):
        """Append snapshot rows to the reporting stream (and, with ``doc``, store a final
        document without expiry: key, JSON; with ``taken``, note this worker's snapshot in
        ``SNAPSHOT_TAKEN``: its time and the report run's request it answers), in round trips
        of at most ``ROWS_PER_CALL`` rows (thousands of subscriptions: the event loop runs
        the dispatchers between them)."""
        if not snapshots and doc is None and taken is None:
            return
        for start in range(0, max(len(snapshots), 1), ROWS_PER_CALL):
            pipe = self.context.redis.pipeline(transaction=False)
            if doc is not None and start == 0:
                pipe.set(doc[0], doc[1])
            for snap in snapshots[start : start + ROWS_PER_CALL]:
                pipe.xadd(
                    SNAPSHOT_STREAM,
                    {SNAPSHOT_FIELD: snap.to_json()},
                    maxlen=self.context.settings.stats_stream_maxlen,
                    approximate=True,
                )
            if taken is not None and start + ROWS_PER_CALL >= len(snapshots):
                # Last: whoever reads it finds the rows in the stream.
                pipe.hset(SNAPSHOT_TAKEN, self.context.worker_id, taken)
            await pipe.execute()

    def _due(self, runners: list[PartitionRunner], now: float) -> list[PartitionRunner]:
        """The partitions to read in this tick: all of them while they hold at most
        ``READS_PER_SECOND`` subscriptions, else the longest unread share of them (each
        partition is read every ``subscriptions / READS_PER_SECOND`` seconds)."""
        subscriptions = sum(max(len(r.dispatchers), 1) for r in runners)
        self.read_every = max(1.0, subscriptions / READS_PER_SECOND)
        if subscriptions <= READS_PER_SECOND:
            due = runners
        else:
            share = math.ceil(len(runners) * READS_PER_SECOND / subscriptions)
            due = sorted(runners, key=lambda r: r.stats_read_at)[:share]
        for runner in due:
            runner.stats_read_at = now
        return due

    async def read(self, runner: PartitionRunner) -> dict[str, SubscriptionSample]:
        """One read of a partition's counters and gauges (no document written)."""
        return await self._read(runner)

    def retire(
        self, runner: PartitionRunner, samples: dict[str, SubscriptionSample]
    ) -> tuple[bytes, list[StatsSnapshot], list[StatsSnapshot]]:
        """A partition goes dormant with what ``samples`` read: its final document (to keep
        without expiry, zlib-compressed: the admin service serves it while the partition
        sleeps), the snapshot rows of the interval so far that counted anything or have a
        backlog (reported now: nothing is lost between the last snapshot and now), and the
        rows reports keep seeing while it sleeps (its subscriptions with a backlog, nothing
        moving).  Forgets the partition."""
        now = time.monotonic()
        # Kept for as long as the partition sleeps: compressed (a third of the size).
        doc = zlib.compress(orjson.dumps(self._document(runner, samples, now)), 1)
        rows = [
            row
            for row in self._snapshots(runner, samples, int((now - self._last_snapshot) * 1000))
            if _moved(row) or row.backlog_msgs > 0
        ]
        sleeping = [
            replace(
                row,
                msg_in=0,
                bytes_in=0,
                msg_out=0,
                bytes_out=0,
                msg_redelivered=0,
                throttled_broker=0,
                throttled_topic=0,
                throttled_subscription=0,
            )
            for row in rows
            if row.backlog_msgs > 0
        ]
        self.forget(runner.partition.full)
        return doc, rows, sleeping

    async def _read(self, runner: PartitionRunner) -> dict[str, SubscriptionSample]:
        """One reading of a partition (``stats_read.lua``: a call per ``SUBS_PER_CALL``
        subscriptions, in one round trip; hiredis parses the nested replies), with the
        partition's levels hash (its priority level streams, for ``runner.flow``)."""
        redis = self.context.redis
        partition = runner.partition
        names = list(runner.dispatchers)
        script = self.context.scripts["stats_read"]
        head = [keys.partition_stats(partition), keys.log(partition)]
        chunks = [names[i : i + SUBS_PER_CALL] for i in range(0, len(names), SUBS_PER_CALL)]
        async with redis.pipeline(transaction=False) as pipe:
            for chunk in chunks or [[]]:
                script_keys = list(head)
                for name in chunk:
                    script_keys += [
                        keys.sub_key(partition, name, "stats"),
                        keys.sub_key(partition, name, "permits"),
                        keys.sub_key(partition, name, "info"),
                    ]
                await script(keys=script_keys, args=chunk, client=pipe)
            pipe.hkeys(keys.levels(partition))
            *replies, levels = await pipe.execute()
        runner.flow.levels = levels  # its priority level streams (``workers.flow``)
        counters = _pairs(replies[0][0])
        runner.msg_in, runner.bytes_in = (
            counter(counters, b"msg_in"),
            counter(counters, b"bytes_in"),
        )
        runner.quota_rejected = counter(counters, b"quota_rejected")
        runner.publish_throttled = counter(counters, b"publish_throttled")
        groups = [{k.decode(): v for k, v in _pairs(g).items()} for g in replies[0][1]]
        # Redis may not know a group's lag (a group created at an explicit id): counted then.
        backlogs = await read_backlogs(
            redis, self.context.scripts, [partition], groups_replies=[groups]
        )
        lag = {name: b.entries - b.pending for name, b in backlogs[partition.full].items()}
        per_sub = [row for reply in replies for row in reply[2:]]
        samples = {}
        for name, row in zip(names, per_sub, strict=True):
            stats, pending, permits, info = row[:4]
            waiting = [int(n) for n in row[4]] if len(row) > 4 and row[4] else None
            per_consumer = {
                c[0].decode(): int(c[1]) for c in (pending[3] if pending else None) or []
            }
            info_of = _pairs(info)
            consumers = [
                (
                    cid.decode(),
                    int(p),
                    per_consumer.get(cid.decode(), 0),
                    orjson.loads(info_of.get(cid, b"{}")),
                )
                for cid, p in _pairs(permits).items()
            ]
            samples[name] = SubscriptionSample(
                _pairs(stats),
                lag.get(name, 0),
                int(pending[0]) if pending else 0,
                consumers,
                waiting,
            )
        return samples

    def _document(self, runner: PartitionRunner, samples, now: float) -> dict:
        flow = runner.flow.limits
        avg_size = runner.bytes_in / runner.msg_in if runner.msg_in else 0.0
        rate_in = runner.publish.rate()
        return topic_document(
            runner.msg_in,
            runner.bytes_in,
            {
                name: self._subscription_document(runner, name, sample, now, avg_size)
                for name, sample in samples.items()
            },
            publish_limited_total=runner.publish_throttled,
            rate_in=(rate_in.msg_per_second, rate_in.byte_per_second),
            quota={
                "backlogQuotaLimitSize": flow.quotas[
                    QuotaType.DESTINATION_STORAGE
                ].value.limit_size,
                "backlogQuotaLimitTime": flow.quotas[QuotaType.MESSAGE_AGE].value.limit_time,
                "backlogQuotaExceeded": (
                    runner.flow.breach.describe(runner.partition.full)
                    if runner.flow.breach
                    else None
                ),
                "publishRejectedByBacklogQuota": runner.quota_rejected,
            },
            publish_limited=runner.publish_throttled
            - self.publish_limited_base.get(runner.partition.full, 0),
            owner=self.context.worker_id,
        )

    def _subscription_document(
        self, runner: PartitionRunner, name: str, sample, now: float, avg_size: float
    ) -> dict:
        """One subscription's part of the stats document (its rates from its meters)."""
        dispatcher = runner.dispatchers.get(name)
        key = (runner.partition.full, name)
        out = self.out_meters[key]
        redel = self.redeliver_meters[key]
        expired = self.expire_meters[key]
        counters = sample.counters
        out.add(now, counter(counters, b"msg_out"), counter(counters, b"bytes_out"))
        redel.add(now, counter(counters, b"redelivered"), 0)
        expired.add(now, counter(counters, b"expired"), 0)
        rate = out.rate()
        backlog = sample.lag + sample.pending
        consumer_limit = runner.flow.limits.max_unacked_per_consumer.value
        return subscription_document(
            counters,
            dispatcher.sub_type if dispatcher else "Shared",
            backlog=backlog,
            backlog_size=int(backlog * avg_size),
            unacked=sample.pending,
            rate_out=(rate.msg_per_second, rate.byte_per_second),
            rate_redeliver=redel.rate().msg_per_second,
            blocked=bool(dispatcher and dispatcher.blocked_on_unacked),
            rate_expired=expired.rate().msg_per_second,
            consumers=[
                {
                    "consumerName": info.get("name", cid),
                    "consumerId": cid,
                    "availablePermits": permits,
                    "unackedMessages": unacked,
                    "blockedConsumerOnUnackedMsgs": 0 < consumer_limit <= unacked,
                    "connectedSince": info.get("since"),
                }
                for cid, permits, unacked, info in sample.consumers
            ],
            throttled=_throttled(dispatcher),
            priority_levels=self._priority_levels(key, sample, now),
        )

    def _priority_levels(self, key: tuple[str, str], sample, now: float) -> dict | None:
        """Per priority, a subscription's waiting messages (its priority index; with level
        streams, the level's stream's pending + lag), messages dispatched and their rate;
        None for a subscription that never saw a priority."""
        seen = _levels_seen(sample)
        if seen is None:
            return None
        out, waiting = seen
        meters = self.level_meters[key]
        levels = {}
        for level in range(9, -1, -1):
            meters[level].add(now, out[level], 0)
            if waiting[level] or out[level]:
                levels[str(level)] = {
                    "msgBacklog": waiting[level],
                    "msgOutCounter": out[level],
                    "msgRateOut": meters[level].rate().msg_per_second,
                }
        return levels

    def _snapshots(self, runner: PartitionRunner, samples, interval_ms: int) -> list[StatsSnapshot]:
        partition = runner.partition
        common = dict(
            ts=int(time.time() * 1000),
            interval_ms=interval_ms,
            worker=self.context.worker_id,
            tenant=partition.tenant,
            namespace=partition.namespace,
            topic=partition.base.full,
            partition=partition.partition_index,
        )
        part_base = self.baselines[(partition.full, "")]
        common["msg_in"] = part_base.delta("msg_in", runner.msg_in)
        common["bytes_in"] = part_base.delta("bytes_in", runner.bytes_in)
        if not samples:
            return [StatsSnapshot(**common, subscription="")]
        doc = self.docs.get(partition.full, {}).get("subscriptions", {})
        now = time.monotonic()
        return [
            self._snapshot(runner, name, sample, common, doc.get(name, {}), now)
            for name, sample in samples.items()
        ]

    def _snapshot(
        self, runner: PartitionRunner, name: str, sample, common: dict, doc: dict, now: float
    ) -> StatsSnapshot:
        """One subscription's snapshot row: counters as deltas since its last row, the
        limits in force and what they allowed over the interval."""
        baseline = self.baselines[(runner.partition.full, name)]
        limits = runner.resolve(name)
        allowed_msgs, allowed_bytes = runner.limit_clock.take(
            name,
            now,
            common["interval_ms"] / 1000,
            (limits.msg_per_second, limits.byte_per_second),
        )
        levels = _snapshot_levels(baseline, sample)
        return StatsSnapshot(
            **common,
            subscription=name,
            msg_out=baseline.delta("msg_out", counter(sample.counters, b"msg_out")),
            bytes_out=baseline.delta("bytes_out", counter(sample.counters, b"bytes_out")),
            msg_redelivered=baseline.delta("redelivered", counter(sample.counters, b"redelivered")),
            **_throttled_deltas(baseline, _throttled(runner.dispatchers.get(name))),
            backlog_msgs=sample.lag + sample.pending,
            backlog_bytes=doc.get("backlogSize", 0),
            unacked=sample.pending,
            consumers=len(sample.consumers),
            **_limit_fields(limits),
            allowed_msgs=allowed_msgs,
            allowed_bytes=allowed_bytes,
            priority_levels=levels,
        )


def _levels_seen(sample) -> tuple[list[int], list[int]] | None:
    """A subscription's messages dispatched and waiting per priority 0..9, or None when it
    never saw a priority (nothing waiting nor counted per level)."""
    out = priority_counters(sample.counters)
    if sample.waiting is None and not any(out):
        return None
    return out, sample.waiting or [0] * 10


def _snapshot_levels(baseline: Baseline, sample) -> str | None:
    """A snapshot's ``priority_levels``: per priority, messages dispatched since the last row
    and messages waiting now; None for a subscription that never saw a priority."""
    seen = _levels_seen(sample)
    if seen is None:
        return None
    out, waiting = seen
    # A level first counted after the subscription's first row was counted from zero.
    counted = baseline.fresh or "msg_out" in baseline.values
    levels = {}
    for level in range(9, -1, -1):
        name = f"out_p{level}"
        if counted:
            baseline.values.setdefault(name, 0)
        sent = baseline.delta(name, out[level])
        if sent or waiting[level]:
            levels[str(level)] = [sent, waiting[level]]
    return orjson.dumps(levels).decode()


def _level_meters() -> list[RateMeter]:
    return [RateMeter() for _ in range(10)]


def _fresh_baseline() -> Baseline:
    return Baseline(fresh=True)


def _throttled_deltas(baseline: Baseline, throttled: dict[str, int]) -> dict[str, int]:
    """Throttling events per limiter since the last snapshot row (messages and bytes)."""
    return {
        f"throttled_{field}": baseline.delta(
            key,
            throttled[f"dispatchThrottledMsgEventsBy{limiter}Limit"]
            + throttled[f"dispatchThrottledBytesEventsBy{limiter}Limit"],
        )
        for field, key, limiter in (
            ("broker", "t_broker", "Broker"),
            ("topic", "t_topic", "Topic"),
            ("subscription", "t_sub", "Subscription"),
        )
    }


def _limit_fields(limits) -> dict:
    """The limits in force as a snapshot row holds them: per dimension, the value, the
    limiter that sets it and the level that limiter's value came from."""
    sources = {
        "broker": limits.broker,
        "topic": limits.topic,
        "subscription": limits.subscription,
    }
    msg, byte = limits.msg_limiter, limits.byte_limiter
    return {
        "limit_msg_per_s": limits.msg_per_second,
        "limit_byte_per_s": limits.byte_per_second,
        "limit_msg_limiter": msg.value if msg else None,
        "limit_byte_limiter": byte.value if byte else None,
        "limit_msg_source": sources[msg.value].source.value if msg else None,
        "limit_byte_source": sources[byte.value].source.value if byte else None,
    }


def _moved(row: StatsSnapshot) -> bool:
    """True when a snapshot row counted anything in its interval."""
    return bool(
        row.msg_in
        or row.bytes_in
        or row.msg_out
        or row.bytes_out
        or row.msg_redelivered
        or row.throttled_broker
        or row.throttled_topic
        or row.throttled_subscription
    )


def fingerprint(runner: PartitionRunner, samples: dict[str, SubscriptionSample]) -> tuple:
    """Every counter and gauge one read found: equal fingerprints, nothing happened."""
    return (
        runner.msg_in,
        runner.bytes_in,
        runner.quota_rejected,
        runner.publish_throttled,
        tuple(
            (
                name,
                tuple(sorted(sample.counters.items())),
                sample.lag,
                sample.pending,
                tuple((cid, permits, unacked) for cid, permits, unacked, _info in sample.consumers),
            )
            for name, sample in sorted(samples.items())
        ),
    )


def acked(samples: dict[str, SubscriptionSample]) -> int:
    """Acknowledgements counted by every subscription of a partition."""
    return sum(counter(sample.counters, b"acked") for sample in samples.values())


def _throttled(dispatcher: Dispatcher | None) -> dict[str, int]:
    counts = dispatcher.throttled if dispatcher else {}
    out = {}
    for reason, label in (
        ("broker", "Broker"),
        ("topic", "Topic"),
        ("subscription", "Subscription"),
        ("group", "ResourceGroup"),  # the resource group's budget (workers.group_budget)
    ):
        out[f"dispatchThrottledMsgEventsBy{label}Limit"] = counts.get(("msg", reason), 0)
        out[f"dispatchThrottledBytesEventsBy{label}Limit"] = counts.get(("byte", reason), 0)
    return out
