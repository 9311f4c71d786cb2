"""``DispatchGate``: a change is confirmed once no call issued before it is in flight."""

from __future__ import annotations

import asyncio

from workers.gate import DispatchGate


def test_drained_waits_for_the_earlier_calls_only():
    async def scenario():
        gate = DispatchGate()
        old = [gate.enter(), gate.enter()]
        generation = gate.advance()
        new = gate.enter()
        waiter = asyncio.ensure_future(gate.drained(generation))
        await asyncio.sleep(0)
        gate.leave(old[0])
        await asyncio.sleep(0)
        assert not waiter.done()  # one call of the old limits still runs
        again = gate.enter()  # calls of the new limits come and go meanwhile
        gate.leave(again)
        await asyncio.sleep(0)
        assert not waiter.done()
        gate.leave(old[1])
        await asyncio.wait_for(waiter, 1.0)
        assert gate.busy_before(generation + 1)  # the new call is still in flight
        gate.leave(new)
        assert not gate.busy_before(generation + 1)

    asyncio.run(scenario())
