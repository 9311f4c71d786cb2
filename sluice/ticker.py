"""One background thread per client that runs periodic jobs (heartbeats, ...) and jobs on
demand (a consumer's acknowledgement flush, armed when something is pending).

Jobs wait in a heap by due time, so a client holding thousands of consumers (each with its
own heartbeat) spends per wake-up only what is due, not a look at every job; a job on demand
costs nothing while it is not armed.
"""

from __future__ import annotations

import heapq
import logging
import math
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Ticker:
    """Runs registered callables every ``interval`` seconds on a daemon thread."""

    def __init__(self, name: str = "sluice-client") -> None:
        # handle -> (interval, or None for a job on demand; the job; when it is due, or inf)
        self._jobs: dict[int, tuple[float | None, Callable[[], None], float]] = {}
        self._due: list[tuple[float, int]] = []  # (due time, handle); stale entries skipped
        self._next_id = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def every(self, interval: float, job: Callable[[], None]) -> int:
        """Run ``job`` every ``interval`` seconds; returns a handle for ``cancel``."""
        with self._lock:
            self._next_id += 1
            handle = self._next_id
            self._schedule(handle, interval, job, time.monotonic() + interval)
        self._wake.set()
        return handle

    def on_demand(self, job: Callable[[], None]) -> int:
        """Register ``job`` to run only when armed (``arm``, ``nudge``), once per arming;
        returns a handle for ``arm``, ``nudge`` and ``cancel``."""
        with self._lock:
            self._next_id += 1
            handle = self._next_id
            self._jobs[handle] = (None, job, math.inf)
        return handle

    def arm(self, handle: int, delay: float) -> None:
        """Run a job within ``delay`` seconds (sooner if it is due sooner already)."""
        at = time.monotonic() + delay
        with self._lock:
            entry = self._jobs.get(handle)
            if entry is None or entry[2] <= at:
                return
            self._schedule(handle, entry[0], entry[1], at)
        self._wake.set()

    def nudge(self, handle: int) -> None:
        """Run a job as soon as possible (then on its interval again)."""
        with self._lock:
            job = self._jobs.get(handle)
            if job is not None:
                self._schedule(handle, job[0], job[1], 0.0)
        self._wake.set()

    def cancel(self, handle: int) -> None:
        """Stop running a job."""
        with self._lock:
            self._jobs.pop(handle, None)

    def stop(self) -> None:
        """Stop the thread (jobs are not run again)."""
        self._stopped = True
        self._wake.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(5)

    def _schedule(
        self, handle: int, interval: float | None, job: Callable[[], None], at: float
    ) -> None:
        """Run ``job`` at ``at`` (the lock is held)."""
        self._jobs[handle] = (interval, job, at)
        heapq.heappush(self._due, (at, handle))

    def _take_due(self, now: float) -> tuple[list[Callable[[], None]], float]:
        """The jobs due at ``now`` (rescheduled a period on), and how long until the next."""
        due: list[Callable[[], None]] = []
        with self._lock:
            heap = self._due
            while heap and heap[0][0] <= now:
                at, handle = heapq.heappop(heap)
                entry = self._jobs.get(handle)
                if entry is None or entry[2] != at:
                    continue  # cancelled, or moved (nudged)
                interval, job, _at = entry
                due.append(job)
                if interval is None:
                    self._jobs[handle] = (None, job, math.inf)  # until armed again
                else:
                    self._schedule(handle, interval, job, now + interval)
            wait = min(1.0, heap[0][0] - now) if heap else 1.0
            if len(heap) > 2 * len(self._jobs) + 64:  # mostly stale entries: rebuild
                self._due = [
                    (at, handle) for handle, (_i, _j, at) in self._jobs.items() if at < math.inf
                ]
                heapq.heapify(self._due)
        return due, wait

    def _run(self) -> None:
        while not self._stopped:
            due, wait = self._take_due(time.monotonic())
            for job in due:
                try:
                    job()
                except Exception:
                    log.exception("background job failed; will run again")
            self._wake.wait(max(wait, 0.0))
            self._wake.clear()
