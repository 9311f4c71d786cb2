"""What the worker measures of a partition: rates over a window, and one tick's readings.

``RateMeter`` turns cumulative counters sampled over time into a rate (the publish rate that
relative limits follow, the dispatch rates of the stats documents); ``SubscriptionSample`` is
what one stats tick read about one subscription (flow control checks the backlog quota with
it).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from models.resolution import PublishRate

RATE_WINDOW_SECONDS = 5.0


class RateMeter:
    """A rate from cumulative counters sampled over time (window of a few seconds)."""

    def __init__(self) -> None:
        self.samples: deque[tuple[float, int, int]] = deque()

    def add(self, now: float, messages: int, size: int) -> None:
        """Record the counters' values at ``now``."""
        self.samples.append((now, messages, size))
        while len(self.samples) > 2 and now - self.samples[0][0] > RATE_WINDOW_SECONDS:
            self.samples.popleft()

    def rate(self) -> PublishRate:
        """Messages and bytes per second over the window."""
        if len(self.samples) < 2:
            return PublishRate()
        (t0, m0, b0), (t1, m1, b1) = self.samples[0], self.samples[-1]
        span = t1 - t0
        if span <= 0:
            return PublishRate()
        return PublishRate(max(m1 - m0, 0) / span, max(b1 - b0, 0) / span)


@dataclass
class SubscriptionSample:
    """What one tick read about one subscription."""

    counters: dict[bytes, bytes]
    lag: int
    pending: int
    consumers: list[tuple[str, int, int, dict]]  # id, permits, unacked, info
    # Messages waiting in the priority index per priority 0..9 (None: no index).
    waiting: list[int] | None = None
