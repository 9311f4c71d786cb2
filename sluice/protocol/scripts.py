"""The data plane's Lua scripts: one spec per script, the only place a script's call is built.

Each ``ScriptSpec`` names a script of ``sluice/protocol/lua/``, its KEYS as a *layout* (the
roles its header lists, in order: ``log``, ``lease``, ``s:cursor`` for a subscription's
cursor, ``q`` for a consumer's receiver queue, or a cluster-wide key such as
``sl:{meta}:workers`` itself), the builder of a whole call (``call``: KEYS and ARGV from
partition and subscription names), and the data-plane ACL action whose session users may call
it (``produce``, ``consume``; None = the admin service and the workers only).  Everything that
registers, loads or calls a script (the client, the workers, the admin service, the session
users' ACL rules) reads it here; a caller never lists a script's KEYS itself.

Hot paths keep ``spec.keys(...)`` per partition or subscription and build only the ARGV per
call (``produce_head``, ``ack_argv``, ``flow_argv``, ``DispatchArgs.argv``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from hashlib import sha1
from importlib import resources
from typing import Any

from sluice.protocol import keys
from sluice.protocol.frames import (
    Call,
    DispatchArgs,
    holder_prefix,
    wake_data,
    wake_dispatch,
    wake_subscription,
    wake_topic,
)
from sluice.protocol.names import TopicName

PRODUCE = "produce"  # the ACL actions of a role's grants
CONSUME = "consume"

# A partition-level KEYS role -> its key (see ``sluice.protocol.keys``).
_PARTITION_KEYS: dict[str, Callable[[TopicName], str]] = {
    "log": keys.log,
    "stats": keys.partition_stats,
    "idle": keys.idle,
    "subs": keys.subs,
    "lease": keys.lease,
    "epoch": keys.lease_epoch,
    "lim": keys.limiter,
    "quota": keys.quota,
    "limits": keys.limits,
    "producers": keys.producers,
    "pubrate": keys.publish_window,
}


# A resource group's KEYS role -> its key (in the group's own slot).
_GROUP_KEYS: dict[str, Callable[[str], str]] = {
    "rg:budget": keys.group_budget,
    "rg:members": keys.group_members,
    "rg:publish": keys.group_publish,
}


def _key(
    role: str, partition: TopicName | None, subscription: str, consumer: str, group: str = ""
) -> str:
    if role.startswith(keys.META):
        return role  # a cluster-wide key
    if role in _GROUP_KEYS:
        assert group, f"KEYS role {role} needs a resource group"
        return _GROUP_KEYS[role](group)
    assert partition is not None, f"KEYS role {role} needs a partition"
    if role.startswith("s:"):
        return keys.sub_key(partition, subscription, role[2:])
    if role == "q":
        return keys.queue(partition, subscription, consumer)
    return _PARTITION_KEYS[role](partition)


# A shared piece (lib/), or a whole script that another script runs as a function of its own
# (dispatch_many.lua runs dispatch.lua); included text may include in turn.
INCLUDE = re.compile(r"^-- include ((?:lib/)?[a-z_]+\.lua)$", re.MULTILINE)


def _expanded(path: str) -> str:
    """A Lua file with its includes expanded, theirs too."""
    return INCLUDE.sub(lambda line: _expanded(line.group(1)), _lua_text(path))


def _lua_text(path: str) -> str:
    """A file of ``sluice/protocol/lua/`` (``path`` relative to it)."""
    return resources.files("sluice.protocol.lua").joinpath(path).read_text()


@dataclass(frozen=True, eq=False)
class ScriptSpec:
    """One Lua script: its name, its KEYS layout, its call builder and who may call it."""

    name: str
    layout: tuple[str, ...]
    call: Callable[..., Call]  # (KEYS, ARGV) of one call; see each builder
    action: str | None = None  # the ACL action whose session users may call it

    def keys(
        self,
        partition: TopicName | None = None,
        subscription: str = "",
        consumer: str = "",
        group: str = "",
    ) -> list[str]:
        """The script's KEYS for one partition (and subscription, consumer), or for one
        resource ``group``."""
        return [_key(role, partition, subscription, consumer, group) for role in self.layout]

    def keys_of(self, partitions: Iterable[TopicName]) -> list[str]:
        """KEYS of a call naming several partitions (the layout repeated per partition)."""
        return [key for partition in partitions for key in self.keys(partition)]

    @cached_property
    def source(self) -> str:
        """The script's Lua text, each ``-- include lib/<piece>.lua`` line replaced by that
        piece (Lua that several scripts share: Redis runs each script as one text), and
        each ``-- include <script>.lua`` by that script's text."""
        return _expanded(f"{self.name}.lua")

    @cached_property
    def sha(self) -> str:
        """The SHA-1 digest ``EVALSHA`` names the script by."""
        return sha1(self.source.encode()).hexdigest()


