"""``dispatch.lua``'s lean path: a renewal (the message quota alone binds and one read takes
it) runs fewer Redis commands and leaves exactly what the full path leaves.

On a private ``redis-server`` (every command it counts is the test's), twin partitions get the
same calls: one as the renewal clock makes them (the lean path), the other with a max-unacked
limit far above anything pending, which changes no outcome but sends the call down the full
path (``XPENDING``).  Replies (but the pending count, which only the checked call reports)
and every key the calls write must be the same, period after period, through a renewal, a
drained backlog, an empty one and a redelivery that comes due; and a renewal must run no more
than ``LEAN_COMMANDS`` commands (the full path runs 15, its twin here 16 with the
``XPENDING``; with Redis's own clock both run a ``TIME`` more, which ``dispatch_many.lua``
reads once for a whole run, as the last test checks).
"""

from __future__ import annotations

import dataclasses
import uuid

import pytest
import redis

from server.embedded_redis import EmbeddedRedis
from sluice.protocol import keys
from sluice.protocol.frames import DispatchArgs, DispatchReason, DispatchResult, LimitArgs
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import (
    DISPATCH,
    DISPATCH_MANY,
    FLOW,
    PRODUCE_SCRIPT,
    SCRIPTS,
    SUBSCRIBE,
)

NOW_MS = 1_700_000_000_000
TOKEN = "w1:1:1"
LEAN_COMMANDS = 13  # a renewal's commands on the lean path, the limiters' clock given
ONE = LimitArgs(1, 0, 1, False)  # 1 message a second
FULL_UNACKED = 1_000_000  # a max-unacked limit nothing reaches: the full path, same outcome


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    server = EmbeddedRedis(tmp_path_factory.mktemp("dispatch-lean-redis")).start()
    sync = redis.Redis.from_url(server.url)
    yield sync
    sync.close()
    server.stop()


class Twin:
    """A partition with a backlog of ``entries`` and subscription ``s`` (consumer c1)."""

    def __init__(self, client: redis.Redis, entries: int) -> None:
        self.client = client
        self.scripts = {name: client.register_script(s.source) for name, s in SCRIPTS.items()}
        self.name = TopicName("t", "ns", f"lean-{uuid.uuid4().hex[:8]}")
        self.produce(entries)
        call = SUBSCRIBE.call(self.name, "s", "c1", "Shared", "earliest", NOW_MS, "{}", 60_000)
        self.scripts["subscribe"](keys=call[0], args=call[1])
        self.scripts["flow"](*FLOW.call(self.name, "s", "c1", 1_000, NOW_MS))
        client.set(keys.lease(self.name), TOKEN)

    def produce(self, count: int) -> None:
        if count:
            script_keys, args = PRODUCE_SCRIPT.call(self.name, [["d", b"x" * 10]] * count)
            self.scripts["produce"](keys=script_keys[:3], args=args)

    def args(self, at: float, full: bool, **kwargs) -> DispatchArgs:
        return DispatchArgs(
            subscription="s",
            queue_prefix=keys.sub_prefix(self.name, "s") + "q:",
            now_ms=NOW_MS + int(at * 1000),
            clock_ms=NOW_MS + at * 1000 + 3,
            fencing_token=TOKEN,
            delay_margin_ms=1000,
            max_unacked_subscription=FULL_UNACKED if full else 0,
            **kwargs,
        )

    def dispatch(self, at: float, full: bool, **kwargs) -> tuple:
        """One call; its reply without the pending count, and the commands it ran."""
        before = commands(self.client)
        reply = self.scripts["dispatch"](*DISPATCH.call(self.name, self.args(at, full, **kwargs)))
        ran = commands(self.client) - before
        result = DispatchResult.from_reply(reply)
        return dataclasses.replace(result, unacked=0), ran

    def state(self) -> dict:
        """Every key a dispatch call writes, ids relative to the partition's own."""
        sub = keys.sub_key
        stream = DISPATCH.keys(self.name)[0]
        ids = {entry_id: n for n, (entry_id, _f) in enumerate(self.client.xrange(stream))}
        pending = self.client.xpending_range(stream, "s", "-", "+", 100)
        return {
            "limiter": self.client.hgetall(sub(self.name, "s", "lim")),
            "stats": self.client.hgetall(sub(self.name, "s", "stats")),
            "permits": self.client.hgetall(sub(self.name, "s", "permits")),
            "cursor": ids.get(self.client.get(sub(self.name, "s", "cursor")), "none"),
            "queue": self.client.llen(keys.queue(self.name, "s", "c1")),
            "pending": [(ids[p["message_id"]], p["consumer"]) for p in pending],
            "idle": self.client.sismember(DISPATCH.keys(self.name, "s")[5], "s"),
            "flags": [self.client.get(k) for k in DISPATCH.keys(self.name, "s")[6:10:3]],
        }


