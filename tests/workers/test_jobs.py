"""A loop of guarded jobs stops when cancelled, even if a job swallowed the cancellation (a
redis-py pipeline can, when the cancellation meets the end of its round trip): whoever stops
the loop and waits for it must not wait for ever."""

from __future__ import annotations

import asyncio

from workers.jobs import every, guarded


async def swallowing(swallowed: list[int] | None = None) -> None:
    """A job that takes its first cancellation for an ordinary end, as such a pipeline does
    (later ones go through, so that a test failing here still ends)."""
    try:
        await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        if swallowed is None or swallowed:
            raise
        swallowed.append(1)


async def test_a_loop_whose_job_swallowed_its_cancellation_still_ends() -> None:
    runs = 0
    swallowed: list[int] = []

    async def job() -> None:
        nonlocal runs
        runs += 1
        await swallowing(swallowed)

    loop = asyncio.create_task(every(0.001, job))
    while runs == 0:
        await asyncio.sleep(0.001)
    loop.cancel()  # lands inside the job
    done, _ = await asyncio.wait({loop}, timeout=2.0)
    if not done:
        loop.cancel()  # the second one goes through
    assert swallowed and done, "the loop went on after it was cancelled"
    assert loop.cancelled()


async def test_a_job_that_was_not_cancelled_ends_quietly() -> None:
    await guarded(swallowing)  # nothing raised
