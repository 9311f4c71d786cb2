"""Exponential backoff for sends the broker refuses (backlog quota), as RocketMQ's clients do.

The first retry waits ``initial``; each further wait is the previous one times ``multiplier``,
capped at ``maximum``; every wait is spread by a uniform jitter of ``+- jitter`` of itself.
Defaults: 1 s, x1.6, 20 % jitter, at most 120 s.  The clock, the sleep and the random source
are injectable, so tests check the curve without sleeping.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Backoff:
    """The retry curve (seconds)."""

    initial: float = 1.0
    multiplier: float = 1.6
    jitter: float = 0.2
    maximum: float = 120.0
    uniform: Callable[[float, float], float] = field(default=random.uniform, compare=False)

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.maximum <= 0:
            raise ValueError("backoff initial and maximum must be > 0")
        if self.multiplier < 1:
            raise ValueError("backoff multiplier must be >= 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError("backoff jitter must be between 0 and 1")

    def nominal(self) -> Iterator[float]:
        """The waits without jitter: initial, initial x multiplier, ... capped at maximum."""
        current = min(self.initial, self.maximum)
        while True:
            yield current
            current = min(current * self.multiplier, self.maximum)

    def delays(self) -> Iterator[float]:
        """The waits with jitter applied (never negative)."""
        for nominal in self.nominal():
            spread = self.jitter * nominal
            yield max(nominal + self.uniform(-spread, spread), 0.0)


@dataclass(slots=True)
class Clock:
    """Time and sleeping, swappable in tests."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


class FakeClock(Clock):
    """A clock that only moves when something sleeps on it; records every sleep."""

    def __init__(self, start: float = 0.0) -> None:
        self.time = start
        self.slept: list[float] = []
        super().__init__(now=lambda: self.time, sleep=self._sleep)

    def _sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.time += seconds