def commands(client: redis.Redis) -> int:
    """Commands the server ran from scripts (not INFO, EVALSHA, SCRIPT: the test's own)."""
    stats = client.info("commandstats")
    own = ("cmdstat_info", "cmdstat_evalsha", "cmdstat_script|load")
    return sum(int(v["calls"]) for name, v in stats.items() if name not in own)


@pytest.mark.parametrize("permits", [1, 5])
def test_a_renewal_runs_fewer_commands_and_leaves_what_the_full_path_leaves(client, permits):
    limit = LimitArgs(permits, 0, 1, False)
    lean, full = Twin(client, 3 * permits - 1), Twin(client, 3 * permits - 1)
    seen = set()
    # Renewals, the backlog drained (at 2.0 less than the quota left, at 3.0 nothing: no
    # data), new entries, a redelivery come due (the full path for both), renewals again.
    for at in (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0):
        if at == 4.0:
            lean.produce(4 * permits), full.produce(4 * permits)
        if at == 6.0:
            for twin in (lean, full):
                stream = DISPATCH.keys(twin.name)[0]
                first = twin.client.xpending_range(stream, "s", "-", "+", 1)[0]["message_id"]
                twin.client.zadd(keys.sub_key(twin.name, "s", "redeliver"), {first: NOW_MS})
        got, ran = lean.dispatch(at, full=False, sub=limit)
        expected, ran_full = full.dispatch(at, full=True, sub=limit)
        assert got == expected, at
        assert lean.state() == full.state(), at
        seen.add(got.reason)
        if at in (0.0, 1.0, 4.0, 5.0, 7.0):
            assert (got.entries, got.reason, got.exhausted) == (
                permits,
                DispatchReason.MSG_BUDGET,
                4,
            )
            assert ran <= LEAN_COMMANDS < ran_full, at
    assert DispatchReason.NO_DATA in seen


def test_a_run_reads_redis_clock_once(client):
    """``dispatch_many.lua`` reads ``TIME`` once for its run's calls that would each read it
    (no clock given), and each still hands out its quota."""
    twins = [Twin(client, 3) for _ in range(3)]
    many = client.register_script(DISPATCH_MANY.source)
    argvs = [
        dataclasses.replace(twin.args(0.0, full=False, sub=ONE), clock_ms=None).argv()
        for twin in twins
    ]
    call_keys = [key for twin in twins for key in DISPATCH.keys(twin.name, "s")]
    counts = [len(DISPATCH.layout)] * len(twins) + [len(argv) for argv in argvs]
    client.script_load(DISPATCH_MANY.source)
    before = client.info("commandstats").get("cmdstat_time", {}).get("calls", 0)
    replies = many(keys=call_keys, args=[len(twins), *counts, *(a for v in argvs for a in v)])
    after = client.info("commandstats").get("cmdstat_time", {}).get("calls", 0)
    assert after - before == 1
    results = [DispatchResult.from_reply(reply) for reply in replies]
    assert [(r.entries, r.reason) for r in results] == [(1, DispatchReason.MSG_BUDGET)] * 3
