"""Dispatch calls in flight, by the generation of the limits they were issued under.

Every dispatch call enters the gate before it is sent and leaves when its reply is back.  A
policy change advances the generation; ``drained(generation)`` returns once no call issued
under an earlier generation is still running.  Only then may the worker confirm the change:
from that moment every entry it hands out is handed out under the new limits.
"""

from __future__ import annotations

import asyncio
from collections import Counter


class DispatchGate:
    """Counts in-flight dispatch calls per limits generation."""

    def __init__(self) -> None:
        self.generation = 0
        self._in_flight: Counter[int] = Counter()
        self._left = asyncio.Event()

    def advance(self) -> int:
        """Start a new generation (limits changed); return it."""
        self.generation += 1
        return self.generation

    def enter(self) -> int:
        """A call is about to be sent under the current generation; return it."""
        generation = self.generation
        self._in_flight[generation] += 1
        return generation

    def leave(self, generation: int) -> None:
        """A call issued under ``generation`` has returned (or failed)."""
        self._in_flight[generation] -= 1
        if self._in_flight[generation] <= 0:
            # Only now can ``busy_before`` change: wake those waiting in ``drained``.
            del self._in_flight[generation]
            event, self._left = self._left, asyncio.Event()
            event.set()

    def busy_before(self, generation: int) -> bool:
        """True while a call issued before ``generation`` is still running."""
        return any(g < generation for g in self._in_flight)

    async def drained(self, generation: int) -> None:
        """Wait until no call issued before ``generation`` is still running."""
        while self.busy_before(generation):
            await self._left.wait()