# --- call builders, by script ---------------------------------------------------------------


def produce_head(partition: TopicName) -> list[Any]:
    """The ARGV every ``produce.lua`` call of a partition starts with (then the entry count
    and, per entry, its field count and fields)."""
    return [keys.WAKE_CHANNEL, wake_data(partition.full)]


def _produce(partition: TopicName, entries: list[list[Any]]) -> Call:
    """``produce.lua``: append ``entries`` (each a flat field list) to the partition."""
    args = [*produce_head(partition), len(entries)]
    for fields in entries:
        args += [len(fields) // 2, *fields]
    return PRODUCE_SCRIPT.keys(partition), args


def _subscribe(
    partition: TopicName,
    subscription: str,
    consumer: str,
    sub_type: str,
    initial_position: str,
    now_ms: int,
    info_json: str,
    consumer_timeout_ms: int,
    consumer_name: str = "",
    client_host: str = "",
) -> Call:
    """``subscribe.lua``: register ``consumer`` (or, with consumer "", ensure the group),
    within the partition's abuse limits and, per ``consumer_name`` (default: the consumer
    id) from ``client_host`` (the client's address as Redis sees it), its subscribe rate."""
    script_keys = SUBSCRIBE.keys(partition, subscription)
    args: list[Any] = [
        subscription,
        consumer,
        sub_type,
        initial_position,
        now_ms,
        info_json,
        keys.WAKE_CHANNEL,
        wake_subscription(partition.full, subscription),
        consumer_timeout_ms,
        partition.full,
        keys.partition_prefix(partition),
    ]
    if consumer_name:
        script_keys.append(keys.subscribe_counter(partition, consumer_name, client_host))
        args.extend([consumer_name, client_host])
    return script_keys, args


def flow_argv(
    partition: TopicName, subscription: str, consumer: str, permits: int, now_ms: int
) -> list[Any]:
    """ARGV of ``flow.lua``: give ``permits`` (0 = a heartbeat only)."""
    wake = wake_dispatch(partition.full, subscription)
    return [consumer, permits, now_ms, keys.WAKE_CHANNEL, wake]


def _flow(
    partition: TopicName, subscription: str, consumer: str, permits: int, now_ms: int
) -> Call:
    """``flow.lua``: a consumer's permits and heartbeat."""
    argv = flow_argv(partition, subscription, consumer, permits, now_ms)
    return FLOW.keys(partition, subscription), argv


def ack_argv(partition: TopicName, subscription: str, entry_ids: list[str]) -> list[Any]:
    """ARGV of ``ack.lua``."""
    return [
        subscription,
        keys.WAKE_CHANNEL,
        wake_dispatch(partition.full, subscription),
        *entry_ids,
    ]


def _ack(partition: TopicName, subscription: str, entry_ids: list[str]) -> Call:
    """``ack.lua``: acknowledge entries; wakes a dispatcher stopped at a max-unacked limit."""
    return ACK.keys(partition, subscription), ack_argv(partition, subscription, entry_ids)


def _ack_cumulative(partition: TopicName, subscription: str, consumer: str, last_id: str) -> Call:
    """``ack_cumulative.lua``: acknowledge a consumer's entries up to ``last_id``."""
    wake = wake_dispatch(partition.full, subscription)
    args = [subscription, consumer, last_id, keys.WAKE_CHANNEL, wake]
    return ACK_CUMULATIVE.keys(partition, subscription), args


def _nack(partition: TopicName, subscription: str, due_ms: int, entry_ids: Iterable[str]) -> Call:
    """``nack.lua``: schedule entries for redelivery at ``due_ms``."""
    wake = wake_dispatch(partition.full, subscription)
    args = [subscription, due_ms, keys.WAKE_CHANNEL, wake, *entry_ids]
    return NACK.keys(partition, subscription), args


def _release(partition: TopicName, subscription: str, consumer: str, now_ms: int) -> Call:
    """``release.lua``: remove a consumer; what it held becomes due for redelivery."""
    wake = wake_subscription(partition.full, subscription)
    args = [subscription, consumer, now_ms, keys.WAKE_CHANNEL, wake]
    return RELEASE.keys(partition, subscription, consumer), args


def _unsubscribe(
    partition: TopicName, subscription: str, consumer: str, now_ms: int, consumer_timeout_ms: int
) -> Call:
    """``unsubscribe.lua``: delete the subscription (consumer "" = administrative)."""
    prefix = keys.sub_prefix(partition, subscription)
    wake = wake_subscription(partition.full, subscription)
    args = [subscription, consumer, prefix, now_ms, consumer_timeout_ms, keys.WAKE_CHANNEL, wake]
    return UNSUBSCRIBE.keys(partition, subscription), args


def _dispatch(partition: TopicName, args: DispatchArgs) -> Call:
    """``dispatch.lua`` (a dispatcher packs its KEYS once: ``DISPATCH.keys``)."""
    return DISPATCH.keys(partition, args.subscription), args.argv()


def _dispatch_many(partition: TopicName, calls: list[DispatchArgs]) -> Call:
    """``dispatch_many.lua``: ``dispatch.lua`` for each of ``calls`` (subscriptions of
    ``partition``), in order, in one run."""
    call_keys: list[str] = []
    argvs = []
    for args in calls:
        call_keys += DISPATCH.keys(partition, args.subscription)
        argvs.append(args.argv())
    counts = [len(DISPATCH.layout)] * len(calls) + [len(argv) for argv in argvs]
    return call_keys, [len(calls), *counts, *(a for argv in argvs for a in argv)]


def _lease_acquire(partitions: Iterable[TopicName], worker: str, live: Iterable[str]) -> Call:
    """``lease_acquire.lua``: take the partitions' leases (one call may name several on a
    single server, one on a Redis Cluster)."""
    return LEASE_ACQUIRE.keys_of(partitions), [worker, *live]


def _lease_release(leases: Iterable[tuple[TopicName, str]]) -> Call:
    """``lease_release.lua``: give up (partition, token) leases still holding their token."""
    pairs = list(leases)
    return LEASE_RELEASE.keys_of(p for p, _ in pairs), [token for _, token in pairs]


def _lease_fence(partition: TopicName, worker: str) -> Call:
    """``lease_fence.lua``: delete the partition's lease while ``worker`` holds it."""
    return LEASE_FENCE.keys(partition), [holder_prefix(worker)]


def _worker_heartbeat(worker: str, ttl_ms: int) -> Call:
    """``worker_heartbeat.lua``: renew ``worker`` in the fleet registry, read the live ones."""
    return WORKER_HEARTBEAT.keys(), [worker, ttl_ms]


def _protocol_announce(protocol: int, oldest_peer: int) -> Call:
    """``protocol_announce.lua``: announce the protocol spoken and the oldest one accepted."""
    return PROTOCOL_ANNOUNCE.keys(), [protocol, oldest_peer]


def _group_budget(group: str, argv: list[Any]) -> Call:
    """``group_budget.lua``: reserve (and settle) on a resource group's dispatch limiter;
    ``argv`` as its header lists (``workers.group_budget`` builds it)."""
    return GROUP_BUDGET.keys(group=group), argv


def _group_publish(group_id: int, messages: int, size: int, rate_msg: int, rate_byte: int) -> Call:
    """``group_publish.lua``: take a send's messages and bytes from its resource group's
    publish window (the group by id, the rates as the partition's limits hash holds them)."""
    return GROUP_PUBLISH.keys(group=str(group_id)), [messages, size, rate_msg, rate_byte]


def _fleet_read() -> Call:
    """``fleet_read.lua``: the live workers and the change-event position each confirmed."""
    return FLEET_READ.keys(), []


def _skip(
    partition: TopicName,
    subscription: str,
    cutoff: str,
    budget: int,
    include_pending: bool,
    field: str,
    fencing_token: str = "",
    oldest_first: bool = False,
) -> Call:
    """``skip.lua``: move a subscription past entries below ``cutoff`` (at most ``budget``):
    the next to be dispatched, or (``oldest_first``) the oldest."""
    args = [subscription, cutoff, budget, 1 if include_pending else 0, field, fencing_token]
    if oldest_first:
        args.append(1)
    return SKIP.keys(partition, subscription), args


def _trim(partition: TopicName, floor_ms: int, fencing_token: str) -> Call:
    """``trim.lua``: delete entries every subscription acknowledged, before ``floor_ms``."""
    return TRIM.keys(partition), [floor_ms, fencing_token]


def _backlog(partition: TopicName, subscription: str) -> Call:
    """``backlog.lua``: a subscription's backlog, or where to count it from."""
    return BACKLOG.keys(partition), [subscription]


def _backlog_set(
    partition: TopicName,
    subscription: str,
    ref: str,
    read: int,
    most: int,
    deleted: int,
    level: int | None = None,
) -> Call:
    """``backlog_set.lua``: store a counted backlog when the count still holds (on the stream
    of ``level``, the level ``backlog.lua`` named; None: the partition's own stream)."""
    args: list[Any] = [subscription, ref, read, most, deleted]
    return BACKLOG_SET.keys(partition), args if level is None else [*args, level]


def _count_entries(
    partition: TopicName, after: str, most: int, last: str | None = None, level: int | None = None
) -> Call:
    """``count_entries.lua``: entries after ``after`` (up to ``last``), at most ``most``, over
    every stream of the partition, or only the stream of ``level``."""
    args: list[Any] = [after, most]
    if last is not None or level is not None:
        args.append("+" if last is None else last)
    if level is not None:
        args.append(level)
    return COUNT_ENTRIES.keys(partition), args


def _reset_cursor(
    partition: TopicName, subscription: str, target: str, anchor: str, count: int
) -> Call:
    """``reset_cursor.lua``: move a subscription's cursor to ``target``."""
    queues = keys.sub_prefix(partition, subscription) + "q:"
    wake = wake_dispatch(partition.full, subscription)
    args = [subscription, target, anchor, count, queues, keys.WAKE_CHANNEL, wake]
    return RESET_CURSOR.keys(partition, subscription), args


def _peek(partition: TopicName, mode: str, position: int, subscription: str = "") -> Call:
    """``peek.lua``: the ``position``-th entry of a backlog, or from either end."""
    return PEEK.keys(partition, subscription), [mode, position, subscription]


def _internal_read(partition: TopicName) -> Call:
    """``internal_read.lua``: a partition's stream, groups and owner in one reading."""
    return INTERNAL_READ.keys(partition), [keys.subscriptions_prefix(partition)]


def _stats_read(partition: TopicName, subscriptions: list[str]) -> Call:
    """``stats_read.lua``: a partition's counters and these subscriptions' state."""
    script_keys = STATS_READ.keys(partition)
    for name in subscriptions:
        script_keys += [
            _key(role, partition, name, "") for role in ("s:stats", "s:permits", "s:info")
        ]
    return script_keys, list(subscriptions)


def _stats_live(partition: TopicName, subscriptions: list[str]) -> Call:
    """``stats_live.lua``: a partition's counters, groups and these subscriptions' counters."""
    script_keys = STATS_LIVE.keys(partition)
    script_keys += [_key("s:stats", partition, name, "") for name in subscriptions]
    return script_keys, list(subscriptions)


def _limits(partition: TopicName, fencing_token: str, pairs: list[Any]) -> Call:
    """``limits.lua``: replace the partition's abuse limits (field/value ``pairs``; none =
    delete the hash), refused unless its lease holds ``fencing_token``."""
    return LIMITS.keys(partition), [fencing_token, *pairs]


def _producer(partition: TopicName, producer_id: str, expiry_ms: int) -> Call:
    """``producer.lua``: register or renew ``producer_id`` on the partition."""
    return PRODUCER.keys(partition), [producer_id, expiry_ms, partition.full]


def _topic_create(topic: TopicName, partitions: int, record: bytes) -> Call:
    """``topic_create.lua``: register a topic created on first use (``record`` is its registry
    JSON; a partitioned topic counts its partitions against the namespace limit)."""
    args = [topic.full, record, max(partitions, 1), topic.namespace_name]
    return TOPIC_CREATE.keys(), [*args, keys.WAKE_CHANNEL, wake_topic(topic.full)]


# --- the registry ---------------------------------------------------------------------------

SCRIPTS: dict[str, ScriptSpec] = {}  # every script by name, in the order registered


def _spec(
    name: str, layout: tuple[str, ...], call: Callable[..., Call], action: str | None = None
) -> ScriptSpec:
    spec = SCRIPTS[name] = ScriptSpec(name, layout, call, action)
    return spec


_SUB = ("log", "s:redeliver", "s:stats", "s:waitack")  # ack.lua, ack_cumulative.lua

PRODUCE_SCRIPT = _spec(
    "produce", ("log", "stats", "idle", "quota", "limits", "pubrate"), _produce, PRODUCE
)
SUBSCRIBE = _spec(
    "subscribe",
    ("log", "subs", "s:meta", "s:cursor", "s:permits", "s:alive", "s:info", "limits"),
    _subscribe,
    CONSUME,
)
FLOW = _spec("flow", ("s:permits", "s:waitp", "s:alive"), _flow, CONSUME)
ACK = _spec("ack", _SUB, _ack, CONSUME)
ACK_CUMULATIVE = _spec("ack_cumulative", _SUB, _ack_cumulative, CONSUME)
NACK = _spec("nack", ("log", "s:redeliver"), _nack, CONSUME)
RELEASE = _spec(
    "release",
    ("log", "s:permits", "s:alive", "s:info", "s:redeliver", "q"),
    _release,
    CONSUME,
)
UNSUBSCRIBE = _spec(
    "unsubscribe", ("log", "subs", "idle", "s:alive", "s:info"), _unsubscribe, CONSUME
)
DISPATCH = _spec(
    "dispatch",
    (
        *("log", "s:cursor", "s:permits", "s:redeliver", "s:stats", "idle", "s:waitp"),
        *("lease", "stats", "s:waitack", "lim", "s:lim", "s:ks", "s:info"),
    ),
    _dispatch,
)
# Calls of dispatch.lua for several subscriptions of one partition in one run: the layout is
# dispatch.lua's, repeated per call (``workers.scriptcall`` packs these calls itself).
DISPATCH_MANY = _spec("dispatch_many", DISPATCH.layout, _dispatch_many)
LEASE_ACQUIRE = _spec("lease_acquire", ("lease", "epoch"), _lease_acquire)
LEASE_RELEASE = _spec("lease_release", ("lease",), _lease_release)
WORKER_HEARTBEAT = _spec("worker_heartbeat", (keys.WORKERS,), _worker_heartbeat)
SKIP = _spec("skip", ("log", "s:cursor", "s:redeliver", "s:stats", "lease"), _skip)
BACKLOG = _spec("backlog", ("log",), _backlog)
BACKLOG_SET = _spec("backlog_set", ("log",), _backlog_set)
PRODUCER = _spec("producer", ("producers", "limits"), _producer, PRODUCE)
LIMITS = _spec("limits", ("lease", "limits"), _limits)
TOPIC_CREATE = _spec(
    "topic_create", (keys.TOPICS, keys.TOPIC_LIMITS, keys.CLIENT_CONFIG), _topic_create
)
RESET_CURSOR = _spec(
    "reset_cursor",
    ("log", "subs", "s:cursor", "s:redeliver", "s:permits", "s:waitp", "s:waitack"),
    _reset_cursor,
)
COUNT_ENTRIES = _spec("count_entries", ("log",), _count_entries)
PEEK = _spec("peek", ("log", "subs", "s:cursor"), _peek)
TRIM = _spec("trim", ("log", "lease"), _trim)
STATS_READ = _spec("stats_read", ("stats", "log"), _stats_read)
STATS_LIVE = _spec("stats_live", ("stats", "log"), _stats_live)
INTERNAL_READ = _spec("internal_read", ("log", "lease"), _internal_read)
LEASE_FENCE = _spec("lease_fence", ("lease",), _lease_fence)
FLEET_READ = _spec("fleet_read", (keys.WORKERS, keys.APPLIED), _fleet_read)
PROTOCOL_ANNOUNCE = _spec("protocol_announce", (keys.CLIENT_CONFIG,), _protocol_announce)
GROUP_BUDGET = _spec("group_budget", ("rg:budget", "rg:members"), _group_budget)
GROUP_PUBLISH = _spec("group_publish", ("rg:publish",), _group_publish, PRODUCE)


def scripts_for(action: str) -> tuple[ScriptSpec, ...]:
    """The scripts session users granted ``action`` may call, in registry order."""
    return tuple(spec for spec in SCRIPTS.values() if spec.action == action)
