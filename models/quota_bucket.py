"""One dimension of a fixed-window limiter: ``permits`` per ``period`` seconds.

Pure (the clock is an argument), so the worker's BROKER limiter (``workers.limiter``) and the
limit simulator (``models.simulation``) drive the same code.  It starts full; each period
boundary adds ``permits`` back but never above ``permits`` (unused quota is not saved up), and
a negative balance left by over-use is paid back from the next periods (Pulsar's classic
limiter, PR #8611).  A period starts with the first use after the previous one ended; under
steady load the periods stay back to back.  The rules are the same as the Redis-side
limiters' (see the header of ``dispatch.lua``).
"""

from __future__ import annotations

import math

IDLE_SLACK_SECONDS = 0.05  # as dispatch.lua: a late wake-up within this keeps the period


class QuotaBucket:
    """One dimension of one limiter; ``permits`` <= 0 means unlimited."""

    __slots__ = ("available", "last_use", "period", "permits", "window_start")

    def __init__(self, permits: int, period: float, now: float) -> None:
        self.permits = permits
        self.period = period
        self.available = permits
        self.window_start = now
        self.last_use = float("-inf")

    @property
    def limited(self) -> bool:
        """True when this dimension limits."""
        return self.permits > 0

    def refresh(self, now: float) -> None:
        """Apply every period boundary passed since the last call."""
        if not self.limited or now < self.window_start + self.period:
            return
        passed = math.floor((now - self.window_start) / self.period)
        self.available = min(self.permits, self.available + passed * self.permits)
        self.window_start += passed * self.period

    def next_refill(self) -> float:
        """When the next period starts (monotonic seconds)."""
        return self.window_start + self.period

    def take(self, amount: int, now: float) -> None:
        """Use ``amount``; a quota still whole after a whole unused period, or well into its
        own period, starts that period now (as ``dispatch.lua``)."""
        late = now - self.window_start > min(IDLE_SLACK_SECONDS, self.period / 20)
        idle = self.last_use < self.window_start - self.period
        if self.available >= self.permits and (idle or late):
            self.window_start = now
        self.available -= amount
        self.last_use = now

    def update(self, permits: int, period: float, now: float) -> None:
        """Change the limit in place, keeping what was used in the current period."""
        self.refresh(now)
        used = (self.permits - self.available) if self.limited else 0
        if period != self.period or not self.limited:
            self.window_start = now
        self.permits, self.period = permits, period
        self.available = permits - used if permits > 0 else permits
