"""The client's background ticker: jobs run on their intervals, nudged jobs at once,
cancelled jobs never again, and each of thousands of jobs once per interval."""

from __future__ import annotations

import threading
import time

from sluice.ticker import Ticker


def wait_for(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_jobs_run_on_their_interval_and_nudge_runs_one_at_once():
    ticker = Ticker("test-ticker")
    try:
        fast, slow = [], []
        ticker.every(0.05, lambda: fast.append(time.monotonic()))
        handle = ticker.every(30.0, lambda: slow.append(time.monotonic()))
        wait_for(lambda: len(fast) >= 5)
        assert slow == []  # not due for 30 s
        nudged_at = time.monotonic()
        ticker.nudge(handle)
        ticker.nudge(handle)  # twice before it ran: runs once
        wait_for(lambda: len(slow) >= 1)
        assert slow[0] - nudged_at < 0.5
        time.sleep(0.2)
        assert len(slow) == 1  # then on its interval again, not at every tick
    finally:
        ticker.stop()


def test_a_cancelled_job_never_runs_again():
    ticker = Ticker("test-ticker")
    try:
        runs = []
        handle = ticker.every(0.02, lambda: runs.append(1))
        wait_for(lambda: len(runs) >= 2)
        ticker.cancel(handle)
        time.sleep(0.05)  # a run already taken off the schedule may still finish
        count = len(runs)
        time.sleep(0.2)
        assert len(runs) == count
    finally:
        ticker.stop()


def test_thousands_of_jobs_each_run_once_per_interval():
    ticker = Ticker("test-ticker")
    counts = [0] * 3000
    lock = threading.Lock()

    def job(i: int):
        def run() -> None:
            with lock:
                counts[i] += 1

        return run

    try:
        started = time.monotonic()
        for i in range(len(counts)):
            ticker.every(0.2 + (i % 100) / 1000, job(i))
        time.sleep(2.0)
        with lock:
            seen, elapsed = list(counts), time.monotonic() - started
        # Intervals of 0.2-0.3 s: at most one run per 0.2 s elapsed each (a job never runs
        # before its interval is up, however late the thread is; the sleep itself may end
        # late on a loaded machine); at least 3 in 2 s even then (none is starved by the
        # others).
        assert min(seen) >= 3 and max(seen) <= int(elapsed / 0.2), (min(seen), max(seen), elapsed)
    finally:
        ticker.stop()


def test_a_job_on_demand_runs_once_per_arming_and_never_unarmed():
    ticker = Ticker("test-ticker")
    try:
        runs: list[float] = []
        handle = ticker.on_demand(lambda: runs.append(time.monotonic()))
        time.sleep(0.3)
        assert runs == []  # never armed: never run
        armed_at = time.monotonic()
        ticker.arm(handle, 0.1)
        ticker.arm(handle, 5.0)  # later than it is due already: changes nothing
        wait_for(lambda: len(runs) == 1)
        assert 0.09 <= runs[0] - armed_at < 1.0
        time.sleep(0.3)
        assert len(runs) == 1  # once per arming
        ticker.arm(handle, 10.0)
        ticker.arm(handle, 0.05)  # sooner than it is due: moves it
        wait_for(lambda: len(runs) == 2)
        assert runs[1] - runs[0] < 2.0
        ticker.nudge(handle)
        wait_for(lambda: len(runs) == 3)
        time.sleep(0.2)
        assert len(runs) == 3
    finally:
        ticker.stop()
