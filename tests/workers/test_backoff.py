"""The retry curve of refused sends, checked with an injected clock and random source."""

from __future__ import annotations

import itertools

import pytest

from sluice.backoff import Backoff, FakeClock


def take(iterator, n: int) -> list[float]:
    return [round(x, 6) for x in itertools.islice(iterator, n)]


def test_defaults_follow_rocketmq_curve():
    curve = Backoff()
    assert take(curve.nominal(), 5) == [1.0, 1.6, 2.56, 4.096, 6.5536]
    # 1.6 ** 11 > 120: from there on every wait is the maximum.
    assert take(curve.nominal(), 14)[-3:] == [120.0, 120.0, 120.0]


def test_jitter_spreads_each_wait_by_its_fraction():
    lowest = Backoff(uniform=lambda low, _high: low)
    highest = Backoff(uniform=lambda _low, high: high)
    assert take(lowest.delays(), 3) == [0.8, 1.28, 2.048]
    assert take(highest.delays(), 3) == [1.2, 1.92, 3.072]
    assert take(Backoff(jitter=0.0).delays(), 2) == [1.0, 1.6]


def test_custom_curve_and_cap():
    curve = Backoff(initial=0.05, multiplier=2.0, jitter=0.0, maximum=0.3)
    assert take(curve.delays(), 5) == [0.05, 0.1, 0.2, 0.3, 0.3]


@pytest.mark.parametrize(
    "kwargs",
    [{"initial": 0}, {"maximum": -1}, {"multiplier": 0.5}, {"jitter": 1.5}, {"jitter": -0.1}],
)
def test_invalid_curves_are_refused(kwargs):
    with pytest.raises(ValueError):
        Backoff(**kwargs)


def test_fake_clock_moves_only_when_slept_on():
    clock = FakeClock(start=10.0)
    assert clock.now() == 10.0
    clock.sleep(1.5)
    clock.sleep(0.5)
    assert clock.now() == 12.0
    assert clock.slept == [1.5, 0.5]
