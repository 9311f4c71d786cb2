"""``group_budget.lua`` against a real Redis, on a given clock: the group's periods, the
settlements, a changed limit, and the weighted, work-conserving split between members."""

from __future__ import annotations

import uuid

import pytest
import redis

from sluice.protocol.scripts import GROUP_BUDGET
from workers.group_budget import WHY_GRANTED, WHY_GROUP, WHY_SHARE, Grant

PERIOD = 1000


class Group:
    """One group's limiter, called as a dispatcher would, at chosen times (ms)."""

    def __init__(self, client: redis.Redis, limit: int = 100) -> None:
        self.name = f"g{uuid.uuid4().hex[:8]}"
        self.script = client.register_script(GROUP_BUDGET.source)
        self.limit = limit

    def call(self, member: str, at: int, want: int = 1000, weight: int = 1, settle=(), hungry=True):
        keys, argv = GROUP_BUDGET.call(
            self.name,
            [member, weight, self.limit, -1, PERIOD, want, 0, 1 if hungry else 0, at],
        )
        return Grant.from_reply(self.script(keys=keys, args=[*argv, *settle]))

    def settle(self, member: str, grant: Grant, used: int, at: int, hungry: bool = False):
        return self.call(
            member,
            at,
            want=0,
            hungry=hungry,
            settle=(grant.msg_period, grant.messages, used, 0, 0, 0),
        )


@pytest.fixture
def client(redis_server) -> redis.Redis:
    connection = redis.Redis.from_url(redis_server.url)
    yield connection
    connection.close()


def test_one_member_gets_the_whole_group_then_waits_for_the_next_period(client) -> None:
    group = Group(client)
    first = group.call("a", 10_000)  # paced: a tenth at the period's start
    assert (first.messages, first.why) == (10, WHY_GRANTED)
    paced = group.call("a", 10_000)
    assert paced.why == WHY_SHARE and paced.messages == 0 and paced.wait_ms == 50
    assert group.call("a", 10_250).messages == 30  # 0.1 + 1.2 x 0.25 of the share by now
    assert group.call("a", 10_750).messages == 60  # all of it three quarters through
    empty = group.call("a", 10_800)
    assert empty.why == WHY_GROUP and empty.messages == 0
    assert empty.wait_ms == 200  # until the period that started at 10 000 ends
    assert group.call("a", 11_000).messages == 10
    assert group.call("a", 11_750).messages == 90


def test_what_a_call_did_not_use_goes_back_to_its_period_only(client) -> None:
    group = Group(client)
    grant = group.call("a", 10_000)
    assert group.call("a", 10_750).messages == 90
    group.settle("a", grant, 3, 10_800, hungry=True)  # 7 of the first 10 come back
    assert group.call("a", 10_900).messages == 7
    late = group.call("a", 12_000)
    assert late.messages == 10
    assert group.call("a", 13_100).messages == 10  # the next period, started at 13 100
    assert group.call("a", 13_850).messages == 90  # used up
    group.settle("a", late, 0, 13_900)  # the 12 000 period is over: nothing goes back
    assert group.call("a", 13_950).messages == 0


def test_two_hungry_members_split_by_weight(client) -> None:
    group = Group(client)
    assert group.call("a", 10_000, weight=3).messages == 10  # alone
    # b starts a moment later: still its share of this period, paced like a's.
    assert group.call("b", 10_025, weight=1).messages == 4  # 25 x 0.13, rounded up
    assert group.call("a", 10_750, weight=3).messages == 65
    refused = group.call("a", 10_760, weight=3)
    assert refused.why == WHY_SHARE and 0 < refused.wait_ms <= 50
    assert group.call("b", 10_770, weight=1).messages == 21


def test_a_satisfied_member_leaves_its_share(client) -> None:
    group = Group(client)
    group.call("a", 10_000, want=1)
    group.call("b", 10_001, want=1)
    assert group.call("a", 11_000).messages == 5
    assert group.call("b", 11_000).messages == 5
    assert group.call("a", 11_750).messages == 45
    b = group.call("b", 11_751)
    assert b.messages == 45
    group.settle("b", b, 5, 11_752)  # b had only 10 to send in all
    assert group.call("a", 11_753).messages == 40  # what b left goes to a


def test_a_lowered_limit_never_oversells(client) -> None:
    group = Group(client, 100)
    group.call("a", 10_000)
    assert group.call("a", 10_750).messages == 90
    group.limit = 50
    # A new period at once, less what the interrupted one used (all of it): nothing more.
    lowered = group.call("a", 10_800)
    assert lowered.messages == 0 and lowered.why == WHY_GROUP
    assert group.call("a", 11_800).messages == 5
    assert group.call("a", 12_550).messages == 45
