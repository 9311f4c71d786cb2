"""``dispatch.lua``'s TOPIC and SUBSCRIPTION limiters, on a real Redis with a given clock, and
what it puts in a consumer's receiver queue.

Each test builds one partition with a backlog and consumers with permits through the same
scripts clients use, then calls the dispatch script directly with the limiters' clock passed
in (``DispatchArgs.clock_ms``), so periods are exact and nothing sleeps.
"""

from __future__ import annotations

import time
import uuid

import pytest
import redis

from sluice.protocol import keys
from sluice.protocol.frames import (
    DispatchArgs,
    DispatchReason,
    DispatchResult,
    LimitArgs,
    range_notice,
    unpack_packets,
)
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import DISPATCH, FLOW, PRODUCE_SCRIPT, SCRIPTS, SUBSCRIBE

NOW_MS = 1_700_000_000_000


class Partition:
    """A partition with a backlog and subscriptions, driven through the data-plane scripts."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.scripts = {name: client.register_script(s.source) for name, s in SCRIPTS.items()}
        self.name = TopicName("t", "ns", f"topic-{uuid.uuid4().hex[:8]}")

    def produce(self, count: int, size: int = 10) -> None:
        script_keys, args = PRODUCE_SCRIPT.call(self.name, [["d", b"x" * size]] * count)
        self.scripts["produce"](keys=script_keys[:3], args=args)

    def subscribe(self, subscription: str, consumer: str = "c1", permits: int = 100_000) -> None:
        call = SUBSCRIBE.call(
            self.name, subscription, consumer, "Shared", "earliest", NOW_MS, "{}", 60_000
        )
        self.scripts["subscribe"](keys=call[0], args=call[1])
        self.scripts["flow"](*FLOW.call(self.name, subscription, consumer, permits, NOW_MS))

    def dispatch(self, subscription: str, at: float, **kwargs) -> DispatchResult:
        """One dispatch call with the limiters' clock at ``at`` seconds."""
        args = DispatchArgs(
            subscription=subscription,
            queue_prefix=keys.sub_prefix(self.name, subscription) + "q:",
            now_ms=NOW_MS,
            clock_ms=NOW_MS + at * 1000,
            **kwargs,
        )
        reply = self.scripts["dispatch"](*DISPATCH.call(self.name, args))
        return DispatchResult.from_reply(reply)


@pytest.fixture
def part(redis_server) -> Partition:
    client = redis.Redis.from_url(redis_server.url)
    yield Partition(client)
    client.close()


def topic(msg: int = -1, byte: int = -1, period: int = 1, relative: bool = False) -> LimitArgs:
    return LimitArgs(msg, byte, period, relative)


def backlog(part, entries: int, **produce) -> None:
    """``entries`` entries on the partition and subscription ``s`` at the start of them."""
    part.produce(entries, **produce)
    part.subscribe("s")


def first_quota_at_zero(part):
    """100 entries and subscription ``s``, its first quota of 10 a second dispatched at 0.0:
    what that dispatch did."""
    backlog(part, 100)
    return part.dispatch("s", 0.0, topic=topic(10))


def test_a_period_hands_out_its_quota_and_says_how_long_until_the_next(part):
    first = first_quota_at_zero(part)
    assert (first.entries, first.reason) == (10, DispatchReason.MSG_BUDGET)
    assert first.exhausted == 1 and first.wait_ms == 1000
    later = part.dispatch("s", 0.4, topic=topic(10))
    assert later.entries == 0 and later.wait_ms == 600
    assert part.dispatch("s", 1.0, topic=topic(10)).entries == 10


def test_unused_quota_is_not_saved_up(part):
    backlog(part, 100)
    assert part.dispatch("s", 0.0, topic=topic(10)).entries == 10
    assert part.dispatch("s", 5.5, topic=topic(10)).entries == 10


@pytest.mark.parametrize(
    ("resumed_at", "wait_ms"),
    [
        # Quiet from 0.0 until 2.7: the period that begins then runs until 3.7, not 3.0.
        pytest.param(2.7, 1000, id="first-use-after-a-quiet-period-opens-a-fresh-period"),
        # The period 1.0-2.0 goes unused until 1.3 (an outage, say): it starts at 1.3
        # instead, so nothing more goes out before 2.3.
        pytest.param(1.3, 1000, id="a-period-unused-until-well-into-it-starts-then"),
        # 30 ms late: still the 1.0 period.
        pytest.param(1.03, 970, id="a-late-wake-up-keeps-the-periods-in-step"),
    ],
)
def test_where_the_period_after_a_pause_starts(part, resumed_at, wait_ms):
    first_quota_at_zero(part)
    resumed = part.dispatch("s", resumed_at, topic=topic(10))
    assert resumed.entries == 10 and resumed.wait_ms == wait_ms


