"""The outbox relay's sweep schedule (``api.outbox.OutboxRelay.run``): sweeps that find
nothing space out, doubling up to the grace period; one that finds events, a failure, or a
request's failure report brings the pace back to ``sweep_seconds``.  (The sweep itself, against
PostgreSQL and Redis, is tests/api/test_outbox.py's.)"""

from __future__ import annotations

import asyncio

from redis.exceptions import ConnectionError as RedisConnectionError

from api.outbox import OutboxRelay


class ScriptedRelay(OutboxRelay):
    """A relay whose sweeps answer from a script (events found, or an exception), noting when
    each ran."""

    def __init__(self, answers: list, **kwargs) -> None:
        super().__init__(sessions=None, redis=None, stream="s", **kwargs)  # type: ignore[arg-type]
        self.answers = answers
        self.times: list[float] = []

    async def publish_pending(self, grace: float = 0.0) -> int:
        self.times.append(asyncio.get_running_loop().time())
        answer = self.answers.pop(0) if self.answers else 0
        if isinstance(answer, Exception):
            raise answer
        return answer


def gaps(relay: ScriptedRelay) -> list[float]:
    return [b - a for a, b in zip(relay.times, relay.times[1:], strict=False)]


def paced(relay: ScriptedRelay, expected: list[float]) -> bool:
    """The gaps between sweeps are the expected waits (late by at most 0.1 s: a loaded
    machine)."""
    found = gaps(relay)[: len(expected)]
    return len(found) == len(expected) and all(
        e - 0.01 <= f <= e + 0.1 for f, e in zip(found, expected, strict=True)
    )


def run(relay: ScriptedRelay, seconds: float, notify_at: float | None = None) -> None:
    async def scenario() -> None:
        task = asyncio.create_task(relay.run())
        if notify_at is not None:
            await asyncio.sleep(notify_at)
            relay.notify()
            await asyncio.sleep(seconds - notify_at)
        else:
            await asyncio.sleep(seconds)
        task.cancel()

    asyncio.run(scenario())


def test_idle_sweeps_double_up_to_the_grace_period():
    relay = ScriptedRelay([], sweep_seconds=0.1, grace_seconds=0.8)
    run(relay, 3.2)
    assert paced(relay, [0.2, 0.4, 0.8, 0.8]), gaps(relay)
    assert len(relay.times) <= 6  # at 0.1 s apart it would have been 32


def test_finding_events_or_failing_keeps_the_pace():
    failure = RedisConnectionError("down")
    relay = ScriptedRelay([0, 0, 3, 0, failure, 0], sweep_seconds=0.1, grace_seconds=0.8)
    run(relay, 1.6)
    # 0.1 then doubling; after the sweep that found 3 (and after the failure) back to 0.1.
    assert paced(relay, [0.2, 0.4, 0.1, 0.2, 0.1, 0.2]), gaps(relay)


def test_a_failure_report_sweeps_at_once():
    relay = ScriptedRelay([], sweep_seconds=0.05, grace_seconds=10)
    run(relay, 2.0, notify_at=1.9)
    assert relay.times[-1] - relay.times[0] >= 1.8  # the report, not the schedule (1.55 s)
