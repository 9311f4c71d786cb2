"""What each subscription's limit allowed over a stats interval, exact to the moment it changed.

A stats snapshot carries the limit in force at its end; a limit changed inside the interval
would count for all of it.  ``LimitClock`` keeps, per subscription of a partition, the limits
in force since the interval began and when each began (the partition runner marks every
change as it applies it), and integrates them when the snapshot is taken: the messages and
bytes the limit allowed over the interval (``StatsSnapshot.allowed_msgs`` / ``allowed_bytes``),
which the rate report uses instead of "limit at the end x length".  Time is the worker's
monotonic clock; a limit of ``None`` (no limit) allows nothing to count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Limits = tuple[float | None, float | None]  # messages/s, bytes/s; None = no limit


@dataclass
class _Segments:
    """Limits in force from given times on: [(since, limits), ...], oldest first."""

    items: list[tuple[float, Limits]] = field(default_factory=list)


class LimitClock:
    """The limits of one partition's subscriptions over time, integrated per interval."""

    def __init__(self) -> None:
        self._subs: dict[str, _Segments] = {}

    def mark(self, now: float, limits: dict[str, Limits]) -> None:
        """The limits in force from ``now`` on (only changes are kept)."""
        for name, value in limits.items():
            segments = self._subs.setdefault(name, _Segments()).items
            if not segments or segments[-1][1] != value:
                segments.append((now, value))

    def forget(self, name: str) -> None:
        """A subscription this partition no longer has."""
        self._subs.pop(name, None)

    def take(
        self, name: str, now: float, seconds: float, current: Limits
    ) -> tuple[float | None, float | None]:
        """(messages, bytes) the limits allowed over the ``seconds`` up to ``now`` (None for a
        dimension that had no limit at any time), and start the next interval at ``now`` with
        the ``current`` limits.  Before the first mark the first limits known count from the
        start (a partition taken over in the middle of an interval)."""
        segments = self._subs.get(name, _Segments()).items or [(now, current)]
        start = now - seconds
        allowed: list[float | None] = [None, None]
        for index, (since, value) in enumerate(segments):
            begin = start if index == 0 else max(since, start)
            end = segments[index + 1][0] if index + 1 < len(segments) else now
            span = max(min(end, now) - begin, 0.0)
            for dim in (0, 1):
                limit = value[dim]
                if limit is not None:
                    allowed[dim] = (allowed[dim] or 0.0) + limit * span
        self._subs[name] = _Segments([(now, current)])
        return allowed[0], allowed[1]