def test_a_steadily_late_dispatcher_keeps_its_periods_whole(part):
    """A busy worker serves a subscription 300 ms after each boundary: the first such period
    starts late (nothing else went out for it), the following ones stay on that grid, so
    the subscription gets its whole limit every period."""
    first_quota_at_zero(part)
    first = part.dispatch("s", 1.3, topic=topic(10))  # a jump: the period starts at 1.3
    assert first.entries == 10 and first.wait_ms == 1000
    for start in (2.3, 3.3, 4.3):
        again = part.dispatch("s", start + 0.28, topic=topic(10))  # late as before: in step
        assert again.entries == 10 and again.wait_ms == 720


def test_a_period_first_used_much_later_than_the_last_one_starts_then(part):
    """After a period used on time, one first used 400 ms into its own (after an outage)
    starts at that use, so two quotas never go out less than a period apart."""
    first_quota_at_zero(part)
    part.dispatch("s", 1.0, topic=topic(10))  # on time: lateness 0
    resumed = part.dispatch("s", 2.4, topic=topic(10))
    assert resumed.entries == 10 and resumed.wait_ms == 1000
    assert part.dispatch("s", 3.39, topic=topic(10)).entries == 0


@pytest.mark.parametrize(
    ("renewing", "resumed_at", "wait_ms"),
    [
        # The previous call found the quota spent: its renewal served 400 ms late keeps
        # the 1.0 period (the next renews at 2.0).
        pytest.param(1, 1.4, 600, id="a-renewal-served-late-keeps-its-grid"),
        # ... up to half a period late.
        pytest.param(1, 1.5, 500, id="half-a-period-late-still-keeps-it"),
        pytest.param(1, 1.6, 1000, id="later-than-half-a-period-starts-then"),
        # Another limiter ran out in that call: this one's period starts at its late use.
        pytest.param(4, 1.4, 1000, id="only-the-limiters-that-ran-out-keep-their-grid"),
        pytest.param(0, 1.4, 1000, id="no-previous-call-starts-then"),
    ],
)
def test_a_late_renewal_of_a_spent_quota_keeps_its_grid(part, renewing, resumed_at, wait_ms):
    """A subscription that was waiting for its quota's renewal (the caller's previous call
    left it spent) and was served late by the caller (a loaded worker) keeps the period's
    grid up to half a period late: the delay was the server's, not a quiet spell, and the
    grid periods each hold the limit, so the bound from the subscription's start holds."""
    # The server's start is known to the second from its uptime: a quota used in its first
    # second counts as spent before it started (the period restarts then, as it always could).
    while part.client.info("server")["uptime_in_seconds"] < 2:
        time.sleep(0.1)
    now = time.time() - NOW_MS / 1000  # the limiters' clock at this Redis server's time
    backlog(part, 100)
    assert part.dispatch("s", now, topic=topic(10)).entries == 10
    resumed = part.dispatch("s", now + resumed_at, topic=topic(10), renewing=renewing)
    assert resumed.entries == 10 and resumed.wait_ms == wait_ms
    # The next quota renews where the grid says, never before.
    early = part.dispatch("s", now + resumed_at + wait_ms / 1000 - 0.01, topic=topic(10))
    assert early.entries == 0


def test_a_quota_spent_before_redis_started_restarts_its_period_when_first_used(part):
    """A quota spent before the Redis server (re)started waited for the restart, not for a
    late caller: its period starts at its first use after it, whatever the caller says."""
    uptime = part.client.info("server")["uptime_in_seconds"]
    before = time.time() - uptime - 5 - NOW_MS / 1000  # 5 s before this server started
    backlog(part, 100)
    assert part.dispatch("s", before, topic=topic(10)).entries == 10
    resumed = part.dispatch("s", before + 1.3, topic=topic(10), renewing=1)
    assert resumed.entries == 10 and resumed.wait_ms == 1000


def test_steady_use_keeps_periods_back_to_back(part):
    first_quota_at_zero(part)
    for second in (1, 2, 3):
        result = part.dispatch("s", second + 0.003, topic=topic(10))
        assert result.entries == 10
        assert result.wait_ms == 997  # the next period still starts on the whole second


def test_the_tightest_of_topic_subscription_and_broker_wins(part):
    backlog(part, 100)
    result = part.dispatch("s", 0.0, topic=topic(10), sub=LimitArgs(4))
    assert result.entries == 4 and result.exhausted == 4
    assert part.dispatch("s", 1.0, topic=topic(10), broker_msg=3).entries == 3


def test_subscriptions_of_a_partition_share_its_topic_quota(part):
    part.produce(100)
    part.subscribe("a")
    part.subscribe("b")
    assert part.dispatch("a", 0.0, topic=topic(10)).entries == 10
    other = part.dispatch("b", 0.2, topic=topic(10))
    assert other.entries == 0 and other.exhausted == 1 and other.wait_ms == 800
    # Each subscription has its own SUBSCRIPTION quota.
    assert part.dispatch("b", 0.3, sub=LimitArgs(5)).entries == 5
    assert part.dispatch("a", 0.3, sub=LimitArgs(5)).entries == 5


