"""The limit simulator's replay (``models.simulation``), as a pure function."""

from __future__ import annotations

import pytest

from models.simulation import RecordedInterval, observed_capacity, simulate


def steady(published: int, n: int, *, seconds: float = 1.0, **fields) -> list[RecordedInterval]:
    """``n`` back-to-back intervals publishing ``published`` each, delivered as published."""
    base = {"delivered": published, "backlog": 0, "throttled": False}
    base.update(fields)
    return [
        RecordedInterval(end=1000 + seconds * (i + 1), seconds=seconds, published=published, **base)
        for i in range(n)
    ]


def test_no_limit_delivers_what_was_published():
    run = simulate(steady(100, 10), permits=0)
    assert run.simulated_delivered == 1000 and run.simulated_throttled_seconds == 0


def test_a_limit_allows_its_permits_each_period_and_the_backlog_grows():
    run = simulate(steady(100, 10), permits=40)
    assert [i.simulated_delivered for i in run.intervals] == [40] * 10
    assert run.intervals[-1].simulated_backlog == 600
    # Throttled from the moment the first quota ran out (40 of 100 arrived in 0.4 s), then
    # all the time but the slice of each period's start: 0.6 + 9 x 0.99 s.
    assert run.simulated_throttled_seconds == pytest.approx(0.6 + 9 * 0.99, abs=0.02)


def test_the_limit_is_per_partition():
    run = simulate(steady(100, 10), permits=30, partitions=2)
    assert run.simulated_delivered == 600


def test_longer_periods_hand_out_their_quota_once_per_period():
    run = simulate(steady(100, 10), permits=150, period=2.0)
    assert run.simulated_delivered == 750  # 5 periods of 150


def test_the_consumers_capacity_caps_delivery():
    run = simulate(steady(100, 10), permits=0, capacity=25.0)
    assert run.simulated_delivered == pytest.approx(250, abs=2)


def test_traffic_that_starts_late_in_an_interval_starts_the_period_then():
    # 36 arrive in the last 0.3 s of the first interval (at the next one's 120 msg/s): the
    # period starts with them, so the first interval delivers 36 and the second 4 + 40.
    first = RecordedInterval(
        end=1001, seconds=1.0, published=36, delivered=36, backlog=0, throttled=False
    )
    rest = [
        RecordedInterval(
            end=1002 + i, seconds=1.0, published=120, delivered=40, backlog=0, throttled=True
        )
        for i in range(3)
    ]
    run = simulate([first, *rest], permits=40)
    assert [i.simulated_delivered for i in run.intervals] == [36, 44, 40, 40]


def test_what_waited_before_the_window_is_delivered_first():
    recorded = steady(0, 3, delivered=50, backlog=0, waiting=0)
    recorded[0] = RecordedInterval(
        end=1001, seconds=1.0, published=0, delivered=50, backlog=50, throttled=True, waiting=50
    )
    run = simulate(recorded, permits=50)
    assert run.initial_backlog == 100
    assert [i.simulated_delivered for i in run.intervals] == [50, 50, 0]


def test_observed_capacity_comes_from_consumer_bound_intervals_only():
    # Messages waited, nobody throttled: acknowledged = published - backlog growth = 30/s.
    bound = [
        RecordedInterval(
            end=1000 + i,
            seconds=1.0,
            published=50,
            delivered=30,
            backlog=20 * i,
            throttled=False,
            waiting=20 * i - 5,
            consumers=1,
        )
        for i in range(1, 5)
    ]
    assert observed_capacity(bound) == pytest.approx(30.0)
    # Throttled, or nothing waiting: no capacity observed.
    assert observed_capacity(steady(50, 4, throttled=True, waiting=10, consumers=1)) is None
    assert observed_capacity(steady(50, 4, waiting=0, consumers=1)) is None
    assert observed_capacity([]) is None
