"""A uvicorn server whose housekeeping wakes once a second instead of ten times.

uvicorn's ``Server.main_loop`` sleeps 0.1 s between ticks: the admin service and every
worker's HTTP endpoint woke ten times a second with nothing to do, which was a third of an
idle standalone's CPU.  What a tick does only needs a second's resolution (the ``date``
header changes once a second; the request limit is not used), except noticing a stop: here
setting ``should_exit`` (uvicorn's own signal handlers do, and so do the callers that run the
server inside their own loop) wakes the loop at once, so stopping is as quick as before.
"""

from __future__ import annotations

import asyncio
import contextlib

import uvicorn

from sluice.waits import wait_event

TICK_SECONDS = 1.0
# uvicorn refreshes the date header on ticks whose counter is a multiple of this.
_TICKS_PER_DATE = 10


class QuietServer(uvicorn.Server):
    """``uvicorn.Server`` with a one-second tick that a stop interrupts."""

    def __init__(self, config: uvicorn.Config) -> None:
        self._exit_requested: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        super().__init__(config)

    @property
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value
        if value and self._exit_requested is not None and self._loop is not None:
            # From a signal handler or another thread too: the loop may be asleep in select.
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing waits
                self._loop.call_soon_threadsafe(self._exit_requested.set)

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._exit_requested = asyncio.Event()
        if self._should_exit:
            self._exit_requested.set()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + _TICKS_PER_DATE) % 864_000  # uvicorn's own wrap
            await wait_event(self._exit_requested, TICK_SECONDS)
