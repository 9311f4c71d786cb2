"""Waiting for an ``asyncio.Event`` with a timeout, without losing a cancellation.

On Python 3.11 (Debian 12's), ``asyncio.wait_for(event.wait(), timeout)`` swallows a
cancellation that arrives while the event is being set: the event's waiter has finished, so
``wait_for`` returns its result instead of raising, and the cancelled task carries on (fixed
in 3.12).  A loop built on it then outlives ``task.cancel()``, and whoever awaits the task to
stop a service waits for ever.  ``wait_event`` always lets the cancellation through.
"""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds passed (None: no limit); True when
    it was set.  A cancellation of the caller is always raised."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        done, _pending = await asyncio.wait((waiter,), timeout=timeout)
    finally:
        waiter.cancel()
    return bool(done)
