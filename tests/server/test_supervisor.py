"""``server.supervisor``: backoff, and restarts of real child processes."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
import subprocess
import sys
import time

from server.supervisor import Backoff, SupervisedProcess, describe_exit

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def test_backoff_doubles_to_the_cap_and_resets_after_a_healthy_run():
    backoff = Backoff(initial=0.5, cap=10.0, healthy_after=30.0)
    assert [backoff.next_delay(1.0) for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert backoff.next_delay(30.0) == 0.5
    assert backoff.next_delay(0.1) == 1.0


def test_exits_are_described_by_code_or_signal():
    assert describe_exit(3) == "exit code 3"
    assert describe_exit(-signal.SIGKILL) == "killed by SIGKILL"
    assert describe_exit(-signal.SIGSEGV) == "killed by SIGSEGV"


def test_a_killed_child_is_restarted_and_stop_restarts_nothing(tmp_path, caplog):
    caplog.set_level(logging.INFO, "sluice.supervisor")
    child = SupervisedProcess(
        "sleeper",
        lambda: subprocess.Popen(SLEEPER),
        pid_dir=tmp_path / "run",
        backoff=Backoff(initial=0.1),
    )
    pid_file = tmp_path / "run" / "sleeper.pid"

    async def scenario() -> tuple[int, int, float]:
        stop = asyncio.Event()
        child.start()
        supervisor = asyncio.create_task(child.supervise(stop))
        first = int(pid_file.read_text())
        os.kill(first, signal.SIGKILL)
        killed = time.monotonic()
        while int(pid_file.read_text()) == first:
            assert time.monotonic() - killed < 5, "not restarted"
            await asyncio.sleep(0.02)
        restarted_after = time.monotonic() - killed
        second = int(pid_file.read_text())
        stop.set()
        await asyncio.wait_for(supervisor, 2)
        return first, second, restarted_after

    first, second, restarted_after = asyncio.run(scenario())
    try:
        assert second != first
        assert child.process is not None and child.process.pid == second
        assert child.process.poll() is None, "the restarted child should be running"
        assert child.restarts == 1
        assert 0.1 <= restarted_after < 2.0
        assert f"sleeper (pid {first}) died: killed by SIGKILL" in caplog.text
        assert f"sleeper restarted (pid {second}, restart 1)" in caplog.text
    finally:
        child.stop()
    assert child.process.poll() == -signal.SIGTERM
    assert not pid_file.exists()


def test_a_failing_restart_is_retried_with_backoff(tmp_path, caplog):
    attempts: list[float] = []

    def spawn() -> subprocess.Popen:
        attempts.append(time.monotonic())
        if len(attempts) in (2, 3):
            raise OSError("no such binary")
        return subprocess.Popen([sys.executable, "-c", "raise SystemExit(7)"])

    child = SupervisedProcess("flaky", spawn, backoff=Backoff(initial=0.05, cap=0.2))

    async def scenario() -> None:
        stop = asyncio.Event()
        child.start()
        supervisor = asyncio.create_task(child.supervise(stop))
        while len(attempts) < 5:
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.wait_for(supervisor, 2)

    asyncio.run(scenario())
    child.stop()
    gaps = [later - earlier for earlier, later in itertools.pairwise(attempts)]
    # At least 0.05, 0.1, 0.2 and 0.2 s (capped) after the child's exit or the failed start.
    assert all(gap >= delay for gap, delay in zip(gaps, [0.05, 0.1, 0.2, 0.2], strict=True)), gaps
    assert "flaky: restart 1 failed: no such binary" in caplog.text
    assert "died: exit code 7" in caplog.text


class _CountingPopen(subprocess.Popen):
    """A child whose liveness checks are counted."""

    polls = 0

    def poll(self):
        type(self).polls += 1
        return super().poll()


def test_a_running_child_is_awaited_not_polled_and_its_death_is_seen_at_once():
    child = SupervisedProcess(
        "sleeper", lambda: _CountingPopen(SLEEPER), backoff=Backoff(initial=0.05)
    )

    async def scenario() -> tuple[int, float]:
        stop = asyncio.Event()
        child.start()
        supervisor = asyncio.create_task(child.supervise(stop))
        await asyncio.sleep(1.5)
        polls_while_running = _CountingPopen.polls
        first = child.process
        assert first is not None
        first.kill()
        killed = time.monotonic()
        while child.process is first:
            assert time.monotonic() - killed < 5, "not restarted"
            await asyncio.sleep(0.005)
        restarted_after = time.monotonic() - killed
        stop.set()
        await asyncio.wait_for(supervisor, 2)
        return polls_while_running, restarted_after

    try:
        polls, restarted_after = asyncio.run(scenario())
    finally:
        child.stop()
    # Polled every 0.2 s this would be 7 or 8 checks in 1.5 s.
    assert polls <= 2, polls
    # The restart delay is 0.05 s: the death was noticed well within a polling interval.
    assert restarted_after < 0.2, restarted_after
