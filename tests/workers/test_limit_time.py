"""``LimitClock``: what a subscription's limits allowed over a stats interval."""

from __future__ import annotations

import pytest

from workers.limit_time import LimitClock


def test_a_steady_limit_allows_limit_times_length():
    clock = LimitClock()
    clock.mark(100.0, {"sub": (50.0, None)})
    assert clock.take("sub", 110.0, 10.0, (50.0, None)) == (500.0, None)


def test_a_change_counts_from_when_it_was_applied():
    # 50 msg/s, raised to 100 at 105 (the example of docs/reports.md): 5 s x 50 + 5 s x 100.
    clock = LimitClock()
    clock.mark(100.0, {"sub": (50.0, 1000.0), "other": (10.0, None)})
    clock.mark(105.0, {"sub": (100.0, 1000.0), "other": (10.0, None)})
    assert clock.take("sub", 110.0, 10.0, (100.0, 1000.0)) == (750.0, 10_000.0)
    assert clock.take("other", 110.0, 10.0, (10.0, None)) == (100.0, None)
    # The next interval starts where this one ended, at the limit in force.
    assert clock.take("sub", 120.0, 10.0, (100.0, 1000.0)) == (1000.0, 10_000.0)


def test_a_limit_set_or_removed_inside_the_interval_counts_for_its_time_only():
    clock = LimitClock()
    clock.mark(100.0, {"sub": (None, None)})
    clock.mark(107.5, {"sub": (40.0, None)})
    assert clock.take("sub", 110.0, 10.0, (40.0, None)) == (100.0, None)
    clock.mark(112.0, {"sub": (None, None)})
    assert clock.take("sub", 120.0, 10.0, (None, None)) == (80.0, None)
    assert clock.take("sub", 130.0, 10.0, (None, None)) == (None, None)


def test_before_the_first_mark_the_first_limits_count_from_the_start():
    """A partition taken over in the middle of an interval: its limits from then on are
    assumed for the head of the interval too."""
    clock = LimitClock()
    clock.mark(104.0, {"sub": (20.0, None)})
    assert clock.take("sub", 110.0, 10.0, (20.0, None)) == (200.0, None)
    # Never marked at all: the limits at the end, for the whole interval.
    assert clock.take("new", 110.0, 10.0, (30.0, None)) == (300.0, None)


def test_repeated_marks_of_the_same_limits_change_nothing():
    clock = LimitClock()
    for t in range(100, 110):
        clock.mark(float(t), {"sub": (25.0, None)})
    assert clock.take("sub", 110.0, 10.0, (25.0, None))[0] == pytest.approx(250.0)
