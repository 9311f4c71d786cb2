"""``sluice.waits.wait_event``: a cancellation that arrives while the event is set ends the
task (``asyncio.wait_for`` on Python 3.11 swallows it: the loop below would run on)."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import pytest

from sluice.waits import wait_event


async def _loop(event: asyncio.Event, wait) -> str:
    for turn in range(50):
        await wait(event, 10 if turn == 0 else 0.001)  # only the first wait is cancelled
        event.clear()
    return "ran on"


def _set_and_cancel(wait) -> str:
    async def scenario() -> str:
        event = asyncio.Event()
        task = asyncio.create_task(_loop(event, wait))
        await asyncio.sleep(0)  # the loop waits
        event.set()
        task.cancel()
        try:
            return await task
        except asyncio.CancelledError:
            return "cancelled"

    return asyncio.run(scenario())


def test_a_cancellation_while_the_event_is_set_ends_the_loop():
    assert _set_and_cancel(wait_event) == "cancelled"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="wait_for no longer swallows it")
def test_wait_for_swallows_it_on_python_3_11():
    """The control: the same loop on asyncio.wait_for runs on after its cancellation."""

    async def wait_for(event, timeout):
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    assert _set_and_cancel(wait_for) == "ran on"


def test_the_answer_is_whether_the_event_was_set():
    async def scenario() -> tuple[bool, bool, bool]:
        event = asyncio.Event()
        timed_out = await wait_event(event, 0.01)
        asyncio.get_running_loop().call_later(0.01, event.set)
        woken = await wait_event(event, 5)
        return timed_out, woken, await wait_event(event, 0)

    assert asyncio.run(scenario()) == (False, True, True)
