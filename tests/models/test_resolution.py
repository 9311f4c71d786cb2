"""Resolution of limiter values: Pulsar's own scenarios (reference §4), table-driven."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from models.broker_config import BrokerConfig
from models.dispatch_rate import DispatchRate
from models.resolution import (
    Candidate,
    Level,
    Limiter,
    PolicyInputs,
    PublishRate,
    resolve_limits,
)

MIB = 1024 * 1024


def rate(msg=-1, byte=-1, period=1, relative=False) -> DispatchRate:
    return DispatchRate(msg=msg, byte=byte, period=period, relative=relative)


def broker(**overrides: int) -> BrokerConfig:
    return BrokerConfig.from_overrides({k: str(v) for k, v in overrides.items()})


def inputs(b=None, ns=None, ns_sub=None, tp=None, tp_sub=None, subs=None) -> PolicyInputs:
    return PolicyInputs(
        broker=b or broker(),
        namespace_dispatch_rate=ns,
        namespace_subscription_dispatch_rate=ns_sub,
        topic_dispatch_rate=tp,
        topic_subscription_dispatch_rate=tp_sub,
        subscription_dispatch_rates=MappingProxyType(subs or {}),
    )


PER_TOPIC_100 = broker(dispatchThrottlingRatePerTopicInMsg=100)
PER_SUB_100 = broker(dispatchThrottlingRatePerSubscriptionInMsg=100)

# (case, inputs, expected (msg permits, byte permits, period), expected source level)
TOPIC_CASES = [
    # testClusterPolicyOverrideConfiguration: broker 100 -> NS {500,0} -> NS {0,0} falls back.
    ("broker default", inputs(PER_TOPIC_100), (100, -1, 1), Level.BROKER),
    (
        "namespace beats broker",
        inputs(PER_TOPIC_100, ns=rate(500, 0)),
        (500, -1, 1),
        Level.NAMESPACE,
    ),
    ("namespace {0,0} is unset", inputs(PER_TOPIC_100, ns=rate(0, 0)), (100, -1, 1), Level.BROKER),
    (
        "namespace {-1,-1} is unset",
        inputs(PER_TOPIC_100, ns=rate(-1, -1)),
        (100, -1, 1),
        Level.BROKER,
    ),
    # testPolicyOverwrittenByNamespaceLevel: topic wins over a later namespace change...
    (
        "topic beats namespace",
        inputs(ns=rate(300, 30000, 2), tp=rate(100, 10000)),
        (100, 10000, 1),
        Level.TOPIC,
    ),
    # ...and removing the topic policy falls back to the namespace value.
    ("topic removed", inputs(ns=rate(300, 30000, 2)), (300, 30000, 2), Level.NAMESPACE),
    # The winning object is taken whole: no dimension is inherited from a lower level.
    (
        "partial topic value wins whole",
        inputs(ns=rate(-1, 500), tp=rate(100, -1)),
        (100, -1, 1),
        Level.TOPIC,
    ),
    # testDispatchRateCompatibility: nothing set anywhere means no limit.
    ("nothing set", inputs(), (-1, -1, 1), Level.BROKER),
    # TopicDispatchRateLimiterTest: byte-only broker default.
    (
        "broker bytes only",
        inputs(broker(dispatchThrottlingRatePerTopicInByte=1000)),
        (-1, 1000, 1),
        Level.BROKER,
    ),
]


@pytest.mark.parametrize(
    ("case", "given", "expected", "source"), TOPIC_CASES, ids=[c[0] for c in TOPIC_CASES]
)
def test_topic_limiter(case, given, expected, source):
    topic = resolve_limits(given).topic
    assert (topic.permits_msg, topic.permits_byte, topic.period) == expected
    assert topic.source is source


SUB_CASES = [
    ("broker per-sub default", inputs(PER_SUB_100), "s", (100, -1), Level.BROKER),
    (
        "namespace sub beats broker",
        inputs(PER_SUB_100, ns_sub=rate(500, 0)),
        "s",
        (500, -1),
        Level.NAMESPACE,
    ),
    (
        "namespace sub {0,0} unset",
        inputs(PER_SUB_100, ns_sub=rate(0, 0)),
        "s",
        (100, -1),
        Level.BROKER,
    ),
    # testSubscriptionDispatchRatePolicyOverwrittenNamespaceLevel
    (
        "topic sub beats namespace sub",
        inputs(ns_sub=rate(100, MIB), tp_sub=rate(200, 2 * MIB)),
        "s",
        (200, 2 * MIB),
        Level.TOPIC,
    ),
    ("topic sub removed", inputs(ns_sub=rate(100, MIB)), "s", (100, MIB), Level.NAMESPACE),
    # PIP-152: the subscription's own rate beats every other level, for that name only.
    (
        "own rate wins",
        inputs(tp_sub=rate(200), subs={"s": rate(7)}),
        "s",
        (7, -1),
        Level.SUBSCRIPTION,
    ),
    (
        "other sub's rate ignored",
        inputs(tp_sub=rate(200), subs={"x": rate(7)}),
        "s",
        (200, -1),
        Level.TOPIC,
    ),
    (
        "own rate unset falls through",
        inputs(tp_sub=rate(200), subs={"s": rate(0, -1)}),
        "s",
        (200, -1),
        Level.TOPIC,
    ),
    # "" asks for the default chain (what `applied` on the topic-level value reports).
    (
        "default chain ignores own rates",
        inputs(ns_sub=rate(9), subs={"": rate(1)}),
        "",
        (9, -1),
        Level.NAMESPACE,
    ),
    # topic dispatchRate does not leak into the subscription limiter.
    ("topic rate is not a sub rate", inputs(tp=rate(5)), "s", (-1, -1), Level.BROKER),
]


@pytest.mark.parametrize(
    ("case", "given", "sub", "expected", "source"), SUB_CASES, ids=[c[0] for c in SUB_CASES]
)
def test_subscription_limiter(case, given, sub, expected, source):
    limiter = resolve_limits(given, subscription=sub).subscription
    assert limiter is not None
    assert (limiter.permits_msg, limiter.permits_byte) == expected
    assert limiter.source is source


def test_applied_value_when_nothing_is_set_is_broker_built_with_period_1():
    # testGetSubDispatchRateApplied: applied == {per-sub msg, per-sub byte, period 1}.
    limiter = resolve_limits(inputs(), subscription="").subscription
    assert limiter.rate == rate(0, 0, 1)
    assert not limiter.enabled
    assert resolve_limits(
        inputs(ns_sub=rate(10, 11, 12)), subscription=""
    ).subscription.rate == rate(10, 11, 12)


def test_broker_limiter_comes_only_from_broker_keys():
    # BrokerDispatchRateLimiterTest: off at first, then byte=100, then msg=100 too.
    assert not resolve_limits(inputs()).broker.enabled
    limits = resolve_limits(inputs(broker(dispatchThrottlingRateInByte=100), ns=rate(5)))
    assert (limits.broker.permits_msg, limits.broker.permits_byte) == (-1, 100)
    limits = resolve_limits(
        inputs(broker(dispatchThrottlingRateInByte=100, dispatchThrottlingRateInMsg=100))
    )
    assert (limits.broker.permits_msg, limits.broker.permits_byte) == (100, 100)


@pytest.mark.parametrize(
    ("levels", "binding"),
    [
        # testMultiLevelDispatch: (broker, topic, sub) bytes/s; the minimum wins every time.
        ((1000, 5000, 10000), Limiter.BROKER),
        ((10000, 1000, 5000), Limiter.TOPIC),
        ((5000, 10000, 1000), Limiter.SUBSCRIPTION),
    ],
)
def test_lowest_byte_limit_wins_across_limiters(levels, binding):
    b, t, s = levels
    given = inputs(broker(dispatchThrottlingRateInByte=b), ns=rate(byte=t), ns_sub=rate(byte=s))
    limits = resolve_limits(given, subscription="sub")
    assert limits.byte_per_second == 1000
    assert limits.byte_limiter is binding
    assert limits.msg_per_second is None


def test_periods_are_compared_per_second():
    limits = resolve_limits(inputs(tp=rate(100, period=10), tp_sub=rate(20)), subscription="s")
    assert limits.msg_per_second == 10
    assert limits.msg_limiter is Limiter.TOPIC


def test_relative_rate_adds_the_publish_rate():
    # testRelativeMessageRateLimitingThrottling: NS {msg 1, period 1, relative}, publish 1000/s.
    given = inputs(ns=rate(1, relative=True))
    topic = resolve_limits(given, publish_rate=PublishRate(1000.0, 0.0)).topic
    assert topic.permits_msg == 1001
    assert topic.permits_byte == -1  # an off dimension stays off


def test_relative_rate_scales_with_the_period():
    given = inputs(ns=rate(10, 100, period=5, relative=True))
    topic = resolve_limits(given, publish_rate=PublishRate(2.0, 50.0)).topic
    assert (topic.permits_msg, topic.permits_byte) == (20, 350)


def test_subscription_left_out_when_not_asked():
    assert resolve_limits(inputs(ns_sub=rate(5))).subscription is None


def test_candidates_in_precedence_order_with_the_first_set_one_winning():
    own, tp_sub, ns_sub = rate(msg=7), rate(msg=0, byte=0), rate(msg=30)
    given = inputs(b=PER_SUB_100, tp_sub=tp_sub, ns_sub=ns_sub, subs={"s": own})
    resolved = resolve_limits(given, subscription="other").subscription
    assert resolved is not None
    levels = [(c.level, c.rate, c.set) for c in resolved.candidates]
    assert levels == [
        (Level.SUBSCRIPTION, None, False),
        (Level.TOPIC, tp_sub, False),  # both dimensions <= 0: falls through
        (Level.NAMESPACE, ns_sub, True),
        (Level.BROKER, rate(msg=100, byte=0), True),
    ]
    assert resolved.source is Level.NAMESPACE and resolved.rate == ns_sub
    own_resolved = resolve_limits(given, subscription="s").subscription
    assert own_resolved is not None
    assert own_resolved.candidates[0] == Candidate(Level.SUBSCRIPTION, own)
    assert own_resolved.source is Level.SUBSCRIPTION


def test_candidates_of_the_topic_and_broker_limiters():
    limits = resolve_limits(inputs(b=PER_TOPIC_100, ns=rate(msg=5)))
    assert [c.level for c in limits.topic.candidates] == [
        Level.TOPIC,
        Level.NAMESPACE,
        Level.BROKER,
    ]
    assert [c.set for c in limits.topic.candidates] == [False, True, True]
    assert limits.topic.source is Level.NAMESPACE
    assert [c.level for c in limits.broker.candidates] == [Level.BROKER]
    # An unlimited broker default is still the last resort, and set.
    assert limits.broker.candidates[0].set and not limits.broker.enabled


def test_candidates_do_not_change_what_a_limiter_equals():
    a = resolve_limits(inputs(tp=rate(msg=5), ns=rate(msg=9))).topic
    b = resolve_limits(inputs(tp=rate(msg=5), ns=rate(msg=1))).topic
    assert a.candidates != b.candidates
    assert a == b