def test_a_raised_limit_starts_a_new_period_less_what_was_used(part):
    backlog(part, 500)
    assert part.dispatch("s", 0.0, topic=topic(10)).entries == 10
    raised = part.dispatch("s", 0.5, topic=topic(100))
    assert raised.entries == 90
    assert raised.wait_ms == 1000  # the new period began at the change, 0.5


def test_a_lowered_limit_stalls_dispatch_for_one_period_at_most(part):
    backlog(part, 500)
    assert part.dispatch("s", 0.0, topic=topic(100)).entries == 100
    lowered = part.dispatch("s", 0.3, topic=topic(10))
    assert lowered.entries == 0 and lowered.wait_ms == 1000
    assert part.dispatch("s", 1.3, topic=topic(10)).entries == 10


def test_a_relative_limit_keeps_its_periods_when_its_value_moves(part):
    backlog(part, 500)
    assert part.dispatch("s", 0.0, topic=topic(50, relative=True)).entries == 50
    moved = part.dispatch("s", 0.5, topic=topic(60, relative=True))
    assert moved.entries == 10 and moved.wait_ms == 500


def test_a_longer_period_is_one_quota_per_period(part):
    backlog(part, 100)
    assert part.dispatch("s", 0.0, sub=LimitArgs(5, period=2)).entries == 5
    assert part.dispatch("s", 1.5, sub=LimitArgs(5, period=2)).entries == 0
    assert part.dispatch("s", 2.0, sub=LimitArgs(5, period=2)).entries == 5


def test_a_byte_limit_overshoots_by_one_entry_at_most_and_pays_it_back(part):
    backlog(part, 100, size=300)
    first = part.dispatch("s", 0.0, topic=topic(byte=1000))
    # 0, 300, 600 and 900 bytes were under the budget before each entry: 1,200 went out.
    assert (first.entries, first.bytes, first.reason) == (4, 1200, DispatchReason.BYTE_BUDGET)
    second = part.dispatch("s", 1.0, topic=topic(byte=1000))
    assert second.bytes == 900  # 800 left after paying back 200: 0, 300, 600 < 800


def test_a_caught_up_subscription_is_not_charged_when_not_throttled(part):
    backlog(part, 5)
    free = part.dispatch("s", 0.0, topic=topic(2), skip_when_caught_up=True)
    assert free.entries == 5 and free.unthrottled
    part.produce(50)
    assert part.dispatch("s", 0.1, topic=topic(2)).entries == 2


def test_no_limit_touches_no_limiter_state(part):
    backlog(part, 10)
    assert part.dispatch("s", 0.0).entries == 10
    assert not part.client.exists(keys.limiter(part.name))
    assert not part.client.exists(keys.sub_key(part.name, "s", "lim"))


def test_several_reads_per_call_stay_within_every_limit(part):
    backlog(part, 1000)
    free = part.dispatch("s", 0.0, max_entries=100, reads=4)
    assert free.entries == 400 and free.reason == DispatchReason.MORE
    limited = part.dispatch("s", 0.0, max_entries=100, reads=4, topic=topic(250))
    assert limited.entries == 250 and limited.reason == DispatchReason.MSG_BUDGET
    part.subscribe("t", permits=150)
    assert part.dispatch("t", 0.0, max_entries=100, reads=4).entries == 150


def queued(part, subscription: str = "s", consumer: str = "c1") -> list[bytes]:
    """The elements of a consumer's receiver queue."""
    return part.client.lrange(keys.sub_prefix(part.name, subscription) + f"q:{consumer}", 0, -1)


def test_a_run_of_small_entries_goes_to_the_consumer_whole(part):
    """The fast path hands small entries over as they were read (id and fields): the
    consumer reads nothing more."""
    backlog(part, 30)
    assert part.dispatch("s", 0.0, max_entries=20).entries == 20
    elements = queued(part)
    assert len(elements) == 1
    packet = unpack_packets(elements[0])
    ids = [entry_id for entry_id, _fields in part.client.xrange(keys.log(part.name))]
    assert [entry_id for entry_id, _fields in packet] == ids[:20]
    assert all(fields[fields.index(b"d") + 1] == b"x" * 10 for _id, fields in packet)


def test_a_run_of_large_entries_goes_as_a_range_notice(part):
    backlog(part, 3, size=300_000)
    assert part.dispatch("s", 0.0).entries == 3
    ids = [entry_id for entry_id, _fields in part.client.xrange(keys.log(part.name))]
    assert [range_notice(raw) for raw in queued(part)] == [(ids[0], ids[-1])]
