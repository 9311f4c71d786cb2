"""The exact limiter: fixed windows, debt carried over, reservations (manual clock)."""

from __future__ import annotations

import pytest

from models.dispatch_rate import DispatchRate
from models.resolution import Level, Limiter, ResolvedRate
from workers.limiter import QuotaBucket, RateLimiter


def resolved(msg=-1, byte=-1, period=1, kind=Limiter.TOPIC) -> ResolvedRate:
    return ResolvedRate(
        kind, DispatchRate(msg=msg, byte=byte, period=period), Level.NAMESPACE, msg, byte
    )


@pytest.mark.parametrize(("limit", "period", "just_before"), [(10, 1.0, 0.99), (100, 360.0, 359.0)])
def test_bucket_starts_full_and_renews_each_period(limit, period, just_before):
    # One second, and a period longer than a second.
    bucket = QuotaBucket(limit, period, now=0.0)
    assert bucket.available == limit
    bucket.available -= limit
    bucket.refresh(just_before)
    assert bucket.available == 0
    bucket.refresh(period)
    assert bucket.available == limit


def test_unused_quota_is_not_saved():
    bucket = QuotaBucket(10, 1.0, now=0.0)
    bucket.available -= 3
    bucket.refresh(5.5)
    assert bucket.available == 10
    assert bucket.next_refill() == 6.0


def test_overuse_is_paid_back_in_later_periods():
    # Classic limiter after PR #8611: limit 10, 11 delivered in period 1 -> 9 in period 2.
    bucket = QuotaBucket(10, 1.0, now=0.0)
    bucket.available -= 11
    bucket.refresh(1.0)
    assert bucket.available == 9
    # A large debt takes several periods, without stalling longer than it must.
    bucket.available -= 39  # -30
    bucket.refresh(2.0)
    assert bucket.available == -20
    bucket.refresh(4.0)
    assert bucket.available == 0
    bucket.refresh(5.0)
    assert bucket.available == 10


def test_raising_the_limit_keeps_what_was_used_this_period():
    bucket = QuotaBucket(100, 1.0, now=0.0)
    bucket.available -= 100
    bucket.update(1000, 1.0, now=0.5)
    assert bucket.available == 900
    bucket.update(50, 1.0, now=0.6)
    assert bucket.available == -50


def test_turning_a_limit_on_starts_a_fresh_window():
    bucket = QuotaBucket(-1, 1.0, now=0.0)
    bucket.update(10, 1.0, now=100.25)
    assert bucket.available == 10
    assert bucket.next_refill() == pytest.approx(101.25)


def test_reservations_prevent_overselling_a_shared_limiter():
    topic = RateLimiter(Limiter.TOPIC, 0.0, resolved(msg=100))
    assert topic.available(0.0).messages == 100 and not topic.available(0.0).exhausted
    topic.reserve(100, None, 0.0)  # dispatcher A is in flight with the whole quota
    budget = topic.available(0.0)
    assert budget.messages == 0 and budget.exhausted
    assert topic.has_reservations
    topic.settle(100, None, 60, 0)  # A handed out 60: 40 come back
    assert topic.available(0.0).messages == 40
    assert not topic.has_reservations


def test_overshoot_of_the_last_entry_becomes_debt():
    sub = RateLimiter(Limiter.SUBSCRIPTION, 0.0, resolved(byte=1000))
    sub.reserve(None, 1000, 0.0)
    sub.settle(None, 1000, 2, 1100)  # the last entry crossed the limit
    assert sub.available(0.5).bytes == -100
    assert sub.available(1.0).bytes == 900


def test_apply_in_place_keeps_accounting():
    topic = RateLimiter(Limiter.TOPIC, 0.0, resolved(msg=10))
    topic.charge(10, 0)
    topic.apply(resolved(msg=20), 0.2)
    assert topic.available(0.2).messages == 10
    topic.apply(resolved(), 0.3)
    assert not topic.enabled


def test_first_use_after_a_quiet_period_starts_the_period():
    # 30 backlogged at 10/period must span three periods from the first dispatch.
    bucket = QuotaBucket(10, 1.0, now=0.0)
    bucket.refresh(7.4)
    bucket.take(10, now=7.4)
    assert bucket.next_refill() == pytest.approx(8.4)
    bucket.refresh(8.4)
    bucket.take(10, now=8.4)
    bucket.refresh(9.4)
    assert bucket.available == 10


def test_steady_use_keeps_fixed_periods():
    bucket = QuotaBucket(10, 1.0, now=0.0)
    bucket.take(10, now=0.0)
    for second in range(1, 5):
        bucket.refresh(second + 0.003)  # the dispatcher wakes a little after each refill
        bucket.take(10, now=second + 0.003)
        assert bucket.next_refill() == pytest.approx(second + 1.0)
